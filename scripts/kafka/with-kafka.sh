#!/usr/bin/env bash
# with-kafka.sh CMD [ARGS...]: runs CMD with a Kafka broker (run.sh, KRaft
# mode, loopback) on free ports and GOFL_TEST_KAFKA=127.0.0.1:PORT exported,
# stopping the broker when CMD ends (whatever way it ends). If
# GOFL_TEST_KAFKA is already set and answers, CMD uses that broker and none
# is started. CMD's exit status is returned.
#
# If java or mvn is missing, CI=true installs them with apt-get (as root);
# elsewhere CMD runs without Kafka and the Kafka tests skip. Under CI=true a
# broker that does not come up is an error; elsewhere it is a warning.
#
# Environment: KAFKA_START_TIMEOUT (seconds, default 300: covers the first
# Maven download), KAFKA_LOG (default a temporary file).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
timeout="${KAFKA_START_TIMEOUT:-300}"
ci="${CI:-}"

listening() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

fail_or_warn() {
  if [[ "$ci" == "true" ]]; then
    echo "kafka: ERROR: $*" >&2
    exit 1
  fi
  echo "kafka: warning: $*; Kafka tests will skip" >&2
}

# free_port prints a port nothing listens on (racy, as any such pick).
free_port() {
  local p
  for _ in $(seq 1 100); do
    p=$(( 20000 + RANDOM % 30000 ))
    listening 127.0.0.1 "$p" || { echo "$p"; return 0; }
  done
  return 1
}

pid=""
stop() {
  [[ -n "$pid" ]] || return 0
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "kafka: did not stop in 30s; killing it" >&2
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
    fi
  fi
  wait "$pid" 2>/dev/null
  pid=""
}

have_tools() { command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; }

if [[ -n "${GOFL_TEST_KAFKA:-}" ]] && listening "${GOFL_TEST_KAFKA%:*}" "${GOFL_TEST_KAFKA##*:}"; then
  echo "kafka: using the broker at GOFL_TEST_KAFKA=$GOFL_TEST_KAFKA" >&2
else
  if [[ "$ci" == "true" ]] && ! have_tools && command -v apt-get >/dev/null 2>&1 && [[ $(id -u) == 0 ]]; then
    echo "kafka: installing Java 17 and Maven with apt-get" >&2
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q openjdk-17-jdk-headless maven; } >&2 ||
      echo "kafka: apt-get install failed" >&2
  fi
  if ! have_tools; then
    fail_or_warn "java and mvn are needed to start Kafka"
  else
    port="$(free_port)" && cport="$(free_port)"
    log="${KAFKA_LOG:-$(mktemp -t gofl-kafka.XXXXXX.log)}"
    echo "kafka: starting Kafka on 127.0.0.1:$port (log: $log)" >&2
    start=$SECONDS
    # A session of its own, so that stop() can signal the JVM as a group.
    KAFKA_PORT="$port" KAFKA_CONTROLLER_PORT="$cport" setsid "$here/run.sh" >"$log" 2>&1 </dev/null &
    pid=$!
    trap 'stop' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    while :; do
      if grep -q 'KAFKA READY' "$log" 2>/dev/null && grep -q 'Kafka Server started' "$log"; then
        echo "kafka: ready in $((SECONDS - start))s at 127.0.0.1:$port" >&2
        export GOFL_TEST_KAFKA="127.0.0.1:$port"
        break
      fi
      if ! kill -0 "$pid" 2>/dev/null; then
        wait "$pid"; rc=$?; pid=""
        echo "kafka: exited with status $rc before it was ready; last lines of $log:" >&2
        tail -n 30 "$log" >&2
        fail_or_warn "Kafka did not start"
        break
      fi
      if (( SECONDS - start >= timeout )); then
        echo "kafka: not ready after ${timeout}s; last lines of $log:" >&2
        tail -n 30 "$log" >&2
        stop
        fail_or_warn "Kafka did not start within ${timeout}s"
        break
      fi
      sleep 0.2
    done
  fi
fi

"$@"
