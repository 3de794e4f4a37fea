#!/usr/bin/env bash
# install.sh: puts Apache Kafka's broker jars (org.apache.kafka:kafka_2.13,
# version in pom.xml) into $KAFKA_LIBS (default
# ~/.cache/gofl/kafka-<version>/libs) with Maven's copy-dependencies, once;
# later runs find them and return at once. Prints the directory.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/pom.xml")"
libs="${KAFKA_LIBS:-${XDG_CACHE_HOME:-$HOME/.cache}/gofl/kafka-$version/libs}"
stamp="$libs/.complete"

if [[ -f "$stamp" && ! "$here/pom.xml" -nt "$stamp" ]]; then
  echo "$libs"
  exit 0
fi
if ! command -v mvn >/dev/null 2>&1; then
  echo "kafka: mvn not found on PATH (needed once, to fetch Kafka $version from Maven Central)" >&2
  exit 2
fi
echo "kafka: fetching Kafka $version from Maven Central into $libs" >&2
tmp="$libs.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
mvn -q -B -Dstyle.color=never -f "$here/pom.xml" dependency:copy-dependencies \
  -DoutputDirectory="$tmp" -DincludeScope=runtime >&2
touch "$tmp/.complete"
rm -rf "$libs"
mv "$tmp" "$libs"
echo "$libs"
