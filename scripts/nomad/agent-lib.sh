# agent-lib.sh: sourced by run.sh and run-client.sh.

# stop_agent PID: stops a Nomad agent gracefully (SIGINT), SIGKILL after
# 10 s, and reaps it. Tasks the agent leaves behind die with their
# executors.
stop_agent() {
  local pid="$1"
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill -INT "$pid" 2>/dev/null
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
}
