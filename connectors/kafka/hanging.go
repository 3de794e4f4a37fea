package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gofl/gofl/failure"
)

// ErrHangingTransaction is returned (marked non-recoverable) when a
// transaction the coordinator completed as committed is still open on a
// partition of the sink's topic: its COMMIT marker was never written, so
// the partition's last stable offset stays before the transaction's first
// record and read_committed readers stall there for ever. No client can
// write the marker; the records are there, not lost. Kafka 4 brokers
// complete a commit so when the partition has no leader at that moment
// (every replica stopping, e.g. a single broker's controlled shutdown).
var ErrHangingTransaction = errors.New("kafka: a committed transaction was left open on a partition without its commit marker (a hanging transaction)")

// verifyTimeout bounds one check of committed transactions: ones a broker
// that does not answer leaves unchecked wait for the sink's next commit.
const verifyTimeout = 5 * time.Second

// maxUnverified caps the committed transactions waiting for a check.
const maxUnverified = 64

// verifyCommits checks that the committed txns got their markers on
// topic's partitions: a transaction the coordinator holds as
// CompleteCommit (it writes that after every marker was written) whose
// producer still has a transaction open on a partition is hanging. It
// returns the txns it could not decide yet (still PrepareCommit, or the
// broker did not answer) and ErrHangingTransaction for a hanging one.
// Only the sink's default topic is checked.
func verifyCommits(ctx context.Context, cl *kgo.Client, topic string, txns []Transaction) ([]Transaction, error) {
	if len(txns) == 0 {
		return nil, nil
	}
	adm := kadm.NewClient(cl)
	ids := make([]string, len(txns))
	for i, t := range txns {
		ids[i] = t.TransactionalID
	}
	described, err := adm.DescribeTransactions(ctx, ids...)
	if err != nil && len(described) == 0 {
		return txns, nil
	}
	var pending []Transaction
	done := map[int64]Transaction{} // by producer ID
	for _, t := range txns {
		d, ok := described[t.TransactionalID]
		switch {
		case errors.Is(d.Err, kerr.TransactionalIDNotFound):
			// Expired (transactional.id.expiration.ms): nothing to check.
		case !ok || d.Err != nil || d.State == "PrepareCommit":
			pending = append(pending, t)
		case d.State == "CompleteCommit" && d.ProducerID == t.ProducerID:
			done[t.ProducerID] = t
		}
		// Anything else is not this commit's state any more (or never
		// was one: nothing written); the commit itself judged it.
	}
	if len(done) == 0 {
		return pending, nil
	}
	topics, err := adm.ListTopics(ctx, topic)
	if err != nil || topics.Error() != nil {
		return append(pending, values(done)...), nil
	}
	producers, err := adm.DescribeProducers(ctx, topics.TopicsSet())
	if err != nil {
		return append(pending, values(done)...), nil
	}
	if unanswered, err := hangingIn(done, producers); err != nil || unanswered {
		// A partition that could not be described may hold one: check
		// again next time.
		return append(pending, values(done)...), err
	}
	return pending, nil
}

// hangingIn looks in producers (described partitions) for a transaction
// open by a producer of done (committed at the coordinator):
// ErrHangingTransaction names the first. unanswered tells of partitions
// that could not be described.
func hangingIn(done map[int64]Transaction, producers kadm.DescribedProducersTopics) (unanswered bool, err error) {
	for _, p := range producers.SortedPartitions() {
		if p.Err != nil {
			unanswered = true
			continue
		}
		for _, ap := range p.ActiveProducers.Sorted() {
			if t, ok := done[ap.ProducerID]; ok && ap.CurrentTxnStartOffset >= 0 {
				return unanswered, failure.NonRecoverable(fmt.Errorf(
					"%w: %s (producer ID %d, epoch %d) is committed at the coordinator, but partition %s-%d holds it open from offset %d: read_committed readers of the partition stall there. "+
						"The records are written, their marker is missing (the broker lost it; a partition without a leader while the broker completed the commit, as a single broker's controlled shutdown leaves it, is one way). "+
						"kafka-transactions.sh abort --topic %s --partition %d --start-offset %d unblocks the partition and discards the transaction's records",
					ErrHangingTransaction, t.TransactionalID, t.ProducerID, t.ProducerEpoch, p.Topic, p.Partition, ap.CurrentTxnStartOffset,
					p.Topic, p.Partition, ap.CurrentTxnStartOffset))
			}
		}
	}
	return unanswered, nil
}

func values(m map[int64]Transaction) []Transaction {
	out := make([]Transaction, 0, len(m))
	for _, t := range m {
		out = append(out, t)
	}
	return out
}
