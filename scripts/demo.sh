#!/usr/bin/env bash
# gofl's main job: the wordcount example in per-job mode on the local
# provider with local staging. `gofl run -m per-job -t local` plans the job,
# stages the gofl and job binaries (content-addressed, so an unchanged binary
# is never copied twice) and the JobGraph under file://$HOME/.gofl, deploys a
# JobManager process that starts its TaskManager processes on demand, follows
# the job to FINISHED, and the cluster then shuts down and removes its
# staging directory. The tasks run in per-job runner processes and their
# records cross the network data plane between the TaskManagers.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

dir=$(mktemp -d "${TMPDIR:-/tmp}/gofl-demo.XXXXXX")
trap 'rm -rf "$dir"' EXIT
[ -x bin/gofl ] || make build
[ -x bin/wordcount ] || go build -o bin/wordcount ./examples/wordcount

# A sample text: this repository's docs plus some non-ASCII words.
{ cat README.md docs/ARCHITECTURE.md; printf 'Grüße aus Köln! Café, café, CAFÉ. 東京 東京 naïve façade\n'; } > "$dir/input.txt"

bin/gofl --log-level warn run -m per-job -t local -p 4 \
  -D taskmanager.numberOfTaskSlots=2 \
  bin/wordcount --input "$dir/input.txt" --output "$dir/out"
echo
echo "Most frequent words ($(cat "$dir"/out/* | wc -l) distinct, in $(ls "$dir/out" | wc -l) part files):"
sort -k2,2nr -k1,1 "$dir"/out/* | awk 'NR <= 10'
