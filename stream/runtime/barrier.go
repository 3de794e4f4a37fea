package runtime

import (
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// Causes a task gives when it declines a checkpoint (Flink's
// CheckpointFailureReason), wrapped with details.
var (
	// ErrCheckpointSubsumed: a barrier of a newer checkpoint arrived before
	// the alignment of this one completed.
	ErrCheckpointSubsumed = errors.New("runtime: checkpoint subsumed by a newer barrier during alignment")
	// ErrCheckpointCancelled: an upstream task cancelled the checkpoint
	// (EventCancelBarrier).
	ErrCheckpointCancelled = errors.New("runtime: checkpoint cancelled upstream")
	// ErrSnapshotFailed: an operator's SnapshotState failed.
	ErrSnapshotFailed = errors.New("runtime: operator snapshot failed")
)

// checkpointer is a task's checkpointing state (Flink's
// SingleCheckpointBarrierHandler with the SubtaskCheckpointCoordinator),
// used on the task goroutine only.
type checkpointer struct {
	resp CheckpointResponder
	// aligning: barrier is being aligned since alignStart.
	aligning   bool
	barrier    CheckpointBarrier
	alignStart time.Time
	// lastDone is the highest checkpoint taken, declined or cancelled here;
	// barriers up to it are ignored.
	lastDone int64
	// aborted holds checkpoints the coordinator aborted before their
	// barrier arrived here.
	aborted map[int64]bool
	// trigger is a TriggerCheckpoint that reached a task with inputs before
	// all its channels ended; it is taken once they have.
	trigger *CheckpointBarrier
	// dataEnded: the task ended its data (EventEndOfData sent); drained:
	// its operators finished then (not for stop-with-savepoint without
	// drain).
	dataEnded bool
	drained   bool
	// firstAfterEnd is the first checkpoint acknowledged after dataEnded;
	// finalDone once a checkpoint from it on completed: the task may end.
	firstAfterEnd int64
	finalDone     bool
	// waitFinal: the task waits for a final checkpoint at the end of its
	// data. True with periodic checkpoints, and from a stop-with-savepoint
	// or an upstream EventEndOfData on; otherwise a task ends at the end
	// of its input as without checkpointing (manual savepoints only).
	waitFinal bool
	// unaligned: the checkpoint being aligned was taken unaligned; the
	// capturing channels record their input until their barrier, then
	// pendSnap (with outFlight, the overtaken output) is acknowledged,
	// or declined with unalignedErr.
	unaligned    bool
	capturing    int
	pendSnap     *TaskSnapshot
	pendMetrics  CheckpointSyncMetrics
	outFlight    []InFlightData
	unalignedErr error
}

func newCheckpointer(resp CheckpointResponder, waitFinal bool) *checkpointer {
	return &checkpointer{resp: resp, waitFinal: waitFinal}
}

// onControl handles a message of the CheckpointCoordinator.
func (t *task) onControl(m CheckpointControl) {
	ck := t.ck
	switch m.Kind {
	case TriggerCheckpoint:
		if t.in != nil && t.in.remaining > 0 {
			// The coordinator triggers a task once its upstream tasks
			// finished: the rest of their events are still on the way.
			if ck.trigger == nil || m.Barrier.ID > ck.trigger.ID {
				b := m.Barrier
				ck.trigger = &b
			}
			return
		}
		t.performCheckpoint(m.Barrier, 0, m.Barrier.Options.Unaligned && unalignedOK(m.Barrier))
	case NotifyCheckpointComplete:
		for _, n := range t.nodes {
			if l := n.listener; l != nil {
				n.call(func() error { return l.NotifyCheckpointComplete(m.CheckpointID) })
			}
		}
		if ck.dataEnded && ck.firstAfterEnd != 0 && m.CheckpointID >= ck.firstAfterEnd {
			ck.finalDone = true
		}
	case NotifyCheckpointAborted:
		if ck.aligning && ck.barrier.ID == m.CheckpointID {
			t.abortAlignment(nil)
		} else if m.CheckpointID > ck.lastDone {
			if ck.aborted == nil {
				ck.aborted = map[int64]bool{}
			}
			ck.aborted[m.CheckpointID] = true
		}
		for _, n := range t.nodes {
			if l := n.listener; l != nil {
				n.call(func() error { return l.NotifyCheckpointAborted(m.CheckpointID) })
			}
		}
	}
}

// onBarrier handles barrier b on channel ch and reports whether ch is now
// blocked (exactly-once alignment): its later events must be held.
// priority: b came ahead of the channel's data (see unaligned.go).
func (t *task) onBarrier(ch *chanState, b CheckpointBarrier, priority bool) bool {
	ck := t.ck
	if ck.aligning && ck.unaligned && b.ID == ck.barrier.ID {
		// Taken already; a capturing channel ends at its position.
		ch.barrier = b.ID
		return false
	}
	if b.ID <= ck.lastDone {
		return false
	}
	if ck.aligning {
		if b.ID < ck.barrier.ID {
			return false
		}
		if b.ID > ck.barrier.ID {
			t.abortAlignment(fmt.Errorf("%w: checkpoint %d by %d", ErrCheckpointSubsumed, ck.barrier.ID, b.ID))
		}
	}
	if !ck.aligning {
		if ck.aborted[b.ID] {
			// Aborted by the coordinator: tell downstream tasks, which may
			// not know yet, and ignore the other channels' barriers.
			t.setDone(b.ID)
			t.broadcast(Event{Kind: EventCancelBarrier, Barrier: CheckpointBarrier{ID: b.ID}})
			t.flushOrAbort()
			return false
		}
		ck.aligning, ck.barrier, ck.alignStart = true, b, t.now()
	}
	ch.barrier = b.ID
	if b.Options.Unaligned && unalignedOK(b) {
		t.switchToUnaligned(ch, priority)
		return false
	}
	if t.aligned() {
		t.completeAlignment()
		return false
	}
	if b.Options.ExactlyOnce {
		ch.blocked = true
		t.in.holding = true
		return true
	}
	return false
}

// onCancelBarrier handles EventCancelBarrier of checkpoint id.
func (t *task) onCancelBarrier(id int64) {
	ck := t.ck
	if id <= ck.lastDone {
		return
	}
	cause := fmt.Errorf("%w: checkpoint %d", ErrCheckpointCancelled, id)
	if ck.aligning && ck.unaligned && id == ck.barrier.ID {
		t.abortAlignment(cause)
		return
	}
	if ck.aligning {
		if id < ck.barrier.ID {
			return
		}
		if id == ck.barrier.ID {
			t.abortAlignment(cause)
			return
		}
		t.abortAlignment(fmt.Errorf("%w: checkpoint %d by the cancellation of %d", ErrCheckpointSubsumed, ck.barrier.ID, id))
	}
	// A checkpoint not seen yet: decline it and pass the cancellation on.
	t.setDone(id)
	ck.resp.Decline(id, cause)
	t.broadcast(Event{Kind: EventCancelBarrier, Barrier: CheckpointBarrier{ID: id}})
	t.flushOrAbort()
}

// aligned reports whether every channel not ended delivered the barrier
// being aligned.
func (t *task) aligned() bool {
	id := t.ck.barrier.ID
	for _, g := range t.in.gates {
		for c := range g.ch {
			if ch := &g.ch[c]; !ch.ended && ch.barrier != id {
				return false
			}
		}
	}
	return true
}

// completeAlignment takes the aligned checkpoint and releases the held
// events, which the input loop replays before reading on.
func (t *task) completeAlignment() {
	ck := t.ck
	ck.aligning = false
	t.unblock()
	t.performCheckpoint(ck.barrier, t.now().Sub(ck.alignStart), false)
}

// abortAlignment stops aligning: it declines the checkpoint with cause
// (unless nil: the coordinator aborted it), cancels it downstream and
// releases the held events.
func (t *task) abortAlignment(cause error) {
	ck := t.ck
	id := ck.barrier.ID
	ck.aligning = false
	t.clearUnaligned()
	t.setDone(id)
	if cause != nil {
		ck.resp.Decline(id, cause)
	}
	t.broadcast(Event{Kind: EventCancelBarrier, Barrier: CheckpointBarrier{ID: id}})
	t.flushOrAbort()
	t.unblock()
}

func (t *task) unblock() {
	in := t.in
	held := false
	for gi := range in.gates {
		for c := range in.gates[gi].ch {
			ch := &in.gates[gi].ch[c]
			ch.blocked = false
			if len(ch.held) > 0 {
				held = true
			}
		}
	}
	in.holding, in.replay = held, held
}

// replayHeld processes the first held batch of an unblocked channel and
// reports whether there was one.
func (t *task) replayHeld() bool {
	in := t.in
	holding := false
	for gi := range in.gates {
		for c := range in.gates[gi].ch {
			ch := &in.gates[gi].ch[c]
			if ch.blocked {
				holding = true
				continue
			}
			if len(ch.held) == 0 {
				continue
			}
			evs := ch.held[0]
			ch.held[0] = nil
			ch.held = ch.held[1:]
			if len(ch.held) == 0 {
				ch.held = nil
			}
			if _, err := t.processBatch(gi, c, evs); err != nil {
				panic(abort{err})
			}
			return true
		}
	}
	in.holding, in.replay = holding, false
	return false
}

func (t *task) setDone(id int64) {
	ck := t.ck
	if id > ck.lastDone {
		ck.lastDone = id
	}
	for a := range ck.aborted {
		if a <= ck.lastDone {
			delete(ck.aborted, a)
		}
	}
}

// endChannelData handles the end of data of channel ch; the task ends its
// own data when every channel has (FLIP-147).
func (t *task) endChannelData(ch *chanState, drain bool) {
	in := t.in
	ch.dataEnded = true
	in.dataOpen--
	in.drain = in.drain && drain
	if in.dataOpen == 0 {
		t.endData(in.drain)
	}
}

// channelEnded follows an EventEndOfPartition: an ended channel counts as
// aligned, and once all have, a deferred trigger is taken.
func (t *task) channelEnded() {
	ck := t.ck
	if ck.aligning && !ck.unaligned && t.aligned() {
		t.completeAlignment()
	}
	if t.in.remaining == 0 && ck.trigger != nil {
		b := *ck.trigger
		ck.trigger = nil
		t.performCheckpoint(b, 0, false)
	}
}

// endData ends the task's data with checkpointing on. With drain, pending
// timers fire, MaxWatermark goes down the chain and the operators finish;
// without (stop-with-savepoint), the operators just stop. Either way
// EventEndOfData follows on every subpartition, and no timer fires any
// more: the task only takes checkpoints until one completes.
func (t *task) endData(drain bool) {
	ck := t.ck
	if drain {
		t.endInput()
	}
	if !ck.waitFinal {
		ck.dataEnded, ck.drained, ck.finalDone = true, drain, true
		return
	}
	t.timers.items = nil
	ck.dataEnded, ck.drained = true, drain
	t.broadcast(Event{Kind: EventEndOfData, Drain: drain})
	t.flushOrAbort()
	if n, ok := ck.resp.(EndOfDataNotifier); ok {
		n.NotifyEndOfData()
	}
}

// performCheckpoint takes checkpoint b: snapshot, acknowledge, forward the
// barrier. A failing snapshot declines the checkpoint and cancels it
// downstream; the task goes on (the coordinator decides). unaligned: the
// barrier goes on as a priority event and the acknowledgement waits for
// the capturing channels (maybeFinishUnaligned).
func (t *task) performCheckpoint(b CheckpointBarrier, alignment time.Duration, unaligned bool) {
	ck := t.ck
	if b.ID <= ck.lastDone {
		return
	}
	t.setDone(b.ID)
	if b.Options.Type.IsStop() {
		ck.waitFinal = true
	}
	source := t.spec.NumInputs == 0
	if source && b.Options.Type == SavepointTerminate && !ck.dataEnded {
		t.endData(true)
	}
	start := t.now()
	snap, err := t.snapshot(b.ID, b.Options.Type)
	if unaligned && err == nil {
		m := CheckpointSyncMetrics{SyncDuration: t.now().Sub(start), AlignmentDuration: alignment}
		var out []InFlightData
		if out, err = t.emitBarrier(b, true); err == nil {
			ck.barrier, ck.unaligned, ck.pendSnap, ck.pendMetrics, ck.outFlight = b, true, snap, m, out
			t.flushOrAbort()
			if ck.dataEnded && ck.firstAfterEnd == 0 {
				ck.firstAfterEnd = b.ID
			}
			t.maybeFinishUnaligned()
			return
		}
		snap.Release()
	}
	if err != nil {
		if unaligned {
			t.clearUnaligned()
			ck.aligning = false
		}
		ck.resp.Decline(b.ID, err)
		t.broadcast(Event{Kind: EventCancelBarrier, Barrier: CheckpointBarrier{ID: b.ID}})
		t.flushOrAbort()
		return
	}
	ck.resp.Acknowledge(b, snap, CheckpointSyncMetrics{SyncDuration: t.now().Sub(start), AlignmentDuration: alignment})
	if source && b.Options.Type == SavepointSuspend && !ck.dataEnded {
		// Stop: the end of data goes before the barrier so every task
		// downstream takes the savepoint after it stopped, and then waits
		// for its completion like the source.
		t.endData(false)
	}
	t.broadcast(Event{Kind: EventBarrier, Barrier: b})
	t.flushOrAbort()
	if ck.dataEnded && ck.firstAfterEnd == 0 {
		ck.firstAfterEnd = b.ID
	}
}

// snapshot snapshots the operators implementing CheckpointedOperator in
// chain order. Once the task finished, every operator is in it, marked
// Finished, so a restore can tell a finished chain.
func (t *task) snapshot(id int64, typ CheckpointType) (*TaskSnapshot, error) {
	finished := t.finishedOnRestore || (t.ck.dataEnded && t.ck.drained)
	ts := &TaskSnapshot{}
	for _, n := range t.nodes {
		if n.ckOp == nil && !finished {
			continue
		}
		s := &OperatorSnapshot{OperatorID: n.spec.ID, CheckpointID: id, Type: typ, Finished: finished}
		if n.ckOp != nil {
			if err := n.try(func() error { return n.ckOp.SnapshotState(id, s) }); err != nil {
				return nil, &OperatorError{Task: t.spec.Name, Subtask: t.env.SubtaskIndex, Operator: n.spec.Name, OperatorID: n.spec.ID,
					Err: fmt.Errorf("%w: checkpoint %d: %w", ErrSnapshotFailed, id, err)}
			}
		}
		ts.Operators = append(ts.Operators, s)
	}
	return ts, nil
}

// try runs f as operator n and returns its error or panic instead of
// unwinding the task.
func (n *opNode) try(f func() error) (err error) {
	prev := n.enter()
	defer func() {
		if p := recover(); p != nil {
			if a, ok := p.(abort); ok {
				panic(a)
			}
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
		n.t.current.n = prev
	}()
	return f()
}

func (t *task) flushOrAbort() {
	if err := t.flush(); err != nil {
		panic(abort{err})
	}
}
