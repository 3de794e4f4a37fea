#!/usr/bin/env bash
# with-zk.sh CMD [ARGS...]: runs CMD with GOFL_TEST_ZOOKEEPER=127.0.0.1:PORT
# naming a standalone ZooKeeper (run.sh) that it starts in the background on
# a free port, and stops when CMD ends (whatever way it ends). If
# GOFL_TEST_ZOOKEEPER is already set, CMD runs against that one. CMD's exit
# status is returned. The server starts in about 2 s once its jars are in
# target/lib (the first run resolves them through Maven), and is shared by
# every test package (ha/zktest).
#
# Under CI=true a server that does not come up is an error; elsewhere it is
# a warning, and the ZooKeeper tests skip. (In CI, with-hdfs.sh, which runs
# first, installs Java and Maven.)
#
# Environment: ZOOKEEPER_START_TIMEOUT (seconds, default 180: covers a first
# Maven download), ZOOKEEPER_LOG (default a temporary file, removed at the
# end).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
timeout="${ZOOKEEPER_START_TIMEOUT:-180}"
ci="${CI:-}"

fail_or_warn() {
  if [[ "$ci" == "true" ]]; then
    echo "zookeeper: ERROR: $*" >&2
    exit 1
  fi
  echo "zookeeper: warning: $*; the ZooKeeper tests will skip" >&2
}

pid=""
stop() {
  [[ -n "$pid" ]] || return 0
  if kill -0 "$pid" 2>/dev/null; then
    # run.sh stops its server and removes its data on SIGTERM.
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "zookeeper: did not stop in 10s; killing it" >&2
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
    fi
  fi
  wait "$pid" 2>/dev/null
  pid=""
  [[ -n "${ZOOKEEPER_LOG:-}" ]] || rm -f "$log"
}

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A port in the range Linux does not hand out as ephemeral (below 32768)
# that nothing listens on; the server fails to start if another process
# takes it first, and start() tries again.
free_port() {
  local p
  for _ in $(seq 1 50); do
    p=$((20000 + RANDOM % 12000))
    listening "$p" || { echo "$p"; return 0; }
  done
  return 1
}

# start PORT: 0 ready, 1 the server exited (e.g. the port was taken), 2 timeout.
start() {
  local port=$1 begin=$SECONDS
  setsid env ZOOKEEPER_PORT="$port" "$here/run.sh" >"$log" 2>&1 </dev/null &
  pid=$!
  while :; do
    if grep -q 'ZOOKEEPER READY' "$log" 2>/dev/null; then
      echo "zookeeper: ready in $((SECONDS - begin))s at 127.0.0.1:$port" >&2
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid"; pid=""
      return 1
    fi
    if (( SECONDS - begin >= timeout )); then
      stop
      return 2
    fi
    sleep 0.2
  done
}

if [[ -n "${GOFL_TEST_ZOOKEEPER:-}" ]]; then
  echo "zookeeper: GOFL_TEST_ZOOKEEPER=$GOFL_TEST_ZOOKEEPER is set; using it" >&2
elif ! command -v java >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then
  fail_or_warn "java and mvn are needed to start ZooKeeper"
else
  log="${ZOOKEEPER_LOG:-$(mktemp -t gofl-zookeeper.XXXXXX.log)}"
  trap 'stop' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  rc=1
  for _ in 1 2 3; do
    port="$(free_port)" || break
    echo "zookeeper: starting a standalone server on 127.0.0.1:$port (log: $log)" >&2
    start "$port"; rc=$?
    [[ $rc == 1 ]] || break
  done
  if [[ $rc == 0 ]]; then
    export GOFL_TEST_ZOOKEEPER="127.0.0.1:$port"
  else
    echo "zookeeper: not started; last lines of its log:" >&2
    tail -n 30 "$log" >&2
    fail_or_warn "ZooKeeper did not start"
  fi
fi

"$@"
