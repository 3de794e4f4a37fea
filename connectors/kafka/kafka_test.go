package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gofl/gofl/connectors/kafka/kafkatest"
	"github.com/gofl/gofl/failure"
	"github.com/gofl/gofl/stream"
)

// produce writes from..to-1 (kafkatest.ProduceNumbers) or fails.
func produce(t *testing.T, broker, topic string, partitions int32, from, to int) {
	t.Helper()
	if err := kafkatest.ProduceNumbers(broker, topic, int(partitions), from, to); err != nil {
		t.Fatal(err)
	}
}

func intValue(r *kgo.Record) (int, error) { return strconv.Atoi(string(r.Value)) }

// A bounded source over three partitions at parallelism 2 reads each
// record once, with its Kafka timestamp; the exactly-once sink commits them
// in one transaction at the end (no checkpoints), visible read_committed,
// each with its element's timestamp (the serializer sets none).
func TestBoundedSourceToTransactionalSink(t *testing.T) {
	broker := kafkatest.Broker(t)
	in := kafkatest.Topic(t, broker, "in", 3)
	out := kafkatest.Topic(t, broker, "out", 1)
	produce(t, broker, in, 3, 0, 300)

	src, err := NewSource([]string{broker}, intValue, Topics(in), BoundedBy(Latest()))
	if err != nil {
		t.Fatal(err)
	}
	env := stream.NewEnvironment(stream.WithParallelism(2))
	nums := Add(env, src, stream.SourceWatermarks{}, "kafka")
	withTs := stream.Process(nums, func(ctx *stream.ProcessContext, v int, out stream.Collector[string]) error {
		ts, ok := ctx.Timestamp()
		if !ok || ts != int64(kafkatest.NumbersTimestampBase+v) {
			return fmt.Errorf("record %d has timestamp %d (%v), want %d", v, ts, ok, kafkatest.NumbersTimestampBase+v)
		}
		out.Collect(strconv.Itoa(v))
		return nil
	})
	if _, err := Sink(withTs, []string{broker}, out, func(s string) *kgo.Record { return &kgo.Record{Value: []byte(s)} },
		WithDeliveryGuarantee(ExactlyOnce), TransactionalIDPrefix("test-bounded-"+out)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := env.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	recs := kafkatest.ReadCommittedRecords(t, broker, out, 300, time.Minute)
	got := make([]int, 0, len(recs))
	for _, r := range recs {
		v, _ := strconv.Atoi(string(r.Value))
		if want := int64(kafkatest.NumbersTimestampBase + v); r.Timestamp.UnixMilli() != want {
			t.Errorf("output record %d has timestamp %d, want its element's %d", v, r.Timestamp.UnixMilli(), want)
		}
		got = append(got, v)
	}
	sort.Ints(got)
	if len(got) != 300 {
		t.Fatalf("read %d committed records, want 300", len(got))
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("record %d is %d: lost or duplicated", i, v)
		}
	}
}

