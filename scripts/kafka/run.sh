#!/usr/bin/env bash
# Runs one Apache Kafka node in KRaft mode in the foreground, loopback only:
# clients at 127.0.0.1:$KAFKA_PORT (9092, Kafka's default), the controller
# at 127.0.0.1:$KAFKA_CONTROLLER_PORT (9093). KAFKA_ROLE chooses the node:
#   combined   (default; make kafka, with-kafka.sh, CI) broker and
#              controller in one process;
#   controller a controller only, listening on KAFKA_CONTROLLER_PORT;
#   broker     a broker only, on KAFKA_PORT, whose controller is the one at
#              KAFKA_CONTROLLER_PORT (started with KAFKA_ROLE=controller and
#              the same KAFKA_CLUSTER_ID).
# A controller and a broker apart let a test restart the broker while the
# controller stays up, as in a real cluster (kafkatest.StartOwnBroker).
# The storage is formatted on its first start with KAFKA_CLUSTER_ID (a
# broker needs its controller's; unset, a random one); a kept KAFKA_DIR
# restarts with its data and cluster ID.
# Prints "KAFKA READY ..." once it listens (a controller: on its port) and
# stops (deleting its data) on SIGTERM or Ctrl-C.
#
# The jars come from install.sh (Maven Central, cached); needs Java 17+.
#
# Environment: KAFKA_ROLE, KAFKA_PORT, KAFKA_CONTROLLER_PORT,
# KAFKA_CLUSTER_ID, KAFKA_DIR (data directory; default a fresh temporary
# one, removed on exit; a controller and a broker need one each),
# KAFKA_JAVA_OPTS (default -Xmx512m), KAFKA_LIBS (see install.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port="${KAFKA_PORT:-9092}"
cport="${KAFKA_CONTROLLER_PORT:-9093}"
role="${KAFKA_ROLE:-combined}"
# The node's roles, id and listeners, and the controller's settings (a
# broker apart warns of them); the controller is node 1 in each case.
case "$role" in
combined)
  node="process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
inter.broker.listener.name=PLAINTEXT
num.partitions=1"
  ready_port="$port" ready="bootstrap=127.0.0.1:$port" ;;
controller)
  node="process.roles=controller
node.id=1
listeners=CONTROLLER://127.0.0.1:$cport
num.partitions=1"
  ready_port="$cport" ready="controller=127.0.0.1:$cport" ;;
broker)
  if [[ -z "${KAFKA_CLUSTER_ID:-}" ]]; then
    echo "kafka: KAFKA_ROLE=broker needs KAFKA_CLUSTER_ID, its controller's cluster ID" >&2
    exit 2
  fi
  node="process.roles=broker
node.id=2
listeners=PLAINTEXT://127.0.0.1:$port
advertised.listeners=PLAINTEXT://127.0.0.1:$port
inter.broker.listener.name=PLAINTEXT"
  ready_port="$port" ready="bootstrap=127.0.0.1:$port" ;;
*)
  echo "kafka: KAFKA_ROLE=$role: want combined, controller or broker" >&2
  exit 2 ;;
esac

if ! command -v java >/dev/null 2>&1; then
  echo "kafka: java not found on PATH (needs Java 17+)" >&2
  exit 2
fi
libs="$("$here/install.sh")"

dir="${KAFKA_DIR:-}"
if [[ -z "$dir" ]]; then
  dir="$(mktemp -d -t gofl-kafka.XXXXXX)"
  trap 'rm -rf "$dir"' EXIT
fi
mkdir -p "$dir/data"

