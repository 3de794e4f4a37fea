#!/usr/bin/env bash
# with-kafka.sh CMD [ARGS...]: runs CMD with a Kafka broker (run.sh, KRaft
# mode, loopback) on free ports and GOFL_TEST_KAFKA=127.0.0.1:PORT exported,
# stopping the broker when CMD ends (whatever way it ends). If
# GOFL_TEST_KAFKA is already set and answers, CMD uses that broker and none
# is started. CMD's exit status is returned.
#
# If java or mvn is missing, CI=true installs them with apt-get (as root);
# elsewhere CMD runs without Kafka and the Kafka tests skip. Under CI=true a
# broker that does not come up is an error; elsewhere it is a warning.
#
# Environment: KAFKA_START_TIMEOUT (seconds, default 300: covers the first
# Maven download), KAFKA_LOG (default a temporary file).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
svc_name=kafka svc_skips="the Kafka tests"
# shellcheck source=../lib/service.sh
. "$here/../lib/service.sh"

ready() { grep -q 'KAFKA READY' "$log" 2>/dev/null && grep -q 'Kafka Server started' "$log"; }

if [[ -n "${GOFL_TEST_KAFKA:-}" ]] && svc_listening "${GOFL_TEST_KAFKA%:*}" "${GOFL_TEST_KAFKA##*:}"; then
  echo "kafka: using the broker at GOFL_TEST_KAFKA=$GOFL_TEST_KAFKA" >&2
elif ! svc_need_java; then
  svc_fail_or_warn "java and mvn are needed to start Kafka"
else
  port="$(svc_free_port)" && cport="$(svc_free_port)"
  log="${KAFKA_LOG:-$(mktemp -t gofl-kafka.XXXXXX.log)}"
  echo "kafka: starting Kafka on 127.0.0.1:$port (log: $log)" >&2
  if svc_start "${KAFKA_START_TIMEOUT:-300}" "$log" ready env KAFKA_PORT="$port" KAFKA_CONTROLLER_PORT="$cport" "$here/run.sh"; then
    export GOFL_TEST_KAFKA="127.0.0.1:$port"
  else
    svc_fail_or_warn "Kafka did not start"
  fi
fi

"$@"
