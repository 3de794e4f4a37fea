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
svc_name=minihdfs svc_skips="the HDFS tests"
# shellcheck source=../lib/service.sh
. "$here/../lib/service.sh"

ready() { grep -q 'MINIHDFS READY' "$log" 2>/dev/null && svc_listening 127.0.0.1 "$port"; }

if svc_listening 127.0.0.1 "$port"; then
  echo "minihdfs: something already listens on 127.0.0.1:$port; using it" >&2
elif ! svc_need_java; then
  svc_fail_or_warn "java and mvn are needed to start MiniDFSCluster"
else
  log="${MINIHDFS_LOG:-$(mktemp -t gofl-minihdfs.XXXXXX.log)}"
  echo "minihdfs: starting MiniDFSCluster on 127.0.0.1:$port (log: $log)" >&2
  if svc_start "${MINIHDFS_START_TIMEOUT:-300}" "$log" ready "$here/run.sh"; then
    grep -o -m1 'MINIHDFS READY.*' "$log" >&2
  else
    svc_fail_or_warn "MiniDFSCluster did not start"
  fi
fi

"$@"
