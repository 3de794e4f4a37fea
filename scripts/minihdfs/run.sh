#!/usr/bin/env bash
# Runs Hadoop's MiniDFSCluster (hadoop-client-minicluster from Maven Central)
# in the foreground: NameNode RPC at hdfs://127.0.0.1:$MINIHDFS_PORT (9000),
# WebHDFS at http://127.0.0.1:$MINIHDFS_HTTP_PORT (9870), one DataNode,
# permissions off (on when Kerberized). Prints "MINIHDFS READY ..." when it accepts requests and
# stops (deleting its data) on SIGTERM or Ctrl-C.
#
# The first run resolves the artifacts into ~/.m2 and compiles the launcher
# into target/; later runs go straight to `java`.
#
# Environment: MINIHDFS_PORT, MINIHDFS_HTTP_PORT, MINIHDFS_DIR (data
# directory; default a fresh temporary one, removed on exit),
# MINIHDFS_JAVA_OPTS (default -Xmx512m), GOFL_MINIDFS_DN_HOSTS (e.g.
# 127.0.0.2,127.0.0.3: one DataNode registered under each host name, for
# locality tests; default one DataNode on 127.0.0.1). Kerberized (see MiniHdfs.java):
# MINIHDFS_KERBEROS_KEYTAB (hdfs/localhost and HTTP/localhost keys),
# MINIHDFS_KRB5_CONF, MINIHDFS_KERBEROS_REALM (GOFL.TEST),
# MINIHDFS_TOKEN_RENEW_INTERVAL_MS (delegation tokens; default a day).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cp_file="$here/target/classpath.txt"
stamp="$here/target/.built"

for tool in java mvn; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "minihdfs: $tool not found on PATH (needs Java 17 and Maven)" >&2
    exit 2
  fi
done

needs_build() {
  [[ -f "$stamp" && -f "$cp_file" ]] || return 0
  [[ -n "$(find "$here/pom.xml" "$here/src" -newer "$stamp" -print -quit)" ]] && return 0
  local jar
  IFS=: read -r -a jars < "$cp_file"
  for jar in "${jars[@]}"; do [[ -f "$jar" ]] || return 0; done
  return 1
}

if needs_build; then
  echo "minihdfs: resolving Hadoop $(sed -n 's:.*<hadoop.version>\(.*\)</hadoop.version>.*:\1:p' "$here/pom.xml") from Maven (cached in ~/.m2) and compiling the launcher" >&2
  mvn -q -B -Dstyle.color=never -f "$here/pom.xml" compile dependency:build-classpath \
    -Dmdep.outputFile="$cp_file" -Dmdep.includeScope=runtime >&2
  touch "$stamp"
fi

krb_opts=()
if [[ -n "${MINIHDFS_KERBEROS_KEYTAB:-}" ]]; then
  krb_opts=(
    -Djava.security.krb5.conf="${MINIHDFS_KRB5_CONF:?MINIHDFS_KRB5_CONF is needed with MINIHDFS_KERBEROS_KEYTAB}"
    -Dminihdfs.kerberos.keytab="$MINIHDFS_KERBEROS_KEYTAB"
    -Dminihdfs.kerberos.realm="${MINIHDFS_KERBEROS_REALM:-GOFL.TEST}"
    -Dminihdfs.token.renew.interval.ms="${MINIHDFS_TOKEN_RENEW_INTERVAL_MS:-86400000}"
  )
fi

# shellcheck disable=SC2086 # MINIHDFS_JAVA_OPTS is a list of flags
exec java ${MINIHDFS_JAVA_OPTS:--Xmx512m} "${krb_opts[@]}" \
  -Dminihdfs.port="${MINIHDFS_PORT:-9000}" \
  -Dminihdfs.http.port="${MINIHDFS_HTTP_PORT:-9870}" \
  -Dminihdfs.dir="${MINIHDFS_DIR:-}" \
  -Dminihdfs.datanode.hosts="${GOFL_MINIDFS_DN_HOSTS:-}" \
  -cp "$here/target/classes:$(cat "$cp_file")" \
  org.gofl.minihdfs.MiniHdfs
