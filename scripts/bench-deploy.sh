#!/usr/bin/env bash
# bench-deploy.sh: time from `gofl run` to RUNNING and to FINISHED for a
# trivial job (examples/wordcount on a few lines) on the local provider,
# in per-job mode, and the submit time to a running session (detached:
# plan + upload check + submit, the binary already on the JobManager).
#
# Environment: RUNS (default 5), GO (default go), KEEP=1 keeps the temp dir.
# Everything runs under a temporary $HOME: the local provider's clusters,
# the session state and file://$HOME staging are the benchmark's own.
set -euo pipefail
runs="${RUNS:-5}"
go="${GO:-go}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d -t gofl-bench-deploy-XXXXXX)"
session=""
cleanup() {
  if [[ -n "$session" ]]; then HOME="$work/home" "$work/gofl" session stop "$session" >/dev/null 2>&1 || true; fi
  [[ "${KEEP:-}" == 1 ]] || rm -rf "$work"
}
trap cleanup EXIT

( cd "$root" && "$go" build -o "$work/gofl" ./cmd/gofl && "$go" build -o "$work/wordcount" ./examples/wordcount )
mkdir -p "$work/home"
printf 'to be or not to be\nthat is the question\n' > "$work/input.txt"
export HOME="$work/home" XDG_STATE_HOME=
gofl=("$work/gofl" -D "deployment.binary=$work/gofl" -D log.level=warn)

now_ms() { date +%s%3N; }
# ms of the first follow line "[HH:MM:SS.mmm] STATE ..." of STATE in $1
at_ms() { local ts; ts=$(grep -m1 -E "^\[[0-9:.]+\] $2" "$1" | sed -E 's/^\[([0-9:.]+)\].*/\1/') || return 1
  echo $(( $(date -d "today $ts" +%s%3N) )); }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2))}'; }

echo "per-job mode, local provider, $runs runs (ms from gofl run):"
: > "$work/running" ; : > "$work/finished"
for i in $(seq 1 "$runs"); do
  out="$work/out-perjob-$i"
  t0=$(now_ms)
  "${gofl[@]}" run -m per-job -t local "$work/wordcount" --input "$work/input.txt" --output "$out" > "$work/log" 2>&1
  r=$(( $(at_ms "$work/log" RUNNING) - t0 )); f=$(( $(at_ms "$work/log" FINISHED) - t0 ))
  echo "  run $i: RUNNING ${r} ms, FINISHED ${f} ms"
  echo "$r" >> "$work/running"; echo "$f" >> "$work/finished"
done
echo "  median: RUNNING $(median < "$work/running") ms, FINISHED $(median < "$work/finished") ms (target <= 1000)"

session="bench-session"
"${gofl[@]}" session start -t local --name "$session" -n 1 > /dev/null
# Warm-up: uploads the binary and starts the TaskManager's runner path once.
"${gofl[@]}" run -m session "$work/wordcount" --input "$work/input.txt" --output "$work/out-warm" > /dev/null 2>&1
echo "session mode, $runs runs (ms from gofl run; submit = gofl run --detached returns):"
: > "$work/submit"; : > "$work/running"; : > "$work/finished"
for i in $(seq 1 "$runs"); do
  t0=$(now_ms)
  "${gofl[@]}" run -m session --detached "$work/wordcount" --input "$work/input.txt" --output "$work/out-sd-$i" > /dev/null 2>&1
  s=$(( $(now_ms) - t0 ))
  t0=$(now_ms)
  "${gofl[@]}" run -m session "$work/wordcount" --input "$work/input.txt" --output "$work/out-s-$i" > "$work/log" 2>&1
  r=$(( $(at_ms "$work/log" RUNNING) - t0 )); f=$(( $(at_ms "$work/log" FINISHED) - t0 ))
  echo "  run $i: submit ${s} ms, RUNNING ${r} ms, FINISHED ${f} ms"
  echo "$s" >> "$work/submit"; echo "$r" >> "$work/running"; echo "$f" >> "$work/finished"
done
echo "  median: submit $(median < "$work/submit") ms (target <= 100), RUNNING $(median < "$work/running") ms, FINISHED $(median < "$work/finished") ms"
