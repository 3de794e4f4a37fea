package jobmanager_test

// Kafka end to end (issue #16): Kafka → keyed count → Kafka on a cluster of
// real processes, with checkpoints and the exactly-once Kafka sink, while
// partitions are added to the input and a TaskManager running the job is
// killed. An independent read_committed reader checks the output topic.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/gofl/gofl/connectors/kafka/kafkatest"
	"github.com/gofl/gofl/rpc/restapi"
)

// checkKafkaCounts reads topic read_committed until it holds count
// records (or three minutes passed), and a second longer for extra ones;
// every key
// k must have exactly the counts 1 .. c(k) of count numbers mod keys.
func checkKafkaCounts(t *testing.T, broker, topic string, count, keys int) {
	t.Helper()
	lines := kafkatest.ReadCommitted(t, broker, topic, count, 3*time.Minute)
	want := make([]int, keys)
	for n := 0; n < count; n++ {
		want[n%keys]++
	}
	seen := make([]map[int]int, keys)
	for i := range seen {
		seen[i] = map[int]int{}
	}
	for _, line := range lines {
		f := strings.Fields(line)
		if len(f) != 2 {
			t.Fatalf("malformed record %q", line)
		}
		k, err1 := strconv.Atoi(f[0])
		n, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil || k < 0 || k >= keys {
			t.Fatalf("malformed record %q", line)
		}
		seen[k][n]++
	}
	bad := 0
	for k := 0; k < keys; k++ {
		for n := 1; n <= want[k]; n++ {
			if got := seen[k][n]; got != 1 && bad < 10 {
				bad++
				t.Errorf("key %d count %d appears %d times, want once", k, n, got)
			}
		}
		if len(seen[k]) != want[k] && bad < 10 {
			bad++
			t.Errorf("key %d has %d distinct counts, want %d", k, len(seen[k]), want[k])
		}
	}
	if len(lines) != count {
		t.Errorf("read %d committed records, want %d", len(lines), count)
		logOpenTransactions(t, broker)
		logEndOffsets(t, broker, topic)
	}
}

// logEndOffsets logs topic's end offsets (records and transaction markers
// written, committed or not): records the sink never wrote, or wrote in
// transactions that were aborted, tell themselves apart so.
func logEndOffsets(t *testing.T, broker, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := kafkatest.Admin(t, broker).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Logf("listing end offsets of %s: %v", topic, err)
		return
	}
	ends.Each(func(o kadm.ListedOffset) { t.Logf("%s partition %d ends at offset %d", o.Topic, o.Partition, o.Offset) })
	// A producer with a transaction open on the partition that the
	// coordinator does not list holds the last stable offset back: a
	// hanging transaction.
	described, err := kafkatest.Admin(t, broker).DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Logf("describing the producers of %s: %v", topic, err)
		return
	}
	for _, p := range described.SortedProducers() {
		if p.CurrentTxnStartOffset >= 0 {
			t.Logf("%s partition %d: producer %d epoch %d has a transaction open from offset %d (last written %s)",
				p.Topic, p.Partition, p.ProducerID, p.ProducerEpoch, p.CurrentTxnStartOffset, time.UnixMilli(p.LastTimestamp).Format(time.RFC3339Nano))
		}
	}
}

