package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gofl/gofl/failure"
	"github.com/gofl/gofl/internal/backoff"
	"github.com/gofl/gofl/stream"
)

// DeliveryGuarantee is the sink's guarantee (Flink's DeliveryGuarantee).
type DeliveryGuarantee int

const (
	// AtLeastOnce flushes every record written before a checkpoint
	// completes its snapshot; a restore may write some again.
	AtLeastOnce DeliveryGuarantee = iota
	// ExactlyOnce writes the records between two checkpoints in one Kafka
	// transaction, committed when the checkpoint completes; consumers
	// with read_committed see each record once.
	ExactlyOnce
)

// ErrNoTransactionalIDPrefix is returned for ExactlyOnce without a prefix.
var ErrNoTransactionalIDPrefix = errors.New("kafka: exactly-once needs a transactional.id prefix")

type sinkConfig struct {
	brokers    []string
	topic      string
	guarantee  DeliveryGuarantee
	prefix     string
	txnTimeout time.Duration
	client     clientOptions
	log        zerolog.Logger
}

// SinkOption configures a sink.
type SinkOption func(*sinkConfig)

// WithDeliveryGuarantee sets the guarantee (default AtLeastOnce).
func WithDeliveryGuarantee(g DeliveryGuarantee) SinkOption {
	return func(c *sinkConfig) { c.guarantee = g }
}

// TransactionalIDPrefix names the sink's transactions
// "<prefix>-<subtask>-<n>", n consecutive per subtask (as Flink's KafkaSink
// numbers them by checkpoint): it must be unique
// per job in the cluster and stable across restarts, so that a restarted
// job finds and aborts the transactions its previous run left open.
func TransactionalIDPrefix(p string) SinkOption { return func(c *sinkConfig) { c.prefix = p } }

// DefaultTransactionTimeout is the sink's transaction.timeout.ms: the
// broker's default transaction.max.timeout.ms, the most a broker accepts
// unless configured otherwise.
const DefaultTransactionTimeout = 15 * time.Minute

// TransactionTimeout is transaction.timeout.ms (default
// DefaultTransactionTimeout), at most the broker's
// transaction.max.timeout.ms. A pre-committed transaction waits for its
// checkpoint's completion, or after a failure for the job's recovery: the
// broker aborts it once it is older than this, and its records are lost
// (the commit fails with ErrTransactionAborted). So it must exceed the
// checkpoint interval plus the longest expected downtime (Flink's KafkaSink
// defaults to an hour for this reason). Open transactions of a job that
// never comes back hold read_committed readers of their partitions back
// for as long.
func TransactionTimeout(d time.Duration) SinkOption { return func(c *sinkConfig) { c.txnTimeout = d } }

// SinkLogger logs through l.
func SinkLogger(l zerolog.Logger) SinkOption { return func(c *sinkConfig) { c.log = l } }

// Sink writes s to topic on brokers; serialize makes each value's record
// (its Topic, if empty, is topic; its Timestamp, if zero, is the element's
// event-time timestamp, else the time it is produced).
func Sink[T any](s stream.DataStream[T], brokers []string, topic string, serialize func(T) *kgo.Record, opts ...SinkOption) (stream.Sink, error) {
	c := sinkConfig{brokers: brokers, topic: topic, txnTimeout: DefaultTransactionTimeout, log: zerolog.Nop()}
	for _, o := range opts {
		o(&c)
	}
	if c.guarantee == ExactlyOnce && c.prefix == "" {
		return stream.Sink{}, ErrNoTransactionalIDPrefix
	}
	if c.client.err != nil {
		return stream.Sink{}, c.client.err
	}
	return stream.AddTwoPhaseCommitSink[T, Transaction](s, "Kafka Sink: "+topic, func() stream.TwoPhaseCommitSink[T, Transaction] {
		return &kafkaSink[T]{cfg: c, ser: serialize, clients: map[string]*kgo.Client{}}
	}), nil
}

// Transaction is the handle of one sink transaction in the checkpoint:
// enough to commit it from another process (Flink's
// KafkaCommittable). At least once, only Seq is used.
type Transaction struct {
	TransactionalID string
	ProducerID      int64
	ProducerEpoch   int16
	Seq             int64
}

