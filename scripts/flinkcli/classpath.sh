#!/usr/bin/env bash
# classpath.sh [VERSION]: prints a Java class path that runs Flink's CLI
# (org.apache.flink.client.cli.CliFrontend from flink-clients, with its
# runtime dependencies), fetched from Maven Central with mvn at the first
# call and cached in GOFL_FLINKCLI_CACHE (default
# ${XDG_CACHE_HOME:-~/.cache}/gofl/flinkcli/<version>); mvn's own
# repository (~/.m2) caches the artifacts as for flink-runtime-web.
# flink-dist is not on Maven Central, so the CLI runs from flink-clients'
# jars with a FLINK_CONF_DIR the caller makes. Used by cmd/gofl's
# TestFlinkCLIAgainstGofl. Exit status non-zero when mvn or the artifacts
# are unavailable (under CI=true, as root, a missing
# Java or Maven is installed with apt-get first); the caller decides whether that fails (CI=true) or skips.
set -euo pipefail
version="${1:-1.20.5}"
cache="${GOFL_FLINKCLI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gofl/flinkcli/$version}"
if [[ -f "$cache/classpath.txt" ]]; then
  cat "$cache/classpath.txt"
  exit 0
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
svc_name=flinkcli svc_skips="Flink's CLI compatibility test"
# shellcheck source=../lib/service.sh
. "$here/../lib/service.sh"
# Under CI=true (as root on Debian) Java and Maven are installed if missing.
svc_need_java || { echo "flinkcli: java and mvn are needed" >&2; exit 2; }
mkdir -p "$cache"
tmp="$(mktemp -d "$cache/.fetch.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.gofl.test</groupId>
  <artifactId>flinkcli</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.flink</groupId>
      <artifactId>flink-clients</artifactId>
      <version>$version</version>
    </dependency>
    <!-- CliFrontend logs through SLF4J: a binding keeps its output readable. -->
    <dependency>
      <groupId>org.slf4j</groupId>
      <artifactId>slf4j-simple</artifactId>
      <version>1.7.36</version>
    </dependency>
  </dependencies>
</project>
POM
(cd "$tmp" && mvn -q -B dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp/lib") >&2
rm -rf "$cache/lib"
mv "$tmp/lib" "$cache/lib"
ls "$cache"/lib/*.jar | paste -sd: >"$cache/classpath.txt.tmp"
mv "$cache/classpath.txt.tmp" "$cache/classpath.txt"
cat "$cache/classpath.txt"