// logOpenTransactions logs the broker's transactions that are not
// complete: one left open holds read_committed readers back.
func logOpenTransactions(t *testing.T, broker string) {
	t.Helper()
	adm := kafkatest.Admin(t, broker)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	listed, err := adm.ListTransactions(ctx, nil, []string{"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})
	if err != nil {
		t.Logf("listing transactions: %v", err)
		return
	}
	ids := listed.TransactionalIDs()
	if len(ids) == 0 {
		t.Log("no open transactions")
		return
	}
	described, err := adm.DescribeTransactions(ctx, ids...)
	if err != nil {
		t.Logf("describing transactions %v: %v", ids, err)
		return
	}
	for _, d := range described.Sorted() {
		t.Logf("open transaction %s: %s, producer %d epoch %d, started %s, topics %v",
			d.TxnID, d.State, d.ProducerID, d.ProducerEpoch, time.UnixMilli(d.StartTimestamp).Format(time.RFC3339Nano), d.Topics)
	}
}

// startKafkaCounts starts TaskManager processes tm-0 and tm-1 (2 slots
// each) and kafka-counts at parallelism 2 on them, and waits until it runs.
func (c *cluster) startKafkaCounts(broker, in, out string, keys int, prefix string) string {
	c.t.Helper()
	for _, id := range []string{"tm-0", "tm-1"} {
		c.startTaskManagerProcessWith(id, 2, nil)
	}
	c.waitForTaskManagers(2)
	id := c.runSDKJob(testJobBinary, 2, "kafka-counts", "--brokers", broker, "--input", in, "--output", out,
		"--keys", strconv.Itoa(keys), "--prefix", prefix)
	c.waitFor(id, 30*time.Second, "RUNNING")
	return id
}

func TestKafkaCountsExactlyOnceWithDiscoveryAndKill(t *testing.T) {
	parallel(t)
	broker := kafkatest.Broker(t)
	in := kafkatest.Topic(t, broker, "e2e-in", 2)
	out := kafkatest.Topic(t, broker, "e2e-out", 1)
	c := newCluster(t, checkpointSettings("file://"+filepath.Join(t.TempDir(), "checkpoints")))
	const keys, batch = 8, 3000
	id := c.startKafkaCounts(broker, in, out, keys, "gofl-e2e-"+out)

	if err := kafkatest.ProduceNumbers(broker, in, 2, 0, batch); err != nil {
		t.Fatal(err)
	}
	last := c.waitCheckpointAfter(id, 0, 60*time.Second)

	// Two more partitions: the source must find them and read them from
	// their start.
	adm := kafkatest.Admin(t, broker)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if resp, err := adm.CreatePartitions(ctx, 2, in); err != nil || resp.Error() != nil {
		t.Fatalf("adding partitions: %v %v", err, resp.Error())
	}
	kafkatest.WaitPartitions(t, adm, in, 4)
	// The rest arrives paced, over some seconds, so that the kill lands
	// while records flow.
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for from := batch; from < 3*batch; from += 100 {
			if err := kafkatest.ProduceNumbers(broker, in, 4, from, from+100); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(50 * time.Millisecond) // pacing the input, not waiting for a result
		}
	}()
	last = c.waitCheckpointAfter(id, last, 60*time.Second)

	// Kill the TaskManager that runs source subtask 0.
	src := vertexNamed(t, func() restapi.JobDetails {
		d, err := c.client.JobDetails(c.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}(), "Kafka Numbers").ID
	victim := c.waitSubtasks(id, src, 30*time.Second, func([]restapi.SubtaskInfo) error { return nil })[0].TaskManagerID
	if victim == "" {
		t.Fatal("no TaskManager runs source subtask 0")
	}
	t.Logf("kill -9 TaskManager %s after checkpoint %d", victim, last)
	c.kill9(victim)
	c.startTaskManagerProcessWith("tm-2", 2, nil)
	select {
	case <-produced:
	case <-time.After(2 * time.Minute):
		t.Fatal("the producer did not finish in 2 minutes")
	}
	c.waitCheckpointAfter(id, last, 2*time.Minute)

	checkKafkaCounts(t, broker, out, 3*batch, keys)
	if t.Failed() {
		c.logExceptions(id)
	}
	// The readers commit their checkpointed offsets to the group when a
	// checkpoint completes, for monitoring: eventually all of the input.
	group := "gofl-e2e-" + out
	c.eventually(time.Minute, func() error {
		offs, err := adm.FetchOffsets(c.ctx, group)
		if err != nil {
			return err
		}
		sum := int64(0)
		offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
		if sum != 3*batch {
			return fmt.Errorf("group %s committed offsets summing to %d, want %d", group, sum, 3*batch)
		}
		return nil
	})
	if err := c.client.CancelJob(c.ctx, id); err != nil {
		t.Fatal(err)
	}
	c.waitFor(id, time.Minute, "CANCELED")
}

// TestKafkaCountsExactlyOnceAcrossBrokerRestart runs kafka-counts (Kafka →
// keyed count → exactly-once Kafka sink) against a broker of the test's
// own and restarts that broker (same port, same data) while the job runs:
// the job rides it out (the clients retry, or the restart strategy
// restarts the tasks from the latest checkpoint, and the sink's restore
// commits or aborts the transactions the broker held), checkpoints again,
// and the output topic, read read_committed, holds each count exactly once.
func TestKafkaCountsExactlyOnceAcrossBrokerRestart(t *testing.T) {
	parallel(t)
	b := kafkatest.StartOwnBroker(t)
	broker := b.Addr()
	in := kafkatest.Topic(t, broker, "restart-in", 2)
	out := kafkatest.Topic(t, broker, "restart-out", 1)
	// Restarts pace themselves over a broker that takes many seconds to
	// come back on a loaded machine.
	c := newCluster(t, merged(checkpointSettings("file://"+filepath.Join(t.TempDir(), "checkpoints")), map[string]string{
		"restart-strategy.fixed-delay.attempts": "1000",
		"restart-strategy.fixed-delay.delay":    "500 ms",
	}))
	// The broker's restart started a goroutine after the cluster did:
	// stop it before the cluster's leak check.
	t.Cleanup(b.Stop)
	defer func() { c.keepLogsIfFailed(b.Logs()...) }()
	const keys, batch = 8, 3000
	id := c.startKafkaCounts(broker, in, out, keys, "gofl-restart-"+out)
	if err := kafkatest.ProduceNumbers(broker, in, 2, 0, batch); err != nil {
		t.Fatal(err)
	}
	last := c.waitCheckpointAfter(id, 0, 60*time.Second)
	// More input the job is in the middle of when the broker goes.
	if err := kafkatest.ProduceNumbers(broker, in, 2, batch, 2*batch); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("GOFL_TEST_KAFKA_KILL") == "1" {
		sink := c.vertexID(id, "Count -> Kafka Counts")
		victim := c.waitSubtasks(id, sink, 30*time.Second, func([]restapi.SubtaskInfo) error { return nil })[0].TaskManagerID
		t.Logf("stopping the broker after checkpoint %d, killing %s meanwhile", last, victim)
		b.Stop()
		c.kill9(victim)
		c.startTaskManagerProcessWith("tm-2", 2, nil)
		b.Start()
	} else {
		t.Logf("restarting the broker after checkpoint %d", last)
		b.Restart()
	}
	if err := kafkatest.ProduceNumbers(broker, in, 2, 2*batch, 3*batch); err != nil {
		t.Fatal(err)
	}
	last = c.waitCheckpointAfter(id, last, 3*time.Minute)
	checkKafkaCounts(t, broker, out, 3*batch, keys)
	c.logExceptions(id)
	if err := c.client.CancelJob(c.ctx, id); err != nil {
		t.Fatal(err)
	}
	c.waitFor(id, time.Minute, "CANCELED")
}
