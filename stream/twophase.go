package stream

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/gofl/gofl/stream/codec"
	"github.com/gofl/gofl/stream/runtime"
)

// TwoPhaseCommitSink writes a stream exactly once into an external system
// with transactions, as Flink's TwoPhaseCommitSinkFunction: the records
// between two checkpoints go into one transaction, pre-committed when the
// checkpoint is taken and committed once it completed. TXN is the
// transaction's handle, kept in the operator's state, so it must be
// serializable (codec.For[TXN]); tag fields that are not (open files,
// connections) `codec:"-"` and keep what they refer to in the sink.
//
// All methods are called on the sink subtask's goroutine. Without
// checkpointing the single transaction is pre-committed and committed when
// the input ends.
type TwoPhaseCommitSink[T, TXN any] interface {
	// BeginTransaction starts the transaction the next records go to.
	BeginTransaction(ctx *SinkContext) (TXN, error)
	// Write adds v to txn.
	Write(ctx *SinkContext, txn TXN, v T) error
	// PreCommit makes txn durable so that Commit cannot fail for lack of
	// data; called when checkpoint ctx.CheckpointID() is taken. It may
	// change txn (a pointer) before it is stored in the checkpoint.
	PreCommit(ctx *SinkContext, txn TXN) error
	// Commit publishes a pre-committed txn. It must be idempotent: after a
	// restore the transactions of the checkpoint are committed again, and
	// some may already be.
	Commit(ctx *SinkContext, txn TXN) error
	// Abort discards a transaction that was not pre-committed: the one
	// open when the sink closes, and on restore the one that was open at
	// the checkpoint. It must tolerate a transaction already gone.
	Abort(ctx *SinkContext, txn TXN) error
}

// AsyncPreCommitter is a TwoPhaseCommitSink whose pre-commit can finish
// off the sink's goroutine, so the task does not wait for the disk at each
// checkpoint (the text sink's fsync and rename). The checkpoint is
// acknowledged only after persist returned nil.
type AsyncPreCommitter[TXN any] interface {
	// PreCommitAsync is PreCommit in two parts. On the sink's goroutine it
	// stops writing txn and may change it (as PreCommit); it returns
	// persist, nil when there is nothing left to do, which makes txn
	// durable. persist runs once on another goroutine, after the persists
	// of earlier checkpoints, and must touch only what it captured.
	PreCommitAsync(ctx *SinkContext, txn TXN) (persist func() error, err error)
}

// SinkLifecycle is implemented by a TwoPhaseCommitSink with set-up and
// tear-down: Open runs before anything else (before restored transactions
// are committed), Close always runs last.
type SinkLifecycle interface {
	Open(ctx *SinkContext) error
	Close() error
}

// SinkContext is what a TwoPhaseCommitSink sees of its subtask.
type SinkContext struct {
	rctx       *runtime.Context
	checkpoint int64
	restored   int64
	// ts is the timestamp of the element being written, when hasTS.
	ts    int64
	hasTS bool
}

// Timestamp is the event-time timestamp (ms) of the element being written
// (during Write), false when it has none: Flink's SinkWriter.Context
// timestamp().
func (c *SinkContext) Timestamp() (int64, bool) { return c.ts, c.hasTS }

// SubtaskIndex is the sink subtask's index.
func (c *SinkContext) SubtaskIndex() int { return c.rctx.SubtaskIndex }

// Parallelism is the sink's parallelism.
func (c *SinkContext) Parallelism() int { return c.rctx.Parallelism }

// Checkpointing is true when the job takes checkpoints.
func (c *SinkContext) Checkpointing() bool { return c.rctx.Checkpointing }

// CheckpointID is the checkpoint being taken during PreCommit, 0 when the
// transaction is pre-committed at the end of input without checkpoints.
func (c *SinkContext) CheckpointID() int64 { return c.checkpoint }

// RestoredCheckpointID is the ID of the checkpoint the sink was restored
// from (the highest any subtask stored), 0 on a fresh start.
func (c *SinkContext) RestoredCheckpointID() int64 { return c.restored }

