#!/usr/bin/env bash
# with-hdfs.sh CMD [ARGS...]: runs CMD with a MiniDFSCluster listening on
# 127.0.0.1:$MINIHDFS_PORT (9000), starting one in the background first if
# nothing listens there yet, and stopping the one it started when CMD ends
# (whatever way it ends). CMD's exit status is returned.
#
# If java or mvn is missing, CI=true installs them with apt-get (as root);
# elsewhere CMD runs without HDFS and the HDFS tests skip. Under CI=true a
# cluster that does not come up is an error; elsewhere it is a warning.
#
# Environment: MINIHDFS_PORT, MINIHDFS_START_TIMEOUT (seconds, default 300:
# covers a first Maven download), MINIHDFS_LOG (default a temporary file).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port="${MINIHDFS_PORT:-9000}"
timeout="${MINIHDFS_START_TIMEOUT:-300}"
ci="${CI:-}"

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; }

fail_or_warn() {
  if [[ "$ci" == "true" ]]; then
    echo "minihdfs: ERROR: $*" >&2
    exit 1
  fi
  echo "minihdfs: warning: $*; HDFS tests will skip" >&2
}

pid=""
stop() {
  [[ -n "$pid" ]] || return 0
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "minihdfs: did not stop in 30s; killing it" >&2
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
    fi
  fi
  wait "$pid" 2>/dev/null
  pid=""
}

have_tools() { command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; }

# CI (root on a Debian machine) installs what is missing; a developer is told.
if [[ "$ci" == "true" ]] && ! have_tools && ! listening && command -v apt-get >/dev/null 2>&1 && [[ $(id -u) == 0 ]]; then
  echo "minihdfs: installing Java 17 and Maven with apt-get" >&2
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q openjdk-17-jdk-headless maven; } >&2 ||
    echo "minihdfs: apt-get install failed" >&2
fi

if listening; then
  echo "minihdfs: something already listens on 127.0.0.1:$port; using it" >&2
elif ! have_tools; then
  fail_or_warn "java and mvn are needed to start MiniDFSCluster"
else
  log="${MINIHDFS_LOG:-$(mktemp -t gofl-minihdfs.XXXXXX.log)}"
  echo "minihdfs: starting MiniDFSCluster on 127.0.0.1:$port (log: $log)" >&2
  start=$SECONDS
  # A session of its own, so that stop() can signal mvn/java as a group.
  setsid "$here/run.sh" >"$log" 2>&1 </dev/null &
  pid=$!
  trap 'stop' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  while :; do
    if grep -q 'MINIHDFS READY' "$log" 2>/dev/null && listening; then
      echo "minihdfs: ready in $((SECONDS - start))s: $(grep -o -m1 'MINIHDFS READY.*' "$log")" >&2
      break
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid"; rc=$?; pid=""
      echo "minihdfs: exited with status $rc before it was ready; last lines of $log:" >&2
      tail -n 30 "$log" >&2
      fail_or_warn "MiniDFSCluster did not start"
      break
    fi
    if (( SECONDS - start >= timeout )); then
      echo "minihdfs: not ready after ${timeout}s; last lines of $log:" >&2
      tail -n 30 "$log" >&2
      stop
      fail_or_warn "MiniDFSCluster did not start within ${timeout}s"
      break
    fi
    sleep 0.5
  done
fi

"$@"