// A transaction pre-committed by one producer that then vanished is
// committed from its recorded producer ID and epoch (a restore), and a
// second commit of it is a no-op.
func TestCommitTransactionOfAnotherProducer(t *testing.T) {
	broker := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, broker, "resume", 1)
	id := "test-resume-" + topic
	k := &kafkaSink[string]{cfg: sinkConfig{brokers: []string{broker}, topic: topic, guarantee: ExactlyOnce, prefix: id, txnTimeout: time.Minute},
		clients: map[string]*kgo.Client{}, ser: func(s string) *kgo.Record { return &kgo.Record{Value: []byte(s)} }}
	var sctx stream.SinkContext
	txn, err := k.begin(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := k.Write(&sctx, txn, strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.PreCommit(&sctx, txn); err != nil {
		t.Fatal(err)
	}
	// The producer goes away without ending the transaction.
	k.clients[txn.TransactionalID].Close()
	delete(k.clients, txn.TransactionalID)

	other := &kafkaSink[string]{cfg: k.cfg, clients: map[string]*kgo.Client{}}
	if err := other.Commit(&sctx, txn); err != nil {
		t.Fatalf("commit from the recorded handle: %v", err)
	}
	if err := other.Commit(&sctx, txn); err != nil {
		t.Fatalf("second commit: %v", err)
	}
	if recs := kafkatest.ReadCommitted(t, broker, topic, 5, time.Minute); len(recs) != 5 {
		t.Fatalf("read %d committed records, want 5", len(recs))
	}
}

// readBounded runs a bounded source over topic with opts at parallelism 2
// and returns the sorted values it read.
func readBounded(t *testing.T, broker string, opts ...SourceOption) []int {
	t.Helper()
	src, err := NewSource([]string{broker}, intValue, append(opts, BoundedBy(Latest()))...)
	if err != nil {
		t.Fatal(err)
	}
	env := stream.NewEnvironment(stream.WithParallelism(2))
	Add(env, src, stream.SourceWatermarks{}, "kafka").Collect().Uid("out")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := env.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := stream.CollectedValues[int](env, "out")
	if err != nil {
		t.Fatal(err)
	}
	sort.Ints(got)
	return got
}

func span(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// Starting offsets: earliest reads all, latest none of what is there,
// a timestamp from the first record at or after it, committed from the
// group's offsets (and the fallback where the group has none).
func TestStartingOffsets(t *testing.T) {
	broker := kafkatest.Broker(t)
	in := kafkatest.Topic(t, broker, "offsets", 2)
	produce(t, broker, in, 2, 0, 100)
	group := "offsets-group-" + in
	adm := kafkatest.Admin(t, broker)
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: in, Partition: 0, At: 40, LeaderEpoch: -1}) // values 80, 82, ... 98
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := adm.CommitOffsets(ctx, group, os); err != nil {
		t.Fatal(err)
	}
	// Partition 0 holds the even values at offsets value/2, partition 1
	// the odd ones.
	var fromCommitted []int
	for i := 80; i < 100; i += 2 {
		fromCommitted = append(fromCommitted, i)
	}
	for i := 1; i < 100; i += 2 {
		fromCommitted = append(fromCommitted, i) // no committed offset: fallback earliest
	}
	sort.Ints(fromCommitted)
	for _, tc := range []struct {
		name string
		opts []SourceOption
		want []int
	}{
		{"earliest", []SourceOption{StartingOffsets(Earliest())}, span(0, 100)},
		{"latest", []SourceOption{StartingOffsets(Latest())}, nil},
		{"timestamp", []SourceOption{StartingOffsets(Timestamp(kafkatest.NumbersTimestampBase + 90))}, span(90, 100)},
		{"committed", []SourceOption{StartingOffsets(Committed(Earliest())), GroupID(group)}, fromCommitted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readBounded(t, broker, append(tc.opts, Topics(in))...)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("read %v, want %v", got, tc.want)
			}
		})
	}
}

// A topic pattern finds every matching topic.
func TestTopicPattern(t *testing.T) {
	broker := kafkatest.Broker(t)
	a := kafkatest.Topic(t, broker, "pattern-x", 1)
	b := kafkatest.Topic(t, broker, "pattern-x", 2)
	produce(t, broker, a, 1, 0, 10)
	produce(t, broker, b, 2, 10, 30)
	got := readBounded(t, broker, TopicPattern(regexp.MustCompile("^("+regexp.QuoteMeta(a)+"|"+regexp.QuoteMeta(b)+")$")))
	if !slices.Equal(got, span(0, 30)) {
		t.Fatalf("read %v, want 0..29", got)
	}
}