// kafkaSink is the TwoPhaseCommitSink: at least once one idempotent
// producer flushed at each pre-commit; exactly once a transactional
// producer per transaction (see begin for the names).
type kafkaSink[T any] struct {
	cfg     sinkConfig
	ser     func(T) *kgo.Record
	clients map[string]*kgo.Client // open transactions' producers
	plain   *kgo.Client
	next    int64 // the number of the next transaction
	aborted bool  // lingering transactions were aborted
	// unverified are committed transactions whose markers were not yet
	// checked (verifyCommits).
	unverified []Transaction

	// failed is the first failed produce since the last pre-commit.
	failed atomic.Pointer[error]
	// promise is onProduced as a func value made once: a closure per
	// record was an allocation per record.
	promise func(*kgo.Record, error)
}

func (k *kafkaSink[T]) Open(*stream.SinkContext) error { return nil }

func (k *kafkaSink[T]) Close() error {
	for id, cl := range k.clients {
		cl.Close()
		delete(k.clients, id)
	}
	if k.plain != nil {
		k.plain.Close()
	}
	return nil
}

// baseOpts are the producers' options: franz-go's defaults for batching,
// linger (10 ms) and compression (snappy), acks=all and idempotence.
// SinkProperty and SinkClientOptions add to them.
func (k *kafkaSink[T]) baseOpts() []kgo.Opt {
	return k.clientOpts(kgo.DefaultProduceTopic(k.cfg.topic))
}

// clientOpts are the options of every client of the sink: the brokers,
// opts, then the user's.
func (k *kafkaSink[T]) clientOpts(opts ...kgo.Opt) []kgo.Opt {
	return slices.Concat([]kgo.Opt{kgo.SeedBrokers(k.cfg.brokers...), kgo.WithLogger(clientLogger{k.cfg.log})}, opts, k.cfg.client.opts)
}

func (k *kafkaSink[T]) txnID(subtask int, n int64) string {
	return fmt.Sprintf("%s-%d-%d", k.cfg.prefix, subtask, n)
}

func (k *kafkaSink[T]) BeginTransaction(ctx *stream.SinkContext) (Transaction, error) {
	return k.begin(ctx.SubtaskIndex(), ctx.RestoredCheckpointID())
}

// begin starts the subtask's next transaction. Transactions are numbered
// consecutively, and the numbers travel in the checkpoint: a restore
// commits or aborts the restored ones first (raising next above them), so
// the ones a failed run began after the checkpoint are numbered from next
// on without a gap, and abortLingering finds them all. A subtask without
// restored transactions starts at restored+1.
func (k *kafkaSink[T]) begin(subtask int, restored int64) (Transaction, error) {
	if k.next == 0 {
		k.next = restored + 1
	}
	n := k.next
	k.next++
	if k.cfg.guarantee != ExactlyOnce {
		if k.plain == nil {
			cl, err := kgo.NewClient(k.baseOpts()...)
			if err != nil {
				return Transaction{}, fmt.Errorf("kafka: sink producer: %w", err)
			}
			k.plain = cl
		}
		return Transaction{Seq: n}, nil
	}
	if !k.aborted {
		if err := k.abortLingering(subtask, n); err != nil {
			return Transaction{}, err
		}
		k.aborted = true
	}
	id := k.txnID(subtask, n)
	cl, err := kgo.NewClient(append(k.baseOpts(), kgo.TransactionalID(id), kgo.TransactionTimeout(k.cfg.txnTimeout))...)
	if err != nil {
		return Transaction{}, fmt.Errorf("kafka: transactional producer %s: %w", id, err)
	}
	// Initializing the producer ID now fences any older producer of the
	// name and gives the ID and epoch a restore commits with.
	ictx, cancel := context.WithTimeout(context.Background(), time.Minute)
	pid, epoch, err := initProducerID(ictx, cl, id, k.cfg.log)
	cancel()
	if err == nil {
		err = cl.BeginTransaction()
	}
	if err != nil {
		cl.Close()
		return Transaction{}, fmt.Errorf("kafka: beginning transaction %s: %w", id, err)
	}
	k.clients[id] = cl
	return Transaction{TransactionalID: id, ProducerID: pid, ProducerEpoch: epoch, Seq: n}, nil
}

