# service.sh: sourced by the with-*.sh wrappers that start an external
# component for the tests (MiniDFSCluster, Nomad, ZooKeeper, Kafka) and
# stop it when the wrapped command ends. Set svc_name (message prefix) and
# svc_skips (what skips without it) before using these.

svc_ci="${CI:-}"
svc_pid=""

# svc_fail_or_warn MSG: under CI=true an error that ends the wrapper;
# elsewhere a warning, and the tests that need the component skip.
svc_fail_or_warn() {
  if [[ "$svc_ci" == "true" ]]; then
    echo "$svc_name: ERROR: $*" >&2
    exit 1
  fi
  echo "$svc_name: warning: $*; $svc_skips will skip" >&2
}

# svc_listening HOST PORT: something accepts TCP connections there.
svc_listening() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# svc_free_port: a port in 10000-19999 that nothing listens on: below
# Nomad's dynamic ports (20000-32000), which a Nomad agent hands to tasks
# without knowing who else listens there, and Linux's ephemeral ports
# (32768 and up). Racy, as any such pick: callers retry a start that fails.
svc_free_port() {
  local p
  for _ in $(seq 1 100); do
    p=$((10000 + RANDOM % 10000))
    svc_listening 127.0.0.1 "$p" || { echo "$p"; return 0; }
  done
  return 1
}

svc_have_java() { command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; }

# svc_need_java: CI (root on a Debian machine) installs Java 17 and Maven
# when they are missing; false when they are still missing.
svc_need_java() {
  if [[ "$svc_ci" == "true" ]] && ! svc_have_java && command -v apt-get >/dev/null 2>&1 && [[ $(id -u) == 0 ]]; then
    echo "$svc_name: installing Java 17 and Maven with apt-get" >&2
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q openjdk-17-jdk-headless maven; } >&2 ||
      echo "$svc_name: apt-get install failed" >&2
  fi
  svc_have_java
}

# svc_stop: stops the component started by svc_start (its whole session:
# SIGTERM, SIGKILL after 30 s) and reaps it. Idempotent.
svc_stop() {
  [[ -n "$svc_pid" ]] || return 0
  if kill -0 "$svc_pid" 2>/dev/null; then
    kill -TERM -- "-$svc_pid" 2>/dev/null || kill -TERM "$svc_pid" 2>/dev/null
    for _ in $(seq 1 120); do kill -0 "$svc_pid" 2>/dev/null || break; sleep 0.25; done
    if kill -0 "$svc_pid" 2>/dev/null; then
      echo "$svc_name: did not stop in 30s; killing it" >&2
      kill -KILL -- "-$svc_pid" 2>/dev/null || kill -KILL "$svc_pid" 2>/dev/null
    fi
  fi
  wait "$svc_pid" 2>/dev/null
  svc_pid=""
}

# svc_start TIMEOUT LOG READY CMD...: runs CMD in a session of its own with
# its output in LOG, stopped when the wrapper exits, and waits until the
# command READY succeeds. Returns 0 once ready, 1 when CMD exited first
# (e.g. its port was taken), 2 after TIMEOUT seconds (CMD stopped); both
# failures print the end of LOG.
svc_start() {
  local timeout=$1 log=$2 ready=$3 begin=$SECONDS rc
  shift 3
  setsid "$@" >"$log" 2>&1 </dev/null &
  svc_pid=$!
  trap 'svc_stop' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  while :; do
    if "$ready"; then
      echo "$svc_name: ready in $((SECONDS - begin))s" >&2
      return 0
    fi
    if ! kill -0 "$svc_pid" 2>/dev/null; then
      wait "$svc_pid"; rc=$?; svc_pid=""
      echo "$svc_name: exited with status $rc before it was ready; last lines of $log:" >&2
      tail -n 30 "$log" >&2
      return 1
    fi
    if (( SECONDS - begin >= timeout )); then
      echo "$svc_name: not ready after ${timeout}s; last lines of $log:" >&2
      tail -n 30 "$log" >&2
      svc_stop
      return 2
    fi
    sleep 0.25
  done
}