// A restarted exactly-once sink commits the restored pre-committed
// transaction, aborts the restored open one and every transaction the
// failed run began after the checkpoint, so read_committed readers are not
// blocked by them (an open transaction holds back everything after it).
func TestRestartedSinkAbortsLingeringTransactions(t *testing.T) {
	broker := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, broker, "lingering", 1)
	cfg := sinkConfig{brokers: []string{broker}, topic: topic, guarantee: ExactlyOnce, prefix: "test-lingering-" + topic, txnTimeout: time.Minute}
	ser := func(s string) *kgo.Record { return &kgo.Record{Value: []byte(s)} }
	var sctx stream.SinkContext
	failed := &kafkaSink[string]{cfg: cfg, clients: map[string]*kgo.Client{}, ser: ser}
	write := func(k *kafkaSink[string], txn Transaction, vals ...string) {
		t.Helper()
		for _, v := range vals {
			if err := k.Write(&sctx, txn, v); err != nil {
				t.Fatal(err)
			}
		}
		if err := k.PreCommit(&sctx, txn); err != nil {
			t.Fatal(err)
		}
	}
	// Checkpoint 1 pre-commits t1 and stores the open t2; the run goes on
	// into t3 and t4 (a checkpoint that never completed), then dies.
	t1, err := failed.begin(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	write(failed, t1, "committed")
	var txns []Transaction
	for range 3 {
		txn, err := failed.begin(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		write(failed, txn, "lost")
		txns = append(txns, txn)
	}
	t2 := txns[0]
	for _, cl := range failed.clients {
		cl.Close()
	}

	restarted := &kafkaSink[string]{cfg: cfg, clients: map[string]*kgo.Client{}, ser: ser}
	defer restarted.Close()
	if err := restarted.Commit(&sctx, t1); err != nil {
		t.Fatal(err)
	}
	if err := restarted.Abort(&sctx, t2); err != nil {
		t.Fatal(err)
	}
	// The restored checkpoint's ID (7) runs ahead of the transaction
	// numbers (checkpoints that never reached the sink): the names to
	// abort follow the restored transactions, not the checkpoint ID.
	next, err := restarted.begin(0, 7)
	if err != nil {
		t.Fatal(err)
	}
	write(restarted, next, "after")
	if err := restarted.Commit(&sctx, next); err != nil {
		t.Fatal(err)
	}
	got := kafkatest.ReadCommitted(t, broker, topic, 2, time.Minute)
	if !slices.Equal(got, []string{"committed", "after"}) {
		t.Fatalf("read_committed saw %q, want [committed after]", got)
	}
}

// waitForTransactionState polls the coordinator until transactional ID id
// is in state want (at most a minute): the broker offers no event for it.
func waitForTransactionState(t *testing.T, adm *kadm.Client, id, want string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for state := ""; state != want; {
		if time.Now().After(deadline) {
			t.Fatalf("transaction %s is %q after a minute, want %s", id, state, want)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		d, err := adm.DescribeTransactions(ctx, id)
		cancel()
		if err == nil {
			state = d[id].State
		}
		time.Sleep(50 * time.Millisecond) // polling the coordinator's state: no event to wait on
	}
}

// newStringSink is a sink over cfg writing strings as record values.
func newStringSink(cfg sinkConfig) *kafkaSink[string] {
	return &kafkaSink[string]{cfg: cfg, clients: map[string]*kgo.Client{}, ser: func(s string) *kgo.Record { return &kgo.Record{Value: []byte(s)} }}
}

// preCommit begins a transaction on k (subtask 0), writes vals to it and
// pre-commits it.
func preCommit(t *testing.T, k *kafkaSink[string], vals ...string) Transaction {
	t.Helper()
	var sctx stream.SinkContext
	txn, err := k.begin(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vals {
		if err := k.Write(&sctx, txn, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.PreCommit(&sctx, txn); err != nil {
		t.Fatal(err)
	}
	return txn
}

// beginPreCommitted begins a transaction on a fresh exactly-once sink over
// cfg, writes vals to it and pre-commits it, then drops its producer
// without ending the transaction (the process died after the checkpoint):
// the handle is what a restore would commit.
func beginPreCommitted(t *testing.T, cfg sinkConfig, vals ...string) Transaction {
	t.Helper()
	k := newStringSink(cfg)
	txn := preCommit(t, k, vals...)
	k.clients[txn.TransactionalID].Close()
	delete(k.clients, txn.TransactionalID)
	return txn
}

// A pre-committed transaction that outlived its transaction.timeout.ms was
// aborted by the coordinator: committing it on restore must not report
// success (its records are gone) but fail, non-recoverably, naming it.
func TestCommitOfATimedOutTransactionFails(t *testing.T) {
	broker := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, broker, "timedout", 1)
	cfg := sinkConfig{brokers: []string{broker}, topic: topic, guarantee: ExactlyOnce, prefix: "test-timedout-" + topic, txnTimeout: time.Second}
	txn := beginPreCommitted(t, cfg, "lost")
	// The coordinator aborts expired transactions on a timer
	// (transaction.abort.timed.out.transaction.cleanup.interval.ms).
	adm := kafkatest.Admin(t, broker)
	waitForTransactionState(t, adm, txn.TransactionalID, "CompleteAbort")

	restored := &kafkaSink[string]{cfg: cfg, clients: map[string]*kgo.Client{}}
	err := restored.Commit(&stream.SinkContext{}, txn)
	if !errors.Is(err, ErrTransactionAborted) {
		t.Fatalf("committing the timed-out transaction: %v, want ErrTransactionAborted", err)
	}
	if got := failure.Classify(err); got != failure.FailureNonRecoverable {
		t.Errorf("the failure is %v, want non-recoverable: a restart cannot bring the records back", got)
	}
	if !strings.Contains(err.Error(), txn.TransactionalID) {
		t.Errorf("the error %q does not name the transaction %s", err, txn.TransactionalID)
	}
}

// A pre-committed transaction without records never began at the
// coordinator (the checkpoint interval brought the subtask no input): its
// commit on restore is refused as an invalid state, and is no loss.
func TestCommitOfAnEmptyTransaction(t *testing.T) {
	broker := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, broker, "empty", 1)
	cfg := sinkConfig{brokers: []string{broker}, topic: topic, guarantee: ExactlyOnce, prefix: "test-empty-" + topic, txnTimeout: time.Minute}
	txn := beginPreCommitted(t, cfg)
	restored := &kafkaSink[string]{cfg: cfg, clients: map[string]*kgo.Client{}}
	if err := restored.Commit(&stream.SinkContext{}, txn); err != nil {
		t.Fatalf("committing an empty transaction: %v", err)
	}
}

// The restore's commit outlasts a broker that refuses connections for a
// while (a restarting one): it retries instead of failing the task, whose
// every restart would fail the same way until the transaction times out.
func TestCommitRetriesWhileBrokerUnreachable(t *testing.T) {
	broker := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, broker, "unreachable", 1)
	cfg := sinkConfig{brokers: []string{broker}, topic: topic, guarantee: ExactlyOnce, prefix: "test-unreachable-" + topic, txnTimeout: time.Minute}
	txn := beginPreCommitted(t, cfg, "a", "b")

	// The restored sink reaches the broker through a port where nothing
	// listens yet; a proxy opens there after the first refused attempt.
	addr := unusedAddr(t)
	rcfg := cfg
	rcfg.brokers = []string{addr}
	var retried <-chan struct{}
	rcfg.log, retried = onLog("retrying")
	restored := &kafkaSink[string]{cfg: rcfg, clients: map[string]*kgo.Client{}}
	done := make(chan error, 1)
	go func() { done <- restored.Commit(&stream.SinkContext{}, txn) }()
	select {
	case <-retried:
	case err := <-done:
		t.Fatalf("the commit ended before the broker was reachable: %v", err)
	}
	kafkatest.Proxy(t, addr, broker)
	if err := <-done; err != nil {
		t.Fatalf("commit once the broker is reachable: %v", err)
	}
	if got := kafkatest.ReadCommitted(t, broker, topic, 2, time.Minute); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("read_committed saw %q, want [a b]", got)
	}
}

// A transaction begun while the broker refuses connections (a restarting
// one) waits for it instead of failing: a failed begin fails the
// checkpoint and restarts the job from an older one, and on a loaded
// machine a broker takes many seconds to come back.
func TestBeginRetriesWhileBrokerUnreachable(t *testing.T) {
	broker := kafkatest.Broker(t)
	topic := kafkatest.Topic(t, broker, "begin-unreachable", 1)
	addr := unusedAddr(t)
	log, retried := onLog("retrying")
	k := &kafkaSink[string]{cfg: sinkConfig{brokers: []string{addr}, topic: topic, guarantee: ExactlyOnce,
		prefix: "test-begin-unreachable-" + topic, txnTimeout: time.Minute, log: log},
		clients: map[string]*kgo.Client{}, ser: func(s string) *kgo.Record { return &kgo.Record{Value: []byte(s)} },
		aborted: true} // a later transaction of the run: only its own producer is initialized
	defer k.Close()
	type begun struct {
		txn Transaction
		err error
	}
	done := make(chan begun, 1)
	go func() { txn, err := k.begin(0, 0); done <- begun{txn, err} }()
	select {
	case <-retried:
	case b := <-done:
		t.Fatalf("begin ended before the broker was reachable: %v", b.err)
	}
	kafkatest.Proxy(t, addr, broker)
	b := <-done
	if b.err != nil {
		t.Fatalf("begin once the broker is reachable: %v", b.err)
	}
	var sctx stream.SinkContext
	if err := k.Write(&sctx, b.txn, "a"); err != nil {
		t.Fatal(err)
	}
	if err := k.PreCommit(&sctx, b.txn); err != nil {
		t.Fatal(err)
	}
	if err := k.Commit(&sctx, b.txn); err != nil {
		t.Fatal(err)
	}
	if got := kafkatest.ReadCommitted(t, broker, topic, 1, time.Minute); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("read_committed saw %q, want [a]", got)
	}
}