// abortLingering aborts what a previous run of this subtask left open:
// transactions named from `from` upwards, until a name that was never
// used (its first InitProducerID returns epoch 0), as Flink's KafkaSink
// probes. Initializing a producer ID for a transactional.id fences older
// producers and aborts their open transaction.
func (k *kafkaSink[T]) abortLingering(subtask int, from int64) error {
	for n := from; ; n++ {
		id := k.txnID(subtask, n)
		epoch, err := k.fence(id)
		if err != nil {
			return err
		}
		if epoch == 0 {
			return nil
		}
		k.cfg.log.Info().Str("transactional_id", id).Msg("kafka sink: aborted a lingering transaction")
	}
}

// fence initializes a producer ID for id and returns its epoch.
func (k *kafkaSink[T]) fence(id string) (int16, error) {
	cl, err := kgo.NewClient(k.clientOpts(kgo.TransactionalID(id), kgo.TransactionTimeout(k.cfg.txnTimeout))...)
	if err != nil {
		return 0, fmt.Errorf("kafka: producer %s: %w", id, err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, epoch, err := initProducerID(ctx, cl, id, k.cfg.log)
	if err != nil {
		return 0, fmt.Errorf("kafka: fencing %s: %w", id, err)
	}
	return epoch, nil
}

// initProducerID initializes cl's producer ID (InitProducerID for its
// transactional.id) until the coordinator answers or ctx ends, retrying
// as commitTransaction does: a broker that is restarting refuses
// connections for a while, and a transaction the sink cannot begin fails
// the task, whose restarts would fail the same way until it is back.
func initProducerID(ctx context.Context, cl *kgo.Client, id string, log zerolog.Logger) (int64, int16, error) {
	retry := backoff.New(commitRetry, nil)
	for attempt := 1; ; attempt++ {
		pid, epoch, err := cl.ProducerID(ctx)
		if err == nil || !retriableCommitError(err) || ctx.Err() != nil {
			return pid, epoch, err
		}
		log.Warn().Err(err).Str("transactional_id", id).Int("attempt", attempt).
			Msg("kafka sink: initializing a transactional producer failed; retrying")
		select {
		case <-ctx.Done():
			return 0, 0, fmt.Errorf("%w (gave up: %w)", err, ctx.Err())
		case <-time.After(retry.Next()):
		}
	}
}

func (k *kafkaSink[T]) Write(ctx *stream.SinkContext, txn Transaction, v T) error {
	cl := k.plain
	if k.cfg.guarantee == ExactlyOnce {
		cl = k.clients[txn.TransactionalID]
	}
	if k.failed.Load() != nil {
		if err := k.takeFailure(); err != nil {
			return err
		}
	}
	if k.promise == nil {
		k.promise = k.onProduced
	}
	rec := k.ser(v)
	// A record without a timestamp gets the element's, as Flink's
	// KafkaSink does (and the client's clock read per record is saved).
	if ts, ok := ctx.Timestamp(); ok && rec.Timestamp.IsZero() {
		rec.Timestamp = time.UnixMilli(ts)
	}
	cl.Produce(context.Background(), rec, k.promise)
	return nil
}

// onProduced keeps the first produce failure for the sink's goroutine.
func (k *kafkaSink[T]) onProduced(_ *kgo.Record, err error) {
	if err != nil {
		k.failed.CompareAndSwap(nil, &err)
	}
}

func (k *kafkaSink[T]) takeFailure() error {
	if p := k.failed.Swap(nil); p != nil {
		return fmt.Errorf("kafka: producing: %w", *p)
	}
	return nil
}

// PreCommit flushes the transaction's records; txn already holds the
// producer ID and epoch a restore commits it with.
func (k *kafkaSink[T]) PreCommit(_ *stream.SinkContext, txn Transaction) error {
	cl := k.plain
	if k.cfg.guarantee == ExactlyOnce {
		cl = k.clients[txn.TransactionalID]
	}
	if cl == nil {
		return fmt.Errorf("kafka: pre-committing %s: no producer", txn.TransactionalID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("kafka: flushing: %w", err)
	}
	return k.takeFailure()
}

// Commit commits a pre-committed transaction: with its producer when this
// process has it, else (after a restore, or when that producer failed to)
// by sending EndTxn with the recorded producer ID and epoch. A transaction
// already committed counts as committed; one the broker aborted is
// ErrTransactionAborted. The committed transaction, and earlier ones not
// checked yet, are then checked for a missing marker
// (ErrHangingTransaction).
func (k *kafkaSink[T]) Commit(_ *stream.SinkContext, txn Transaction) error {
	k.follow(txn)
	if k.cfg.guarantee != ExactlyOnce {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if cl := k.clients[txn.TransactionalID]; cl != nil {
		delete(k.clients, txn.TransactionalID)
		defer cl.Close()
		err := cl.EndTransaction(ctx, kgo.TryCommit)
		if err == nil {
			return k.verify(cl, txn)
		}
		// Unconfirmed or refused: the recorded handle retries and, if
		// refused, finds out whether it committed.
		k.cfg.log.Warn().Err(err).Str("transactional_id", txn.TransactionalID).
			Msg("kafka sink: the producer could not commit its transaction; committing from its recorded handle")
	}
	cl, err := kgo.NewClient(k.clientOpts()...)
	if err != nil {
		return fmt.Errorf("kafka: client: %w", err)
	}
	defer cl.Close()
	if err := commitTransaction(ctx, cl, txn, k.cfg.log); err != nil {
		return err
	}
	return k.verify(cl, txn)
}

// verify checks txn, just committed, and the committed transactions not
// checked yet for a missing marker (verifyCommits), within verifyTimeout:
// the ones it cannot decide now wait for the next commit.
func (k *kafkaSink[T]) verify(cl *kgo.Client, txn Transaction) error {
	ctx, cancel := context.WithTimeout(context.Background(), verifyTimeout)
	defer cancel()
	left, err := verifyCommits(ctx, cl, k.cfg.topic, append(k.unverified, txn))
	if n := len(left) - maxUnverified; n > 0 {
		k.cfg.log.Warn().Int("transactions", n).Msg("kafka sink: could not check committed transactions for missing markers")
		left = left[n:]
	}
	k.unverified = left
	return err
}

// Abort aborts an open transaction: with its producer, or by fencing its
// transactional.id.
func (k *kafkaSink[T]) Abort(_ *stream.SinkContext, txn Transaction) error {
	k.follow(txn)
	if k.cfg.guarantee != ExactlyOnce {
		return nil
	}
	if cl := k.clients[txn.TransactionalID]; cl != nil {
		delete(k.clients, txn.TransactionalID)
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cl.AbortBufferedRecords(ctx); err != nil {
			return fmt.Errorf("kafka: aborting %s: %w", txn.TransactionalID, err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
			return fmt.Errorf("kafka: aborting %s: %w", txn.TransactionalID, err)
		}
		return nil
	}
	_, err := k.fence(txn.TransactionalID)
	return err
}

// follow numbers the next transaction after txn (see begin).
func (k *kafkaSink[T]) follow(txn Transaction) {
	if txn.Seq >= k.next {
		k.next = txn.Seq + 1
	}
}

// commitRetry paces the EndTxn and DescribeTransactions retries of a
// commit.
var commitRetry = backoff.Config{Initial: 50 * time.Millisecond, Max: time.Second}

// commitTransaction sends EndTxn(commit) for txn, which another process
// may have pre-committed (what Flink's
// FlinkKafkaInternalProducer.resumeTransaction does by reflection), until
// the coordinator answers or ctx ends. A broker that cannot be reached (a
// restarting one refuses connections, which franz-go does not retry for a
// seed) and the coordinator's transient errors are retried. A fenced epoch or an invalid
// state means the transaction ended without this request: verifyCommitted
// tells a commit (a second commit, or one whose answer was lost) from an
// abort, which is the loss of its records.
func commitTransaction(ctx context.Context, cl *kgo.Client, txn Transaction, log zerolog.Logger) error {
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID = txn.TransactionalID
	req.ProducerID = txn.ProducerID
	req.ProducerEpoch = txn.ProducerEpoch
	req.Commit = true
	retry := backoff.New(commitRetry, nil)
	for attempt := 1; ; attempt++ {
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(err, kerr.InvalidProducerEpoch), errors.Is(err, kerr.ProducerFenced),
			errors.Is(err, kerr.InvalidTxnState):
			return verifyCommitted(ctx, cl, txn, err)
		case !retriableCommitError(err) || ctx.Err() != nil:
			return fmt.Errorf("kafka: committing %s: %w", txn.TransactionalID, err)
		}
		log.Warn().Err(err).Str("transactional_id", txn.TransactionalID).Int("attempt", attempt).
			Msg("kafka sink: committing a transaction failed; retrying")
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafka: committing %s: %w (gave up: %w)", txn.TransactionalID, err, ctx.Err())
		case <-time.After(retry.Next()):
		}
	}
}

// retriableCommitError is true for an EndTxn failure that a later attempt
// may not see: the coordinator moving or loading, or no answer at all (a
// network error: the broker is down or restarting).
func retriableCommitError(err error) bool {
	if _, ok := errors.AsType[*kerr.Error](err); !ok {
		// Not the broker's answer: the request did not get through.
		return !errors.Is(err, kgo.ErrClientClosed) && !errors.Is(err, context.Canceled) &&
			!errors.Is(err, context.DeadlineExceeded)
	}
	return kerr.IsRetriable(err) || errors.Is(err, kerr.ConcurrentTransactions) ||
		errors.Is(err, kerr.CoordinatorLoadInProgress) || errors.Is(err, kerr.NotCoordinator) ||
		errors.Is(err, kerr.CoordinatorNotAvailable)
}

// ErrTransactionAborted is returned (marked non-recoverable) when a
// pre-committed transaction was aborted instead of committed: its records
// are lost, and a restart cannot bring them back. The usual cause is a
// transaction.timeout.ms (TransactionTimeout) shorter than the time
// between the checkpoint and the commit (a job down or restarting, a
// broker down): the coordinator aborts a transaction that outlives it.
var ErrTransactionAborted = errors.New("kafka: pre-committed transaction was aborted by the broker, its records are lost")

// verifyCommitted asks the coordinator how txn ended after EndTxn(commit)
// was refused with refusal: committed (a repeated commit), or never begun
// there (no record written: still Empty at the recorded epoch), is
// success; aborted (its timeout expired, or it was fenced) is
// ErrTransactionAborted.
// Flink's KafkaCommitter treats these answers as "most likely aborted" too
// and names transaction.timeout.ms.
func verifyCommitted(ctx context.Context, cl *kgo.Client, txn Transaction, refusal error) error {
	adm := kadm.NewClient(cl)
	retry := backoff.New(commitRetry, nil)
	for {
		d, err := adm.DescribeTransactions(ctx, txn.TransactionalID)
		var st kadm.DescribedTransaction
		if err == nil {
			st = d[txn.TransactionalID]
			err = st.Err
		}
		switch {
		case err == nil && st.State == "CompleteCommit":
			return nil
		case err == nil && st.State == "Empty" && st.ProducerID == txn.ProducerID && st.ProducerEpoch == txn.ProducerEpoch:
			// Never began at the coordinator (its producer wrote no
			// record): nothing to commit, nothing lost.
			return nil
		case err == nil && st.State != "PrepareCommit":
			// PrepareCommit is a commit whose markers are still being
			// written: ask again. Anything else did not commit.
			return failure.NonRecoverable(fmt.Errorf(
				"%w: %s (producer ID %d, epoch %d): the commit was refused (%w) and the coordinator holds the transactional ID in state %s (producer ID %d, epoch %d, timeout %d ms); was transaction.timeout.ms shorter than the job's recovery?",
				ErrTransactionAborted, txn.TransactionalID, txn.ProducerID, txn.ProducerEpoch, refusal,
				st.State, st.ProducerID, st.ProducerEpoch, st.TimeoutMillis))
		case err != nil && (!retriableCommitError(err) || ctx.Err() != nil):
			return fmt.Errorf("kafka: committing %s: the commit was refused (%w) and describing the transaction failed: %w",
				txn.TransactionalID, refusal, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafka: committing %s: the commit was refused (%w) and the transaction is still %s: %w",
				txn.TransactionalID, refusal, st.State, ctx.Err())
		case <-time.After(retry.Next()):
		}
	}
}
