package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/gofl/gofl/connectors/kafka/kafkatest"
	"github.com/gofl/gofl/failure"
	"github.com/gofl/gofl/stream"
)

// A transaction the coordinator completed as committed while its producer
// still holds a transaction open on the output partition (its marker
// missing: what a broker restart left in the broker-restart e2e test)
// fails the sink's next commit, non-recoverably, naming the transaction
// and the partition, instead of stalling read_committed readers silently.
// The hanging transaction is made on a broker of the test's own, with
// Kafka's partition verification (KIP-890) off: a transactional batch of
// the committed producer appended after its marker.
func TestCommitDetectsHangingTransaction(t *testing.T) {
	b := kafkatest.StartOwnBroker(t)
	broker := b.Addr()
	adm := kafkatest.Admin(t, broker)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	off := "false"
	if resp, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "transaction.partition.verification.enable", Value: &off}}); err != nil || resp[0].Err != nil {
		t.Fatalf("turning partition verification off: %v %v", err, resp)
	}
	topic := kafkatest.Topic(t, broker, "hanging", 1)
	cfg := sinkConfig{brokers: []string{broker}, topic: topic, guarantee: ExactlyOnce, prefix: "test-hanging-" + topic, txnTimeout: time.Minute}
	k := newStringSink(cfg)
	var sctx stream.SinkContext
	commit := func(vals ...string) (Transaction, error) {
		t.Helper()
		txn := preCommit(t, k, vals...)
		return txn, k.Commit(&sctx, txn)
	}
	first, err := commit("a", "b")
	if err != nil {
		t.Fatalf("committing a transaction: %v", err)
	}
	// Its coordinator completes it (its marker written), then a batch of
	// its producer lands after the marker.
	waitForTransactionState(t, adm, first.TransactionalID, "CompleteCommit")
	appendStrayBatch(t, broker, topic, first)

	// Not the next commit's own: an earlier transaction it checks again.
	k.unverified = append(k.unverified, first)
	_, err = commit("c")
	if !errors.Is(err, ErrHangingTransaction) {
		t.Fatalf("the commit after a hanging transaction: %v, want ErrHangingTransaction", err)
	}
	if got := failure.Classify(err); got != failure.FailureNonRecoverable {
		t.Errorf("the failure is %v, want non-recoverable: only an operator can end the transaction", got)
	}
	for _, want := range []string{first.TransactionalID, topic + "-0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error %q does not name %s", err, want)
		}
	}
}

// appendStrayBatch appends one transactional record of txn's producer (at
// its current epoch and next sequence on the partition) to partition 0 of
// topic with a Produce request before KIP-890 part 2, which does not add
// the partition to a transaction at the coordinator.
func appendStrayBatch(t *testing.T, broker, topic string, txn Transaction) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	described, err := kafkatest.Admin(t, broker).DescribeProducers(ctx, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	p, ok := described[topic].Partitions[0].ActiveProducers[txn.ProducerID]
	if !ok {
		t.Fatalf("producer %d is not on %s-0: %v", txn.ProducerID, topic, described)
	}
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(0, 11) // Produce
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.MaxVersions(versions))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	rec := kmsg.NewRecord()
	rec.Value = []byte("stray")
	rec.Length = int32(len(rec.AppendTo(nil)) - 1) // the rest after its varint length (0: one byte)
	recs := rec.AppendTo(nil)
	now := time.Now().UnixMilli()
	batch := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: 0x10, // transactional
		FirstTimestamp: now, MaxTimestamp: now, ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch,
		FirstSequence: p.LastSequence + 1, NumRecords: 1, Records: recs}
	raw := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))                                          // Length
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))) // CRC

	req := kmsg.NewPtrProduceRequest()
	req.TransactionID = &txn.TransactionalID
	req.Acks = -1
	req.TimeoutMillis = 30000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode); err != nil {
		t.Fatalf("appending a stray batch of producer %d epoch %d: %v", p.ProducerID, p.ProducerEpoch, err)
	}
}