// AddTwoPhaseCommitSink ends s in a transactional sink; newSink creates the
// sink of one subtask.
func AddTwoPhaseCommitSink[T, TXN any](s DataStream[T], name string, newSink func() TwoPhaseCommitSink[T, TXN]) Sink {
	c, err := codec.For[txnState[TXN]]()
	if err != nil {
		s.env.fail(fmt.Errorf("sink %q: transaction type %s cannot be serialized: %w", name, reflect.TypeFor[TXN](), err))
	}
	return addSink(s, "sink-two-phase-commit", name, func() runtime.Operator {
		return &twoPhaseCommitOp[T, TXN]{sink: newSink(), codec: c}
	})
}

// txnState is one element of the sink's transaction list state.
type txnState[TXN any] struct {
	// CheckpointID is the checkpoint that pre-committed the transaction,
	// or the last one taken for the open transaction.
	CheckpointID int64
	// Pending is true for a pre-committed transaction awaiting commit,
	// false for the one open at the checkpoint.
	Pending bool
	Txn     TXN
	// Subtask wrote the transaction. On restore old subtask j's
	// transactions belong to new subtask j mod p alone: a region failover
	// restarts some subtasks while the others keep their transactions
	// open.
	Subtask int
}

const twoPhaseState = "two-phase-commit-transactions"

// twoPhaseCommitOp is Flink's TwoPhaseCommitSinkFunction as an operator.
// Its state is a UNION list so every subtask learns the restored
// checkpoint ID; each subtask recovers the restored transactions whose
// position is its index modulo the parallelism.
type twoPhaseCommitOp[T, TXN any] struct {
	runtime.Base
	sink    TwoPhaseCommitSink[T, TXN]
	codec   codec.Codec[txnState[TXN]]
	sctx    SinkContext
	current TXN
	open    bool
	pending []txnState[TXN]
	last    int64
	// persisted is closed when the last checkpoint's persist has run;
	// persistErr is the first persist failure: every transaction after it
	// is unusable, so the task fails.
	persisted  chan struct{}
	persistErr atomic.Pointer[error]
}

func (o *twoPhaseCommitOp[T, TXN]) Open(ctx *runtime.Context) error {
	o.Ctx = ctx
	o.sctx = SinkContext{rctx: ctx}
	if l, ok := o.sink.(SinkLifecycle); ok {
		if err := l.Open(&o.sctx); err != nil {
			return err
		}
	}
	if ctx.Restore != nil {
		if err := o.restore(ctx); err != nil {
			return fmt.Errorf("sink %q: recovering transactions: %w", ctx.OperatorName, err)
		}
	}
	return o.begin()
}

func (o *twoPhaseCommitOp[T, TXN]) restore(ctx *runtime.Context) error {
	if err := ctx.Restore.CheckType(twoPhaseState, o.typeName()); err != nil {
		return err
	}
	els := ctx.Restore.Lists[twoPhaseState]
	states := make([]txnState[TXN], len(els))
	for i, b := range els {
		st, n, err := o.codec.Decode(b)
		if err == nil && n != len(b) {
			err = fmt.Errorf("%w: trailing bytes", codec.ErrCorrupt)
		}
		if err != nil {
			return err
		}
		states[i] = st
		o.sctx.restored = max(o.sctx.restored, st.CheckpointID)
	}
	o.last = o.sctx.restored
	for _, st := range states {
		if st.Subtask%ctx.Parallelism != ctx.SubtaskIndex {
			continue
		}
		if st.Pending {
			// The checkpoint that pre-committed it completed (it is in the
			// restored state), maybe without its notification.
			if err := o.sink.Commit(&o.sctx, st.Txn); err != nil {
				return err
			}
		} else if err := o.sink.Abort(&o.sctx, st.Txn); err != nil {
			return err
		}
	}
	return nil
}

func (o *twoPhaseCommitOp[T, TXN]) typeName() string {
	return "TwoPhaseCommit<" + reflect.TypeFor[TXN]().String() + ">"
}

func (o *twoPhaseCommitOp[T, TXN]) begin() error {
	txn, err := o.sink.BeginTransaction(&o.sctx)
	if err != nil {
		return err
	}
	o.current, o.open = txn, true
	return nil
}

