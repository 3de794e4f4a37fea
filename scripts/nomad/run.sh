#!/usr/bin/env bash
# run.sh: runs a real Nomad v1.6.1 dev agent (server and client in one) in
# the foreground for the tests: loopback only, raw_exec enabled, its state
# in a temporary data dir removed on exit. HTTP API on
# 127.0.0.1:$NOMAD_HTTP_PORT (default 4646; RPC and Serf on the next two
# ports). Prints "NOMAD READY http://127.0.0.1:PORT" once the API answers
# and the node is ready to take allocations.
#
# Environment: NOMAD_HTTP_PORT, NOMAD_BIND (default 127.0.0.1),
# NOMAD_DATA_DIR (default a temporary directory, removed on exit),
# NOMAD_NODE_NAME, NOMAD_BINARY (default: scripts/nomad/install.sh's).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=agent-lib.sh
source "$here/agent-lib.sh"
port="${NOMAD_HTTP_PORT:-4646}"
bind="${NOMAD_BIND:-127.0.0.1}"
nomad="${NOMAD_BINARY:-$("$here/install.sh")}"
own_dir=""
dir="${NOMAD_DATA_DIR:-}"
if [[ -z "$dir" ]]; then dir="$(mktemp -d -t gofl-nomad.XXXXXX)"; own_dir=1; fi
cfg="$dir/agent.hcl"
cat >"$cfg" <<HCL
name = "${NOMAD_NODE_NAME:-gofl-test-node}"
ports {
  http = $port
  rpc  = $((port + 1))
  serf = $((port + 2))
}
# Every test shares this agent: past 50 allocations (the default) a client
# garbage-collects old ones before it runs a new one, one or two at a time,
# and an exec allocation's chroot takes seconds to remove, so new
# allocations would wait. The data dir goes when the agent stops.
client {
  gc_max_allocs = 100000
}
# The event broker keeps 100 events by default and ends a subscription
# whose next event it dropped ("event dropped from buffer"): the parallel
# tests publish bursts of more than that, which ended the event-stream
# test's fresh subscription.
server {
  event_buffer_size = 100000
}
plugin "raw_exec" {
  config {
    enabled = true
  }
}
HCL
agent=""
cleanup() {
  stop_agent "$agent"
  # The data dir holds the alloc dirs.
  if [[ -n "$own_dir" ]]; then remove_data_dir "$dir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
"$nomad" agent -dev -bind "$bind" -data-dir "$dir/data" -config "$cfg" &
agent=$!
addr="http://$bind:$port"
start=$SECONDS
while kill -0 "$agent" 2>/dev/null; do
  if curl -fsS "$addr/v1/nodes" 2>/dev/null | grep -q '"Status":"ready"'; then
    echo "NOMAD READY $addr (in $((SECONDS - start))s, data dir $dir)"
    break
  fi
  sleep 0.25
done
wait "$agent"
