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
svc_name=zookeeper svc_skips="the ZooKeeper tests"
# shellcheck source=../lib/service.sh
. "$here/../lib/service.sh"

ready() { grep -q 'ZOOKEEPER READY' "$log" 2>/dev/null; }

if [[ -n "${GOFL_TEST_ZOOKEEPER:-}" ]]; then
  echo "zookeeper: GOFL_TEST_ZOOKEEPER=$GOFL_TEST_ZOOKEEPER is set; using it" >&2
elif ! svc_need_java; then
  svc_fail_or_warn "java and mvn are needed to start ZooKeeper"
else
  log="${ZOOKEEPER_LOG:-$(mktemp -t gofl-zookeeper.XXXXXX.log)}"
  rc=1
  # A port another process takes first makes the server exit: try another.
  for _ in 1 2 3; do
    port="$(svc_free_port)" || break
    echo "zookeeper: starting a standalone server on 127.0.0.1:$port (log: $log)" >&2
    svc_start "${ZOOKEEPER_START_TIMEOUT:-180}" "$log" ready env ZOOKEEPER_PORT="$port" "$here/run.sh"; rc=$?
    [[ $rc == 1 ]] || break
  done
  if [[ $rc == 0 ]]; then
    export GOFL_TEST_ZOOKEEPER="127.0.0.1:$port"
    [[ -n "${ZOOKEEPER_LOG:-}" ]] || trap 'svc_stop; rm -f "$log"' EXIT
  else
    svc_fail_or_warn "ZooKeeper did not start"
  fi
fi

"$@"