func (o *twoPhaseCommitOp[T, TXN]) ProcessElement(_ int, r runtime.Record) error {
	if p := o.persistErr.Load(); p != nil {
		return *p
	}
	o.sctx.ts, o.sctx.hasTS = r.Timestamp, r.HasTimestamp
	return o.sink.Write(&o.sctx, o.current, as[T](r.Value))
}

func (o *twoPhaseCommitOp[T, TXN]) ProcessWatermark(int64) error { return nil }

// SnapshotState pre-commits the open transaction, starts the next one and
// stores both with every transaction still awaiting its commit.
func (o *twoPhaseCommitOp[T, TXN]) SnapshotState(id int64, snap *runtime.OperatorSnapshot) error {
	if p := o.persistErr.Load(); p != nil {
		return *p
	}
	o.sctx.checkpoint = id
	var err error
	if a, ok := o.sink.(AsyncPreCommitter[TXN]); ok {
		var persist func() error
		if persist, err = a.PreCommitAsync(&o.sctx, o.current); err == nil && persist != nil {
			snap.Persist = o.chain(persist)
		}
	} else {
		err = o.sink.PreCommit(&o.sctx, o.current)
	}
	o.sctx.checkpoint = 0
	if err != nil {
		return err
	}
	o.pending = append(o.pending, txnState[TXN]{CheckpointID: id, Pending: true, Txn: o.current, Subtask: o.Ctx.SubtaskIndex})
	o.open = false
	o.last = id
	if err := o.begin(); err != nil {
		return err
	}
	els := make([][]byte, 0, len(o.pending)+1)
	for _, p := range o.pending {
		els = append(els, o.codec.Append(nil, p))
	}
	els = append(els, o.codec.Append(nil, txnState[TXN]{CheckpointID: id, Txn: o.current, Subtask: o.Ctx.SubtaskIndex}))
	snap.PutList(twoPhaseState, runtime.UnionList, o.typeName(), els)
	return nil
}

// chain orders persist after the earlier checkpoints' and makes it run
// once: a transaction is committed only with every earlier one, so after a
// failure the later persists fail too.
func (o *twoPhaseCommitOp[T, TXN]) chain(persist func() error) func() error {
	prev, done := o.persisted, make(chan struct{})
	o.persisted = done
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() {
			defer close(done)
			if prev != nil {
				<-prev
			}
			if p := o.persistErr.Load(); p != nil {
				err = *p
				return
			}
			if err = persist(); err != nil {
				err = fmt.Errorf("sink %q: persisting the pre-committed transaction: %w", o.Ctx.OperatorName, err)
				o.persistErr.CompareAndSwap(nil, &err)
			}
		})
		return err
	}
}

// NotifyCheckpointComplete commits every transaction pre-committed up to
// id, in order (a notification may have been lost).
func (o *twoPhaseCommitOp[T, TXN]) NotifyCheckpointComplete(id int64) error {
	n := 0
	for _, p := range o.pending {
		if p.CheckpointID > id {
			break
		}
		if err := o.sink.Commit(&o.sctx, p.Txn); err != nil {
			o.pending = o.pending[n:]
			return err
		}
		n++
	}
	o.pending = o.pending[n:]
	return nil
}

// NotifyCheckpointAborted keeps the transactions: the next completed
// checkpoint commits them.
func (o *twoPhaseCommitOp[T, TXN]) NotifyCheckpointAborted(int64) error { return nil }

// Finish commits the only transaction when the job takes no checkpoints;
// otherwise the final checkpoint pre-commits and commits it.
func (o *twoPhaseCommitOp[T, TXN]) Finish() error {
	if o.Ctx.Checkpointing {
		return nil
	}
	if err := o.sink.PreCommit(&o.sctx, o.current); err != nil {
		return err
	}
	o.open = false
	return o.sink.Commit(&o.sctx, o.current)
}

// Close aborts the open transaction; pre-committed ones stay for a
// restore to commit.
func (o *twoPhaseCommitOp[T, TXN]) Close() error {
	var err error
	if o.open {
		o.open = false
		err = o.sink.Abort(&o.sctx, o.current)
	}
	if l, ok := o.sink.(SinkLifecycle); ok {
		err = errors.Join(err, l.Close())
	}
	return err
}
