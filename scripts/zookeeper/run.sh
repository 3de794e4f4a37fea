#!/usr/bin/env bash
# Runs a standalone Apache ZooKeeper server (install.sh) in the foreground on
# 127.0.0.1:$ZOOKEEPER_PORT (2181): loopback only, admin server off, the
# four-letter words ruok/srvr/stat/mntr allowed, data in a fresh temporary
# directory that is removed on exit. Prints "ZOOKEEPER READY 127.0.0.1:PORT"
# once it serves (`srvr`), and stops on SIGTERM or Ctrl-C.
#
# tickTime is 100 ms so sessions may be as short as 200 ms
# (minSessionTimeout, for the HA tests) and as long as 60 s
# (maxSessionTimeout, Flink's default); gofl's default session timeout (4 s,
# high-availability.zookeeper.client.session-timeout) fits in between.
#
# Environment: ZOOKEEPER_PORT, ZOOKEEPER_TICK_MS (100),
# ZOOKEEPER_JAVA_OPTS (default -Xmx256m), ZOOKEEPER_LOG_LEVEL (warn).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port="${ZOOKEEPER_PORT:-2181}"
tick="${ZOOKEEPER_TICK_MS:-100}"
lib="$("$here/install.sh")"

data="$(mktemp -d -t gofl-zookeeper.XXXXXX)"
cat >"$data/zoo.cfg" <<CFG
tickTime=$tick
minSessionTimeout=$((2 * tick))
maxSessionTimeout=60000
dataDir=$data/data
clientPort=$port
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr
CFG

pid=""
# The server's data is thrown away, so SIGKILL is fine (a JVM takes seconds
# to stop on SIGTERM).
cleanup() {
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$data"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# shellcheck disable=SC2086 # ZOOKEEPER_JAVA_OPTS is a list of flags
java ${ZOOKEEPER_JAVA_OPTS:--Xmx256m} \
  -Dorg.slf4j.simpleLogger.defaultLogLevel="${ZOOKEEPER_LOG_LEVEL:-warn}" \
  -Dzookeeper.jmx.log4j.disable=true \
  -cp "$lib/*" org.apache.zookeeper.server.ZooKeeperServerMain "$data/zoo.cfg" &
pid=$!

# `ruok` answers before the server serves; `srvr` names the mode once it does.
serving() { exec 3<>"/dev/tcp/127.0.0.1/$port" && printf srvr >&3 && timeout 2 cat <&3 | grep -q '^Mode: standalone'; }
until (serving) 2>/dev/null; do
  if ! kill -0 "$pid" 2>/dev/null; then
    rc=0; wait "$pid" || rc=$?; pid=""
    echo "zookeeper: exited with status $rc before it was ready" >&2
    exit 1
  fi
  sleep 0.2
done
echo "ZOOKEEPER READY 127.0.0.1:$port (tickTime ${tick}ms, data $data)"
wait "$pid"
