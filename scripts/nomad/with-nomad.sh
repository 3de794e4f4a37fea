#!/usr/bin/env bash
# with-nomad.sh CMD [ARGS...]: runs CMD with NOMAD_ADDR pointing at a real
# Nomad v1.6.1 dev agent (scripts/nomad/run.sh), starting one in the
# background first unless NOMAD_ADDR is already set or something already
# answers at 127.0.0.1:$NOMAD_HTTP_PORT (4646), and stopping the one it
# started when CMD ends (whatever way it ends). CMD's exit status is
# returned. The agent starts in a few seconds and is shared by every test
# package.
#
# Under CI=true an agent that does not come up is an error; elsewhere it is
# a warning, and the real-agent tests skip (providers/nomad/nomadtest).
#
# Environment: NOMAD_HTTP_PORT, NOMAD_START_TIMEOUT (seconds, default 120;
# covers building from source only with a larger value), NOMAD_LOG
# (default a temporary file).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port="${NOMAD_HTTP_PORT:-4646}"
addr="http://127.0.0.1:$port"
svc_name=nomad svc_skips="the real-agent Nomad tests"
# shellcheck source=../lib/service.sh
. "$here/../lib/service.sh"

answers() { curl -fsS -m 2 "$1/v1/agent/self" >/dev/null 2>&1; }
ready() { grep -q 'NOMAD READY' "$log" 2>/dev/null; }

if [[ -n "${NOMAD_ADDR:-}" ]]; then
  echo "nomad: NOMAD_ADDR=$NOMAD_ADDR is set; using it" >&2
elif answers "$addr"; then
  echo "nomad: a Nomad agent already answers at $addr; using it" >&2
  export NOMAD_ADDR="$addr"
elif ! command -v curl >/dev/null 2>&1; then
  svc_fail_or_warn "curl is needed to watch the agent start"
elif ! "$here/install.sh" >/dev/null; then
  svc_fail_or_warn "no usable Nomad v1.6.1 binary (scripts/nomad/install.sh)"
else
  log="${NOMAD_LOG:-$(mktemp -t gofl-nomad.XXXXXX.log)}"
  echo "nomad: starting a dev agent at $addr (log: $log)" >&2
  if svc_start "${NOMAD_START_TIMEOUT:-120}" "$log" ready env NOMAD_HTTP_PORT="$port" "$here/run.sh"; then
    export NOMAD_ADDR="$addr"
  else
    svc_fail_or_warn "the Nomad dev agent did not start"
  fi
fi

"$@"
