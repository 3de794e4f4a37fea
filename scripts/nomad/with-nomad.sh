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
timeout="${NOMAD_START_TIMEOUT:-120}"
ci="${CI:-}"
addr="http://127.0.0.1:$port"

answers() { curl -fsS -m 2 "$1/v1/agent/self" >/dev/null 2>&1; }

fail_or_warn() {
  if [[ "$ci" == "true" ]]; then
    echo "nomad: ERROR: $*" >&2
    exit 1
  fi
  echo "nomad: warning: $*; the real-agent Nomad tests will skip" >&2
}

pid=""
stop() {
  [[ -n "$pid" ]] || return 0
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "nomad: did not stop in 30s; killing it" >&2
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
    fi
  fi
  wait "$pid" 2>/dev/null
  pid=""
}

if [[ -n "${NOMAD_ADDR:-}" ]]; then
  echo "nomad: NOMAD_ADDR=$NOMAD_ADDR is set; using it" >&2
elif answers "$addr"; then
  echo "nomad: a Nomad agent already answers at $addr; using it" >&2
  export NOMAD_ADDR="$addr"
elif ! command -v curl >/dev/null 2>&1; then
  fail_or_warn "curl is needed to watch the agent start"
elif ! "$here/install.sh" >/dev/null; then
  fail_or_warn "no usable Nomad v1.6.1 binary (scripts/nomad/install.sh)"
else
  log="${NOMAD_LOG:-$(mktemp -t gofl-nomad.XXXXXX.log)}"
  echo "nomad: starting a dev agent at $addr (log: $log)" >&2
  start=$SECONDS
  # A session of its own, so that stop() signals the agent and its tasks.
  NOMAD_HTTP_PORT="$port" setsid "$here/run.sh" >"$log" 2>&1 </dev/null &
  pid=$!
  trap 'stop' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  while :; do
    if grep -q 'NOMAD READY' "$log" 2>/dev/null; then
      echo "nomad: ready in $((SECONDS - start))s" >&2
      export NOMAD_ADDR="$addr"
      break
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid"; rc=$?; pid=""
      echo "nomad: exited with status $rc before it was ready; last lines of $log:" >&2
      tail -n 30 "$log" >&2
      fail_or_warn "the Nomad dev agent did not start"
      break
    fi
    if (( SECONDS - start >= timeout )); then
      echo "nomad: not ready after ${timeout}s; last lines of $log:" >&2
      tail -n 30 "$log" >&2
      stop
      fail_or_warn "the Nomad dev agent did not start within ${timeout}s"
      break
    fi
    sleep 0.25
  done
fi

"$@"