// unusedAddr is a loopback address where nothing listens (until a test's
// proxy does).
func unusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// onLog returns a logger and a channel closed at its first message
// containing s: a test waits on what the code under test reports.
func onLog(s string) (zerolog.Logger, <-chan struct{}) {
	seen := make(chan struct{})
	var once sync.Once
	return zerolog.New(writerFunc(func(p []byte) (int, error) {
		if strings.Contains(string(p), s) {
			once.Do(func() { close(seen) })
		}
		return len(p), nil
	})), seen
}

// A bounded source discovers its partitions once: when the broker cannot
// be reached then, it tries again instead of waiting for splits for ever.
func TestBoundedSourceRetriesFailedDiscovery(t *testing.T) {
	broker := kafkatest.Broker(t)
	in := kafkatest.Topic(t, broker, "discovery", 2)
	produce(t, broker, in, 2, 0, 100)
	addr := unusedAddr(t) // nothing listens there until the proxy starts
	log, failed := onLog("discovery failed")
	src, err := NewSource([]string{addr}, intValue, Topics(in), BoundedBy(Latest()), SourceLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	env := stream.NewEnvironment(stream.WithParallelism(2))
	Add(env, src, stream.SourceWatermarks{}, "kafka").Collect().Uid("out")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := env.Execute(ctx); done <- err }()
	select {
	case <-failed:
	case err := <-done:
		t.Fatalf("the job ended before the broker was reachable: %v", err)
	}
	kafkatest.Proxy(t, addr, broker)
	if err := <-done; err != nil {
		t.Fatalf("the job failed or never got its splits: %v", err)
	}
	vals, err := stream.CollectedValues[int](env, "out")
	if err != nil {
		t.Fatal(err)
	}
	sort.Ints(vals)
	if !slices.Equal(vals, span(0, 100)) {
		t.Fatalf("read %d records %v, want 0..99 once each", len(vals), vals)
	}
}
