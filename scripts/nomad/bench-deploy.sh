#!/usr/bin/env bash
# bench-deploy.sh: per-job `gofl run` to RUNNING and to FINISHED on the
# real Nomad agent at $NOMAD_ADDR (start one with scripts/nomad/with-nomad.sh
# or `make nomad`) beside the local provider, in one run, for a trivial
# wordcount. Environment: RUNS (default 3), GO (default go).
set -euo pipefail
runs="${RUNS:-3}"
go="${GO:-go}"
: "${NOMAD_ADDR:?set NOMAD_ADDR (scripts/nomad/with-nomad.sh $0)}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="$(mktemp -d -t gofl-bench-nomad-XXXXXX)"
trap 'rm -rf "$work"' EXIT
( cd "$root" && "$go" build -o "$work/gofl" ./cmd/gofl && "$go" build -o "$work/wordcount" ./examples/wordcount )
mkdir -p "$work/home"
printf 'to be or not to be\nthat is the question\n' > "$work/input.txt"
export HOME="$work/home" XDG_STATE_HOME=
gofl=("$work/gofl" -D "deployment.binary=$work/gofl" -D log.level=warn)
now_ms() { date +%s%3N; }
at_ms() { local ts; ts=$(grep -m1 -E "^\[[0-9:.]+\] $2" "$1" | sed -E 's/^\[([0-9:.]+)\].*/\1/') || return 1
  date -d "today $ts" +%s%3N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2))}'; }
for target in local nomad; do
  : > "$work/running"; : > "$work/finished"
  for i in $(seq 1 "$runs"); do
    t0=$(now_ms)
    "${gofl[@]}" run -m per-job -t "$target" -D "provider.nomad.address=$NOMAD_ADDR" "$work/wordcount" \
      --input "$work/input.txt" --output "$work/out-$target-$i" > "$work/log" 2>&1 || { cat "$work/log" >&2; exit 1; }
    r=$(( $(at_ms "$work/log" RUNNING) - t0 )); f=$(( $(at_ms "$work/log" FINISHED) - t0 ))
    echo "$target run $i: RUNNING ${r} ms, FINISHED ${f} ms"
    echo "$r" >> "$work/running"; echo "$f" >> "$work/finished"
  done
  echo "$target median of $runs: RUNNING $(median < "$work/running") ms, FINISHED $(median < "$work/finished") ms"
done
