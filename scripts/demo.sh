#!/usr/bin/env bash
# gofl's main job until the SDK lands: starts a standalone cluster (one
# JobManager and two TaskManager processes on loopback), submits the
# wordcount-shaped JobGraph in scripts/jobs/ (built-in tasks; the count
# stage fails once on purpose to show region failover and a fixed-delay
# restart), follows it to FINISHED, and stops the cluster again.
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
trap 'scripts/stop-cluster.sh --dir "$dir" >/dev/null || true; rm -rf "$dir"' EXIT

[ -x bin/gofl ] || make build
scripts/start-cluster.sh -n 2 --dir "$dir" -- \
  -D "rest.port=$rest_port" -D "jobmanager.rpc.port=$rpc_port" \
  -D taskmanager.numberOfTaskSlots=2 -D heartbeat.interval=1s -D heartbeat.timeout=5s
bin/gofl submit --wait --binary bin/gofl -m "127.0.0.1:$rest_port" scripts/jobs/wordcount-shape.json
bin/gofl info -m "127.0.0.1:$rest_port" "$(bin/gofl list -m "127.0.0.1:$rest_port" | awk 'NR==2 {print $1}')"
