#!/usr/bin/env bash
# install.sh: prints the directory holding Apache ZooKeeper's server jars
# (org.apache.zookeeper:zookeeper, version in pom.xml) for run.sh,
# resolving them first (once) from Maven Central through Maven into
# target/lib (git-ignored; the downloads are cached in ~/.m2). Needs Java 17
# and Maven. Exit status 2: a tool is missing; 1: Maven failed.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
lib="$here/target/lib"
stamp="$here/target/.installed"

for tool in java mvn; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "zookeeper: $tool not found on PATH (needs Java 17 and Maven)" >&2
    exit 2
  fi
done

if [[ ! -f "$stamp" || "$here/pom.xml" -nt "$stamp" ]] || ! compgen -G "$lib/zookeeper-3*.jar" >/dev/null; then
  echo "zookeeper: resolving ZooKeeper $(sed -n 's:.*<zookeeper.version>\(.*\)</zookeeper.version>.*:\1:p' "$here/pom.xml") from Maven (cached in ~/.m2)" >&2
  rm -rf "$lib"
  mvn -q -B -Dstyle.color=never -f "$here/pom.xml" dependency:copy-dependencies \
    -DoutputDirectory="$lib" -DincludeScope=runtime >&2
  touch "$stamp"
fi
echo "$lib"
