#!/usr/bin/env bash
# with-kerberos-hdfs.sh CMD [ARGS...]: runs CMD with a Kerberized
# MiniDFSCluster (run.sh with MINIHDFS_KERBEROS_KEYTAB) on free ports,
# started in the background and stopped when CMD ends, whatever way it ends.
# It needs the KDC of scripts/kdc/with-kdc.sh (GOFL_TEST_KDC_*); without
# one it starts one first, so this one wrapper is enough. CMD's exit status
# is returned. CMD sees:
#   GOFL_TEST_HDFS_KERBEROS_NAMENODE  hdfs://127.0.0.1:PORT
#   GOFL_TEST_HDFS_KERBEROS_WEBHDFS   http://127.0.0.1:PORT (SPNEGO)
#   GOFL_TEST_HDFS_KERBEROS_CONF_DIR  core-site.xml and hdfs-site.xml for
#                                     clients (HADOOP_CONF_DIR)
# and the GOFL_TEST_KDC_* of the KDC. If GOFL_TEST_HDFS_KERBEROS_NAMENODE
# is already set, CMD runs against that cluster.
#
# Under CI=true a cluster that does not come up is an error; elsewhere a
# warning, and the Kerberos HDFS tests skip.
#
# Environment: MINIHDFS_START_TIMEOUT (seconds, default 300),
# MINIHDFS_TOKEN_RENEW_INTERVAL_MS (delegation-token renew interval).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ -z "${GOFL_TEST_KDC_KRB5_CONF:-}" && -z "${GOFL_TEST_HDFS_KERBEROS_NAMENODE:-}" && -z "${_GOFL_KRB_HDFS_KDC_TRIED:-}" ]]; then
  export _GOFL_KRB_HDFS_KDC_TRIED=1
  exec "$here/../kdc/with-kdc.sh" "$here/with-kerberos-hdfs.sh" "$@"
fi
unset _GOFL_KRB_HDFS_KDC_TRIED
svc_name=minihdfs-kerberos svc_skips="the Kerberos HDFS tests"
# shellcheck source=../lib/service.sh
. "$here/../lib/service.sh"

ready() { grep -q 'MINIHDFS READY' "$dir/minihdfs.log" 2>/dev/null; }

# client_conf DIR PORT HTTP_PORT: the Hadoop client configuration of the
# cluster.
client_conf() {
  cat >"$1/core-site.xml" <<XML
<?xml version="1.0"?>
<configuration>
  <property><name>fs.defaultFS</name><value>hdfs://127.0.0.1:$2</value></property>
  <property><name>hadoop.security.authentication</name><value>kerberos</value></property>
  <property><name>hadoop.rpc.protection</name><value>authentication</value></property>
</configuration>
XML
  cat >"$1/hdfs-site.xml" <<XML
<?xml version="1.0"?>
<configuration>
  <property><name>dfs.namenode.kerberos.principal</name><value>hdfs/localhost@$GOFL_TEST_KDC_REALM</value></property>
  <property><name>dfs.data.transfer.protection</name><value>authentication</value></property>
  <property><name>dfs.block.access.token.enable</name><value>true</value></property>
  <property><name>dfs.namenode.http-address</name><value>127.0.0.1:$3</value></property>
  <property><name>dfs.web.authentication.kerberos.principal</name><value>HTTP/localhost@$GOFL_TEST_KDC_REALM</value></property>
</configuration>
XML
}

if [[ -n "${GOFL_TEST_HDFS_KERBEROS_NAMENODE:-}" ]]; then
  echo "minihdfs-kerberos: GOFL_TEST_HDFS_KERBEROS_NAMENODE=$GOFL_TEST_HDFS_KERBEROS_NAMENODE is set; using it" >&2
elif [[ -z "${GOFL_TEST_KDC_KRB5_CONF:-}" ]]; then
  svc_fail_or_warn "no KDC (scripts/kdc/with-kdc.sh did not start one)"
elif ! svc_need_java; then
  svc_fail_or_warn "java and mvn are needed to start MiniDFSCluster"
else
  dir="$(mktemp -d -t gofl-minihdfs-krb.XXXXXX)"
  rc=1
  for _ in 1 2 3; do
    port="$(svc_free_port)" && http="$(svc_free_port)" || break
    echo "minihdfs-kerberos: starting a Kerberized MiniDFSCluster on 127.0.0.1:$port (log: $dir/minihdfs.log)" >&2
    svc_start "${MINIHDFS_START_TIMEOUT:-300}" "$dir/minihdfs.log" ready env \
      MINIHDFS_PORT="$port" MINIHDFS_HTTP_PORT="$http" MINIHDFS_DIR="$dir/data" \
      MINIHDFS_KERBEROS_KEYTAB="$GOFL_TEST_KDC_SERVICE_KEYTAB" MINIHDFS_KRB5_CONF="$GOFL_TEST_KDC_KRB5_CONF" \
      MINIHDFS_KERBEROS_REALM="$GOFL_TEST_KDC_REALM" "$here/run.sh"; rc=$?
    [[ $rc == 1 ]] || break
  done
  trap 'svc_stop; rm -rf "$dir"' EXIT # after svc_start, which sets its own
  if [[ $rc == 0 ]]; then
    grep -o -m1 'MINIHDFS READY.*' "$dir/minihdfs.log" >&2
    mkdir -p "$dir/conf"
    client_conf "$dir/conf" "$port" "$http"
    export GOFL_TEST_HDFS_KERBEROS_NAMENODE="hdfs://127.0.0.1:$port"
    export GOFL_TEST_HDFS_KERBEROS_WEBHDFS="http://127.0.0.1:$http"
    export GOFL_TEST_HDFS_KERBEROS_CONF_DIR="$dir/conf"
  else
    svc_fail_or_warn "the Kerberized MiniDFSCluster did not start"
  fi
fi

"$@"