cat >"$dir/server.properties" <<PROPS
$node
controller.quorum.voters=1@127.0.0.1:$cport
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/data
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
# Expired transactions are aborted within a second (default 10 s), so that
# a test of the sink's transaction timeout is quick.
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
log.flush.interval.messages=100000000
# No controlled shutdown: it moves the leadership of the broker's partitions
# to other replicas before it stops (Kafka's "graceful shutdown"); the only
# replica has none, so the controller, combined or apart alike, makes its
# partitions leaderless while the broker still runs. Kafka 4's transaction
# coordinator, completing a commit in that window, finds no leader for the
# output partition, takes it for a deleted one and writes CompleteCommit
# without the COMMIT marker: a transaction left open on the partition for
# ever, holding read_committed readers back (the broker-restart e2e test's
# hang, issue #16). A stop still syncs the logs and marks a clean shutdown;
# pending markers are resumed on restart from the PrepareCommit in the
# transaction log. Without it, though, the broker's own metadata log keeps
# its leadership until the controller fences it (its session times out,
# broker.session.timeout.ms, 9 s): restarted before that, the broker acts on
# it, then loses it at the fence and is re-elected, and resumed markers meet
# the same skip in between (the controller apart logs the refused
# registration, DuplicateBrokerRegistrationException; a combined node,
# whose controller restarts with it, has the same moment). A broker apart
# restarted only once its controller fenced it (kafkatest.OwnBroker) reads
# a metadata log in which it leads nothing, and its transaction coordinator
# loads after the controller's election has made it leader again.
controlled.shutdown.enable=false
PROPS

cat >"$dir/log4j2.properties" <<'LOG'
status = error
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = INFO
# The transaction coordinator's state changes and marker writes, for the
# exactly-once tests' failures (a commit's markers lost across a restart).
logger.txn.name = kafka.coordinator.transaction
logger.txn.level = INFO
logger.txn2.name = org.apache.kafka.coordinator.transaction
logger.txn2.level = INFO
LOG
if [[ "$role" != combined ]]; then
  # A broker apart from its controller (a test restarting it): the
  # broker's leadership changes and the controller's fencing and
  # elections, to read a restart's order from the logs. kafkatest.OwnBroker
  # waits for the controller's "Fencing broker 2" before a restart.
  cat >>"$dir/log4j2.properties" <<'LOG'
logger.state.name = state.change.logger
logger.state.level = INFO
logger.ctl.name = org.apache.kafka.controller
logger.ctl.level = INFO
LOG
fi

cp="$libs/*"
# shellcheck disable=SC2086 # KAFKA_JAVA_OPTS is a list of flags
java_opts=(${KAFKA_JAVA_OPTS:--Xmx512m} -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto
  "-Dlog4j2.configurationFile=$dir/log4j2.properties")
if [[ -f "$dir/data/meta.properties" ]]; then
  # A restart on a kept KAFKA_DIR: the storage keeps its cluster ID (Kafka
  # 4 refuses to format it again with another one).
  cluster_id="$(sed -n 's/^cluster.id=//p' "$dir/data/meta.properties")"
else
  # KAFKA_CLUSTER_ID, or a random cluster ID: 16 bytes, URL-safe base64
  # without padding. One starting with '-' would read as an option: draw
  # again.
  cluster_id="${KAFKA_CLUSTER_ID:-}"
  while [[ -z "$cluster_id" || "$cluster_id" == -* ]]; do
    cluster_id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')"
  done
  java "${java_opts[@]}" -cp "$cp" kafka.tools.StorageTool format \
    -t "$cluster_id" -c "$dir/server.properties" --ignore-formatted >/dev/null
fi

echo "kafka: starting a Kafka $role (cluster $cluster_id) on 127.0.0.1:$ready_port, data in $dir" >&2
java "${java_opts[@]}" -cp "$cp" kafka.Kafka "$dir/server.properties" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null; wait "$pid" || true; [[ -n "${KAFKA_DIR:-}" ]] || rm -rf "$dir"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$ready_port") 2>/dev/null; }
until listening; do
  kill -0 "$pid" 2>/dev/null || { wait "$pid"; exit $?; }
  sleep 0.2
done
echo "KAFKA READY $ready"
wait "$pid"
