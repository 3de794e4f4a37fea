#!/usr/bin/env bash
# gofl's main job: the wordcount example on a real standalone cluster. It
# starts a JobManager and two TaskManager processes on loopback
# (scripts/start-cluster.sh), writes a sample text, runs
# `gofl run -p 4 bin/wordcount` (plan locally, upload the job binary, submit,
# follow to the end: the tasks run in per-job runner processes and their
# records cross the network between TaskManagers), prints the most frequent
# words, and stops the cluster.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_port() {
  local p=$1
  while ! port_free "$p"; do p=$((p + 1)); done
  echo "$p"
}
rest_port=$(pick_port "${GOFL_DEMO_REST_PORT:-18081}")
rpc_port=$(pick_port "${GOFL_DEMO_RPC_PORT:-16123}")
dir=$(mktemp -d "${TMPDIR:-/tmp}/gofl-demo.XXXXXX")
trap 'scripts/stop-cluster.sh --dir "$dir/cluster" >/dev/null || true; rm -rf "$dir"' EXIT

[ -x bin/gofl ] || make build
[ -x bin/wordcount ] || go build -o bin/wordcount ./examples/wordcount

# A sample text: this repository's docs plus some non-ASCII words.
{ cat README.md docs/ARCHITECTURE.md; printf 'Grüße aus Köln! Café, café, CAFÉ. 東京 東京 naïve façade\n'; } > "$dir/input.txt"

scripts/start-cluster.sh -n 2 --dir "$dir/cluster" -- \
  -D "rest.port=$rest_port" -D "jobmanager.rpc.port=$rpc_port" \
  -D taskmanager.numberOfTaskSlots=2 -D heartbeat.interval=1s -D heartbeat.timeout=5s
bin/gofl run -m "127.0.0.1:$rest_port" -p 4 bin/wordcount --input "$dir/input.txt" --output "$dir/out"
echo
echo "Most frequent words ($(cat "$dir"/out/* | wc -l) distinct, in $(ls "$dir/out" | wc -l) part files):"
sort -k2,2nr -k1,1 "$dir"/out/* | head -10
