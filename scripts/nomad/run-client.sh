#!/usr/bin/env bash
# run-client.sh: runs a second Nomad v1.6.1 client agent (no server) in the
# foreground beside the dev agent of scripts/nomad/run.sh, so that one
# machine has two nodes: its own data dir, its own loopback address
# ($NOMAD_CLIENT_BIND, default 127.0.0.2; tasks' ports stay on 127.0.0.1,
# the only address lo has), raw_exec (and exec, where the machine allows
# it) enabled, node class "gofl-second", node meta gofl.node=second, in
# node pool "gofl-second" (created here): only jobs in node pool
# "gofl-second" or "all" can land on it, so tests sharing the dev agent
# never do; constraints on ${node.class} force placements onto it or away
# from it. It joins the server at
# $NOMAD_SERVER (default 127.0.0.1:4647, the dev agent's RPC port) and
# serves its HTTP API on $NOMAD_CLIENT_BIND:$NOMAD_CLIENT_HTTP_PORT (default
# 5646). Prints "NOMAD CLIENT READY <node-id>" once the server lists the
# node as ready.
#
# Environment: NOMAD_SERVER, NOMAD_ADDR (the server's HTTP API, default
# http://127.0.0.1:4646), NOMAD_CLIENT_BIND, NOMAD_CLIENT_HTTP_PORT,
# NOMAD_CLIENT_NAME (default gofl-test-node-2), NOMAD_CLIENT_DATA_DIR
# (default a temporary directory, removed on exit), NOMAD_BINARY.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=agent-lib.sh
source "$here/agent-lib.sh"
server="${NOMAD_SERVER:-127.0.0.1:4647}"
api="${NOMAD_ADDR:-http://127.0.0.1:4646}"
bind="${NOMAD_CLIENT_BIND:-127.0.0.2}"
port="${NOMAD_CLIENT_HTTP_PORT:-5646}"
name="${NOMAD_CLIENT_NAME:-gofl-test-node-2}"
nomad="${NOMAD_BINARY:-$("$here/install.sh")}"
own_dir=""
dir="${NOMAD_CLIENT_DATA_DIR:-}"
if [[ -z "$dir" ]]; then dir="$(mktemp -d -t gofl-nomad-client.XXXXXX)"; own_dir=1; fi
cat >"$dir/client.hcl" <<HCL
name       = "$name"
data_dir   = "$dir/data"
bind_addr  = "$bind"
log_level  = "INFO"
ports {
  http = $port
  rpc  = $((port + 1))
  serf = $((port + 2))
}
advertise {
  http = "$bind"
  rpc  = "$bind"
  serf = "$bind"
}
client {
  enabled           = true
  servers           = ["$server"]
  node_class        = "gofl-second"
  gc_max_allocs     = 100000
  network_interface = "lo"
  node_pool         = "gofl-second"
  no_host_uuid      = true
  meta {
    "gofl.node" = "second"
  }
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
  if [[ -n "$own_dir" ]]; then remove_data_dir "$dir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# The node pool must exist before the node registers in it.
curl -fsS -X PUT -d '{"Name":"gofl-second","Description":"second gofl test client (scripts/nomad/run-client.sh)"}' \
  "$api/v1/node/pools" >/dev/null
"$nomad" agent -config "$dir/client.hcl" &
agent=$!
start=$SECONDS
while kill -0 "$agent" 2>/dev/null; do
  id="$(curl -fsS "$api/v1/nodes" 2>/dev/null | tr '{' '\n' | grep "\"Name\":\"$name\"" | grep '"Status":"ready"' | sed -E 's/.*"ID":"([^"]+)".*/\1/' | head -n1 || true)"
  if [[ -n "$id" ]]; then
    echo "NOMAD CLIENT READY $id (in $((SECONDS - start))s, $bind, data dir $dir)"
    break
  fi
  sleep 0.25
done
wait "$agent"
