#!/usr/bin/env bash
# with-hdfs-hosts.sh CMD [ARGS...]: runs CMD with a MiniDFSCluster whose
# DataNodes register under distinct loopback hosts (locality tests), on
# free ports, and exports
#   GOFL_TEST_HDFS_HOSTS=hdfs://127.0.0.1:PORT (the NameNode),
#   GOFL_TEST_HDFS_HOSTS_WEBHDFS=http://127.0.0.1:HTTPPORT (its WebHDFS),
#   GOFL_TEST_HDFS_HOSTS_DATANODES=127.0.0.2,127.0.0.3,127.0.0.4.
# The cluster is stopped when CMD ends (whatever way it ends). If
# GOFL_TEST_HDFS_HOSTS is already set and answers, CMD uses that cluster.
# CMD's exit status is returned. The default cluster (with-hdfs.sh) is
# untouched: this one is a second one.
#
# If java or mvn is missing, CI=true installs them with apt-get (as root);
# elsewhere CMD runs without it and the locality tests skip. Under CI=true a
# cluster that does not come up is an error; elsewhere it is a warning.
#
# Environment: GOFL_MINIDFS_DN_HOSTS (default 127.0.0.2,127.0.0.3,127.0.0.4),
# MINIHDFS_START_TIMEOUT (seconds, default 300), MINIHDFS_HOSTS_LOG (default
# a temporary file).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
svc_name=minihdfs-hosts svc_skips="the HDFS locality tests"
# shellcheck source=../lib/service.sh
. "$here/../lib/service.sh"

hosts="${GOFL_MINIDFS_DN_HOSTS:-127.0.0.2,127.0.0.3,127.0.0.4}"
existing="${GOFL_TEST_HDFS_HOSTS:-}"
existing="${existing#hdfs://}"
if [[ -n "$existing" ]] && svc_listening "${existing%:*}" "${existing##*:}"; then
  echo "minihdfs-hosts: using the cluster at GOFL_TEST_HDFS_HOSTS=$GOFL_TEST_HDFS_HOSTS" >&2
elif ! svc_need_java; then
  svc_fail_or_warn "java and mvn are needed to start MiniDFSCluster"
else
  port="$(svc_free_port)" && http="$(svc_free_port)"
  log="${MINIHDFS_HOSTS_LOG:-$(mktemp -t gofl-minihdfs-hosts.XXXXXX.log)}"
  ready() { grep -q 'MINIHDFS READY' "$log" 2>/dev/null && svc_listening 127.0.0.1 "$port"; }
  echo "minihdfs-hosts: starting MiniDFSCluster on 127.0.0.1:$port with DataNodes $hosts (log: $log)" >&2
  if svc_start "${MINIHDFS_START_TIMEOUT:-300}" "$log" ready \
    env MINIHDFS_PORT="$port" MINIHDFS_HTTP_PORT="$http" GOFL_MINIDFS_DN_HOSTS="$hosts" "$here/run.sh"; then
    grep -o -m1 'MINIHDFS READY.*' "$log" >&2
    export GOFL_TEST_HDFS_HOSTS="hdfs://127.0.0.1:$port" GOFL_TEST_HDFS_HOSTS_WEBHDFS="http://127.0.0.1:$http" \
      GOFL_TEST_HDFS_HOSTS_DATANODES="$hosts"
  else
    svc_fail_or_warn "MiniDFSCluster did not start"
  fi
fi

"$@"
