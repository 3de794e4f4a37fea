#!/usr/bin/env bash
# bench-deploy.sh: per-job `gofl run` to RUNNING and to FINISHED on the
# real Nomad agent at $NOMAD_ADDR (start one with scripts/nomad/with-nomad.sh
# or `make nomad`) beside the local provider, in one run, for a trivial
# wordcount. Times are taken by this script as each status line arrives on
# gofl's output (no parsing of clock times); RUNNING is the first line at
# RUNNING or later (a fast job may go straight to FINISHED). One unmeasured
# warm-up run stages the job binary first, so no measured run uploads it.
# Environment: RUNS (default 3), GO (default go).
set -euo pipefail
runs="${RUNS:-3}"
go="${GO:-go}"
: "${NOMAD_ADDR:?set NOMAD_ADDR (scripts/nomad/with-nomad.sh $0)}"
if ! curl -fsS -m 5 "$NOMAD_ADDR/v1/agent/self" >/dev/null; then
  echo "bench-deploy: no Nomad agent answers at NOMAD_ADDR=$NOMAD_ADDR" >&2
  exit 1
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
work="$(mktemp -d -t gofl-bench-nomad-XXXXXX)"
trap 'rm -rf "$work"' EXIT
( cd "$root" && "$go" build -o "$work/gofl" ./cmd/gofl && "$go" build -o "$work/wordcount" ./examples/wordcount )
mkdir -p "$work/home"
printf 'to be or not to be\nthat is the question\n' > "$work/input.txt"
export HOME="$work/home" XDG_STATE_HOME=
gofl=("$work/gofl" -D "deployment.binary=$work/gofl" -D log.level=warn)
now_ms() { date +%s%3N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2))}'; }

# measure TARGET OUT: one per-job run; prints "RUNNING_MS FINISHED_MS".
measure() {
  local target="$1" out="$2" t0 r="" f="" line rc=""
  : > "$work/log"
  t0=$(now_ms)
  while IFS= read -r line; do
    printf '%s\n' "$line" >> "$work/log"
    case "$line" in
      "gofl-bench-exit "*) rc="${line#gofl-bench-exit }" ;;
      \[*\]\ RUNNING*) [[ -n "$r" ]] || r=$(( $(now_ms) - t0 )) ;;
      \[*\]\ FINISHED*) [[ -n "$r" ]] || r=$(( $(now_ms) - t0 )); [[ -n "$f" ]] || f=$(( $(now_ms) - t0 )) ;;
    esac
  done < <("${gofl[@]}" run -m per-job -t "$target" -D "provider.nomad.address=$NOMAD_ADDR" "$work/wordcount" \
      --input "$work/input.txt" --output "$out" 2>&1; echo "gofl-bench-exit $?")
  if [[ "$rc" != 0 || -z "$f" ]]; then
    echo "bench-deploy: gofl run -t $target failed (exit ${rc:-?}):" >&2
    cat "$work/log" >&2
    return 1
  fi
  echo "$r $f"
}

measure local "$work/out-warmup" >/dev/null
for target in local nomad; do
  : > "$work/running"; : > "$work/finished"
  for i in $(seq 1 "$runs"); do
    times="$(measure "$target" "$work/out-$target-$i")" || exit 1
    read -r r f <<<"$times"
    echo "$target run $i: RUNNING ${r} ms, FINISHED ${f} ms"
    echo "$r" >> "$work/running"; echo "$f" >> "$work/finished"
  done
  echo "$target median of $runs: RUNNING $(median < "$work/running") ms, FINISHED $(median < "$work/finished") ms"
done
