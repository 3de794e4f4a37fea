package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// --- fixtures ---

type ackCall struct {
	barrier CheckpointBarrier
	snap    *TaskSnapshot
	metrics CheckpointSyncMetrics
}

type declineCall struct {
	id    int64
	cause error
}

// fakeResponder records the task's Acknowledge and Decline calls.
type fakeResponder struct {
	mu        sync.Mutex
	acks      []ackCall
	declines  []declineCall
	endOfData int
}

func (r *fakeResponder) NotifyEndOfData() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.endOfData++
}

func (r *fakeResponder) endOfDataNotices() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.endOfData
}

func (r *fakeResponder) Acknowledge(b CheckpointBarrier, snap *TaskSnapshot, m CheckpointSyncMetrics) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acks = append(r.acks, ackCall{b, snap, m})
}

func (r *fakeResponder) Decline(id int64, cause error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.declines = append(r.declines, declineCall{id, cause})
}

func (r *fakeResponder) ack(id int64) (ackCall, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.acks {
		if a.barrier.ID == id {
			return a, true
		}
	}
	return ackCall{}, false
}

func (r *fakeResponder) decline(id int64) (declineCall, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.declines {
		if d.id == id {
			return d, true
		}
	}
	return declineCall{}, false
}

func (r *fakeResponder) counts() (acks, declines int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.acks), len(r.declines)
}

func (r *fakeResponder) waitAck(t *testing.T, id int64) ackCall {
	t.Helper()
	var a ackCall
	eventually(t, fmt.Sprintf("ack of checkpoint %d", id), func() bool {
		var ok bool
		a, ok = r.ack(id)
		return ok
	})
	return a
}

func (r *fakeResponder) waitDecline(t *testing.T, id int64) declineCall {
	t.Helper()
	var d declineCall
	eventually(t, fmt.Sprintf("decline of checkpoint %d", id), func() bool {
		var ok bool
		d, ok = r.decline(id)
		return ok
	})
	return d
}

// eventually polls cond until it holds, failing after a generous deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// callLog is a log shared by the operators of a chain.
type callLog struct {
	mu    sync.Mutex
	calls []string
}

func (l *callLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, s)
}

func (l *callLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// ckOp forwards what it gets, remembers the int records it saw, snapshots
// them as list state "seen", and logs notifications and Finish.
type ckOp struct {
	Base
	name     string
	log      *callLog
	seen     []int
	wms      []int64
	finished bool
	failSnap map[int64]bool
	onRecord func(v int)
	// captured at Open
	restore       *OperatorRestore
	checkpointing bool
}

func (o *ckOp) Open(ctx *Context) error {
	o.restore, o.checkpointing = ctx.Restore, ctx.Checkpointing
	return o.Base.Open(ctx)
}

func (o *ckOp) ProcessElement(_ int, r Record) error {
	v := r.Value.(int)
	o.seen = append(o.seen, v)
	if o.onRecord != nil {
		o.onRecord(v)
	}
	o.Ctx.Output.Collect(r)
	return nil
}

func (o *ckOp) ProcessWatermark(wm int64) error {
	o.wms = append(o.wms, wm)
	return o.Base.ProcessWatermark(wm)
}

func (o *ckOp) Finish() error {
	o.finished = true
	o.logf("finish")
	return nil
}

func (o *ckOp) logf(format string, args ...any) {
	if o.log != nil {
		o.log.add(o.name + ":" + fmt.Sprintf(format, args...))
	}
}

func (o *ckOp) SnapshotState(id int64, snap *OperatorSnapshot) error {
	if o.failSnap[id] {
		return errors.New("disk on fire")
	}
	snap.PutList("seen", SplitList, "int", encodeInts(o.seen))
	return nil
}

func (o *ckOp) NotifyCheckpointComplete(id int64) error {
	o.logf("complete %d", id)
	return nil
}

func (o *ckOp) NotifyCheckpointAborted(id int64) error {
	o.logf("aborted %d", id)
	return nil
}

func encodeInts(vs []int) [][]byte {
	out := make([][]byte, len(vs))
	for i, v := range vs {
		out[i] = []byte(strconv.Itoa(v))
	}
	return out
}

// seenIn decodes the "seen" list state of operator id in snap.
func seenIn(t *testing.T, snap *TaskSnapshot, id string) []int {
	t.Helper()
	for _, s := range snap.Operators {
		if s.OperatorID != id {
			continue
		}
		var vs []int
		for _, b := range s.Lists["seen"].Elements {
			v, err := strconv.Atoi(string(b))
			if err != nil {
				t.Fatal(err)
			}
			vs = append(vs, v)
		}
		return vs
	}
	t.Fatalf("no snapshot of operator %s in %+v", id, snap.Operators)
	return nil
}

// ckSource emits vals, then ends (end) or idles for an hour per poll.
type ckSource struct {
	name     string
	log      *callLog
	vals     []int
	i        int
	end      bool
	restored *OperatorRestore
	ctx      *Context
}

func (s *ckSource) Open(ctx *Context) error { s.ctx, s.restored = ctx, ctx.Restore; return nil }
func (s *ckSource) Close() error            { return nil }

func (s *ckSource) Poll(out Output) (PollStatus, time.Time, error) {
	if s.i < len(s.vals) {
		out.Collect(Record{Value: s.vals[s.i]})
		s.i++
		return MoreAvailable, time.Time{}, nil
	}
	if s.end {
		return EndOfInput, time.Time{}, nil
	}
	return NothingAvailable, time.UnixMilli(s.ctx.ProcessingTime()).Add(time.Hour), nil
}

func (s *ckSource) SnapshotState(_ int64, snap *OperatorSnapshot) error {
	snap.PutList("offset", UnionList, "int", [][]byte{[]byte(strconv.Itoa(s.i))})
	return nil
}

func (s *ckSource) NotifyCheckpointComplete(id int64) error {
	s.log.add(fmt.Sprintf("%s:complete %d", s.name, id))
	return nil
}

func (s *ckSource) NotifyCheckpointAborted(id int64) error {
	s.log.add(fmt.Sprintf("%s:aborted %d", s.name, id))
	return nil
}

// recWriter records what a task writes, per subpartition.
type recWriter struct {
	mu  sync.Mutex
	evs [][]Event
}

func newRecWriter(n int) *recWriter { return &recWriter{evs: make([][]Event, n)} }

func (w *recWriter) NumSubpartitions() int { return len(w.evs) }

func (w *recWriter) Emit(s int, ev Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.evs[s] = append(w.evs[s], ev)
	return nil
}

func (w *recWriter) Flush() error { return nil }

func (w *recWriter) Finish() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for s := range w.evs {
		w.evs[s] = append(w.evs[s], Event{Kind: EventEndOfPartition})
	}
	return nil
}

func (w *recWriter) sub(s int) []Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.evs[s])
}

// has reports whether subpartition s got an event matching f.
func (w *recWriter) has(s int, f func(Event) bool) bool {
	return slices.ContainsFunc(w.sub(s), f)
}

func isKind(k EventKind) func(Event) bool { return func(e Event) bool { return e.Kind == k } }

func isBarrier(id int64) func(Event) bool {
	return func(e Event) bool { return e.Kind == EventBarrier && e.Barrier.ID == id }
}

// describe renders events compactly: records as their value, others as a
// tag.
func describe(evs []Event) []string {
	var out []string
	for _, e := range evs {
		switch e.Kind {
		case EventRecord:
			out = append(out, strconv.Itoa(e.Record.Value.(int)))
		case EventWatermark:
			if e.Watermark == MaxWatermark {
				out = append(out, "wm:max")
			} else {
				out = append(out, fmt.Sprintf("wm:%d", e.Watermark))
			}
		case EventBarrier:
			out = append(out, fmt.Sprintf("B%d", e.Barrier.ID))
		case EventCancelBarrier:
			out = append(out, fmt.Sprintf("C%d", e.Barrier.ID))
		case EventEndOfData:
			out = append(out, fmt.Sprintf("EOD:%v", e.Drain))
		case EventEndOfPartition:
			out = append(out, "EOP")
		}
	}
	return out
}

func rec(v int) Event { return Event{Kind: EventRecord, Record: Record{Value: v}} }

func bar(id int64, exactlyOnce bool) Event {
	return Event{Kind: EventBarrier, Barrier: CheckpointBarrier{ID: id, Options: CheckpointOptions{ExactlyOnce: exactlyOnce}}}
}

func cancelBar(id int64) Event {
	return Event{Kind: EventCancelBarrier, Barrier: CheckpointBarrier{ID: id}}
}
func eod(drain bool) Event { return Event{Kind: EventEndOfData, Drain: drain} }
func eop() Event           { return Event{Kind: EventEndOfPartition} }

func trigger(id int64, typ CheckpointType) CheckpointControl {
	return CheckpointControl{Kind: TriggerCheckpoint, Barrier: CheckpointBarrier{ID: id, Options: CheckpointOptions{Type: typ, ExactlyOnce: true}}}
}

func complete(id int64) CheckpointControl {
	return CheckpointControl{Kind: NotifyCheckpointComplete, CheckpointID: id}
}

func aborted(id int64) CheckpointControl {
	return CheckpointControl{Kind: NotifyCheckpointAborted, CheckpointID: id}
}

// harness runs one task on its own goroutine.
type harness struct {
	t     *testing.T
	ctx   context.Context
	ctl   chan CheckpointControl
	resp  *fakeResponder
	out   *recWriter
	gates []*LocalGate
	done  chan error
	// manualOnly: a control channel without periodic checkpoints.
	manualOnly bool
}

// inputTask is a task with one operator "op" fed by gates of the given
// numbers of channels, writing to one subpartition.
func startInputTask(t *testing.T, op Operator, channels []int, env TaskEnv, checkpointing bool) *harness {
	t.Helper()
	var gates []*LocalGate
	for _, n := range channels {
		gates = append(gates, NewLocalGate(n, 64))
	}
	return startGateTask(t, op, gates, nil, env, checkpointing)
}

// startGateTask is startInputTask on the given gates: the task reads
// wrapped[i] in place of gates[i] where wrapped has one.
func startGateTask(t *testing.T, op Operator, gates []*LocalGate, wrapped []InputGate, env TaskEnv, checkpointing bool) *harness {
	t.Helper()
	spec := &TaskSpec{
		Name: "t", NumInputs: len(gates),
		Operators: []OperatorSpec{{ID: "op", Name: "op", Input: -1, NewOperator: func() Operator { return op }}},
		Outputs:   []OutputSpec{{From: 0, NewPartitioner: func(int) Partitioner { return Forward{} }}},
	}
	h := &harness{t: t, gates: gates}
	for i, g := range gates {
		if i < len(wrapped) && wrapped[i] != nil {
			env.Gates = append(env.Gates, wrapped[i])
		} else {
			env.Gates = append(env.Gates, g)
		}
	}
	return h.start(spec, env, checkpointing)
}

// startManualOnly starts a chain as a streaming job without periodic
// checkpoints: a control channel for savepoints, no final checkpoint.
func startManualOnly(t *testing.T, vals []int) *chainHarness {
	t.Helper()
	log := &callLog{}
	c := &chainHarness{log: log, src: &ckSource{name: "src", log: log, vals: vals, end: true}}
	c.ops = []*ckOp{{name: "op1", log: log}}
	c.spec = &TaskSpec{
		Name: "chain",
		Operators: []OperatorSpec{
			{ID: "src", Name: "src", Input: -1, NewSource: func() Source { return c.src }},
			{ID: "op1", Name: "op1", Input: 0, NewOperator: func() Operator { return c.ops[0] }},
		},
		Outputs: []OutputSpec{{From: 1, NewPartitioner: func(int) Partitioner { return Forward{} }}},
	}
	c.harness = (&harness{t: t, manualOnly: true}).start(c.spec, TaskEnv{}, true)
	return c
}

func (h *harness) start(spec *TaskSpec, env TaskEnv, checkpointing bool) *harness {
	ctx, cancel := context.WithCancel(context.Background())
	h.ctx = ctx
	h.out = newRecWriter(1)
	h.resp = &fakeResponder{}
	h.done = make(chan error, 1)
	env.Writers = []ResultWriter{h.out}
	if env.Parallelism == 0 {
		env.Parallelism, env.MaxParallelism = 1, 128
	}
	if checkpointing {
		h.ctl = make(chan CheckpointControl, 16)
		env.Control, env.Responder = h.ctl, h.resp
		env.Checkpointing = !h.manualOnly
	}
	go func() { h.done <- RunTask(ctx, spec, env) }()
	h.t.Cleanup(func() {
		cancel()
		<-h.done
	})
	return h
}

func (h *harness) send(gate, channel int, evs ...Event) {
	h.t.Helper()
	if err := h.gates[gate].send(h.ctx, ChannelBatch{Channel: channel, Events: evs}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) control(m CheckpointControl) {
	h.t.Helper()
	select {
	case h.ctl <- m:
	case <-time.After(20 * time.Second):
		h.t.Fatal("control channel full")
	}
}

// wait waits for the task to end and returns its error.
func (h *harness) wait() error {
	h.t.Helper()
	select {
	case err := <-h.done:
		h.done <- err // for Cleanup
		return err
	case <-time.After(20 * time.Second):
		h.t.Fatal("task did not end")
		return nil
	}
}

// finalCheckpoint ends a task whose input ended: it triggers checkpoint
// id, waits for its ack, completes it and waits for the task to end well.
func (h *harness) finalCheckpoint(id int64) ackCall {
	h.t.Helper()
	h.control(trigger(id, Checkpoint))
	a := h.resp.waitAck(h.t, id)
	h.control(complete(id))
	if err := h.wait(); err != nil {
		h.t.Fatalf("task failed: %v", err)
	}
	return a
}

func (h *harness) running() bool {
	select {
	case err := <-h.done:
		h.done <- err
		return false
	default:
		return true
	}
}

// split returns the records written before and after barrier id.
func split(evs []Event, id int64) (before, after []int) {
	seen := false
	for _, e := range evs {
		switch {
		case e.Kind == EventBarrier && e.Barrier.ID == id:
			seen = true
		case e.Kind == EventRecord && seen:
			after = append(after, e.Record.Value.(int))
		case e.Kind == EventRecord:
			before = append(before, e.Record.Value.(int))
		}
	}
	return before, after
}

func sorted(vs []int) []int { vs = slices.Clone(vs); slices.Sort(vs); return vs }

// --- alignment ---

func TestExactlyOnceAlignmentHoldsBackChannelAfterBarrier(t *testing.T) {
	clock := time.UnixMilli(1_000_000)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	op := &ckOp{name: "op"}
	op.onRecord = func(v int) {
		if v == 10 { // the slow channel's record: alignment takes 5s
			mu.Lock()
			clock = clock.Add(5 * time.Second)
			mu.Unlock()
		}
	}
	h := startInputTask(t, op, []int{2}, TaskEnv{Now: now}, true)
	// Channel 0 is fast: its barrier and the records after it arrive
	// before channel 1's pre-barrier record.
	h.send(0, 0, rec(1), rec(2), bar(1, true), rec(3), rec(4))
	h.send(0, 0, rec(5))
	h.send(0, 1, rec(10), bar(1, true), rec(11))
	a := h.resp.waitAck(t, 1)
	if got := sorted(seenIn(t, a.snap, "op")); !slices.Equal(got, []int{1, 2, 10}) {
		t.Fatalf("snapshot saw %v, want exactly the pre-barrier records [1 2 10]", got)
	}
	if a.metrics.AlignmentDuration != 5*time.Second {
		t.Fatalf("alignment took %v, want 5s", a.metrics.AlignmentDuration)
	}
	h.send(0, 0, rec(6), eop())
	h.send(0, 1, eop())
	h.finalCheckpoint(2)
	out := h.out.sub(0)
	before, after := split(out, 1)
	if !slices.Equal(sorted(before), []int{1, 2, 10}) || !slices.Equal(sorted(after), []int{3, 4, 5, 6, 11}) {
		t.Fatalf("output around the barrier: %v", describe(out))
	}
	// Held events replay in channel order.
	if i, j := slices.Index(after, 3), slices.Index(after, 5); i > j {
		t.Fatalf("held events out of order: %v", after)
	}
}

func TestAtLeastOnceDoesNotBlock(t *testing.T) {
	op := &ckOp{name: "op"}
	h := startInputTask(t, op, []int{2}, TaskEnv{}, true)
	h.send(0, 0, rec(1), rec(2), bar(1, false), rec(3), rec(4))
	h.send(0, 0, rec(5))
	h.send(0, 1, rec(10), bar(1, false), rec(11))
	a := h.resp.waitAck(t, 1)
	// Records after the fast channel's barrier were processed before the
	// checkpoint: they are in it (at least once).
	if got := sorted(seenIn(t, a.snap, "op")); !slices.Equal(got, []int{1, 2, 3, 4, 5, 10}) {
		t.Fatalf("snapshot saw %v, want [1 2 3 4 5 10]", got)
	}
	h.send(0, 0, eop())
	h.send(0, 1, eop())
	h.finalCheckpoint(2)
	before, after := split(h.out.sub(0), 1)
	if !slices.Equal(before, []int{1, 2, 3, 4, 5, 10}) || !slices.Equal(after, []int{11}) {
		t.Fatalf("output around the barrier: %v", describe(h.out.sub(0)))
	}
}

func TestNewerBarrierAbortsAlignment(t *testing.T) {
	op := &ckOp{name: "op"}
	h := startInputTask(t, op, []int{2}, TaskEnv{}, true)
	h.send(0, 0, rec(1), bar(1, true), rec(2))
	// Channel 1 never delivered barrier 1 (its upstream declined it) and
	// goes on with barrier 2.
	h.send(0, 1, rec(10), bar(2, true), rec(11))
	d := h.resp.waitDecline(t, 1)
	if !errors.Is(d.cause, ErrCheckpointSubsumed) {
		t.Fatalf("decline cause %v", d.cause)
	}
	h.send(0, 0, bar(2, true), rec(3))
	a := h.resp.waitAck(t, 2)
	// Record 2 was released by the abort and precedes barrier 2 on its
	// channel; record 11 follows barrier 2 on channel 1: held.
	if got := sorted(seenIn(t, a.snap, "op")); !slices.Equal(got, []int{1, 2, 10}) {
		t.Fatalf("snapshot 2 saw %v, want [1 2 10]", got)
	}
	if _, ok := h.resp.ack(1); ok {
		t.Fatal("aborted checkpoint 1 was acknowledged")
	}
	h.send(0, 0, eop())
	h.send(0, 1, eop())
	h.finalCheckpoint(3)
	out := describe(h.out.sub(0))
	if c, b := slices.Index(out, "C1"), slices.Index(out, "B2"); c < 0 || b < c || slices.Contains(out, "B1") {
		t.Fatalf("want cancel of 1 then barrier 2 downstream, no barrier 1: %v", out)
	}
}

func TestCancelBarrierAbortsAlignment(t *testing.T) {
	op := &ckOp{name: "op"}
	h := startInputTask(t, op, []int{2}, TaskEnv{}, true)
	h.send(0, 0, rec(1), bar(1, true), rec(2))
	h.send(0, 1, cancelBar(1), rec(10))
	d := h.resp.waitDecline(t, 1)
	if !errors.Is(d.cause, ErrCheckpointCancelled) {
		t.Fatalf("decline cause %v", d.cause)
	}
	// A cancellation of a checkpoint not seen yet is declined and passed on
	// once; its barriers are then ignored.
	h.send(0, 1, cancelBar(2))
	h.resp.waitDecline(t, 2)
	h.send(0, 0, bar(2, true), rec(3))
	h.send(0, 1, bar(2, true))
	h.send(0, 0, bar(3, true), eop())
	h.send(0, 1, bar(3, true), eop())
	a := h.resp.waitAck(t, 3)
	if got := sorted(seenIn(t, a.snap, "op")); !slices.Equal(got, []int{1, 2, 3, 10}) {
		t.Fatalf("snapshot 3 saw %v", got)
	}
	h.finalCheckpoint(4)
	if acks, declines := h.resp.counts(); acks != 2 || declines != 2 {
		t.Fatalf("%d acks and %d declines, want 2 and 2", acks, declines)
	}
	out := describe(h.out.sub(0))
	if slices.Contains(out, "B1") || slices.Contains(out, "B2") || !slices.Contains(out, "C1") || !slices.Contains(out, "C2") || !slices.Contains(out, "B3") {
		t.Fatalf("downstream got %v", out)
	}
}

func TestEndedChannelsCountAsAligned(t *testing.T) {
	op := &ckOp{name: "op"}
	h := startInputTask(t, op, []int{3}, TaskEnv{}, true)
	// Channel 2 is ended before the checkpoint; channel 1 ends its data
	// (still open: it delivers barriers) and ends during the alignment.
	h.send(0, 2, rec(20), eod(true), eop())
	h.send(0, 0, rec(1), bar(1, true), rec(2))
	h.send(0, 1, rec(10), eod(true))
	h.send(0, 1, eop())
	a := h.resp.waitAck(t, 1)
	if got := sorted(seenIn(t, a.snap, "op")); !slices.Equal(got, []int{1, 10, 20}) {
		t.Fatalf("snapshot saw %v", got)
	}
	h.send(0, 0, eop())
	// All channels ended: the coordinator triggers the task itself.
	fin := h.finalCheckpoint(2)
	if got := sorted(seenIn(t, fin.snap, "op")); !slices.Equal(got, []int{1, 2, 10, 20}) || !fin.snap.Operators[0].Finished {
		t.Fatalf("final snapshot %v, finished %v", got, fin.snap.Operators[0].Finished)
	}
}

func TestTriggerBeforeInputsEndedIsDeferred(t *testing.T) {
	op := &ckOp{name: "op"}
	h := startInputTask(t, op, []int{1}, TaskEnv{}, true)
	h.control(trigger(1, Checkpoint))
	h.send(0, 0, rec(1), eod(true), eop())
	a := h.resp.waitAck(t, 1)
	if got := seenIn(t, a.snap, "op"); !slices.Equal(got, []int{1}) || !a.snap.Operators[0].Finished {
		t.Fatalf("deferred trigger snapshot %v", a.snap.Operators[0])
	}
	h.control(complete(1))
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
}

type twoInputOp struct {
	ckOp
}

func (o *twoInputOp) ProcessElement(input int, r Record) error {
	return o.ckOp.ProcessElement(0, Record{Value: r.Value.(int) + 1000*input})
}

func TestTwoInputAlignment(t *testing.T) {
	op := &twoInputOp{ckOp{name: "op"}}
	h := startInputTask(t, op, []int{1, 2}, TaskEnv{}, true)
	h.send(0, 0, rec(1), bar(1, true), rec(2))
	h.send(1, 0, rec(1), bar(1, true), rec(2))
	h.send(0, 0, rec(3))
	h.send(1, 1, rec(5), bar(1, true), rec(6))
	a := h.resp.waitAck(t, 1)
	if got := sorted(seenIn(t, a.snap, "op")); !slices.Equal(got, []int{1, 1001, 1005}) {
		t.Fatalf("snapshot saw %v, want [1 1001 1005]", got)
	}
	h.send(0, 0, eop())
	h.send(1, 0, eop())
	h.send(1, 1, eop())
	h.finalCheckpoint(2)
	if got := sorted(op.seen); !slices.Equal(got, []int{1, 2, 3, 1001, 1002, 1005, 1006}) {
		t.Fatalf("operator saw %v", got)
	}
}

func TestSnapshotFailureDeclinesAndContinues(t *testing.T) {
	op := &ckOp{name: "op", failSnap: map[int64]bool{1: true}}
	h := startInputTask(t, op, []int{1}, TaskEnv{}, true)
	h.send(0, 0, rec(1), bar(1, true), rec(2), bar(2, true))
	d := h.resp.waitDecline(t, 1)
	var oe *OperatorError
	if !errors.Is(d.cause, ErrSnapshotFailed) || !errors.As(d.cause, &oe) || oe.OperatorID != "op" {
		t.Fatalf("decline cause %v", d.cause)
	}
	a := h.resp.waitAck(t, 2)
	if got := seenIn(t, a.snap, "op"); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("snapshot 2 saw %v", got)
	}
	h.send(0, 0, eop())
	h.finalCheckpoint(3)
	if out := describe(h.out.sub(0)); !slices.Contains(out, "C1") || slices.Contains(out, "B1") {
		t.Fatalf("downstream got %v", out)
	}
}

func TestNotifyAbortedBeforeBarrierSkipsIt(t *testing.T) {
	op := &ckOp{name: "op", log: &callLog{}}
	h := startInputTask(t, op, []int{1}, TaskEnv{}, true)
	h.control(aborted(1))
	eventually(t, "aborted notification", func() bool { return slices.Contains(op.log.get(), "op:aborted 1") })
	h.send(0, 0, rec(1), bar(1, true), bar(2, true))
	h.resp.waitAck(t, 2)
	if _, ok := h.resp.ack(1); ok {
		t.Fatal("aborted checkpoint acknowledged")
	}
	h.send(0, 0, eop())
	h.finalCheckpoint(3)
}

// --- sources, notifications, FLIP-147, savepoints ---

type chainHarness struct {
	*harness
	src  *ckSource
	ops  []*ckOp
	log  *callLog
	spec *TaskSpec
}

// startSourceChain runs source "src" -> "op1" -> "op2" -> one writer.
func startSourceChain(t *testing.T, vals []int, end bool, env TaskEnv, checkpointing bool) *chainHarness {
	t.Helper()
	log := &callLog{}
	c := &chainHarness{log: log, src: &ckSource{name: "src", log: log, vals: vals, end: end}}
	c.ops = []*ckOp{{name: "op1", log: log}, {name: "op2", log: log}}
	c.spec = &TaskSpec{
		Name: "chain",
		Operators: []OperatorSpec{
			{ID: "src", Name: "src", Input: -1, NewSource: func() Source { return c.src }},
			{ID: "op1", Name: "op1", Input: 0, NewOperator: func() Operator { return c.ops[0] }},
			{ID: "op2", Name: "op2", Input: 1, NewOperator: func() Operator { return c.ops[1] }},
		},
		Outputs: []OutputSpec{{From: 2, NewPartitioner: func(int) Partitioner { return Forward{} }}},
	}
	c.harness = (&harness{t: t}).start(c.spec, env, checkpointing)
	return c
}

func TestSourceTriggerSnapshotsChainAndNotifiesInChainOrder(t *testing.T) {
	c := startSourceChain(t, []int{1, 2, 3}, false, TaskEnv{}, true)
	eventually(t, "records", func() bool { return len(c.out.sub(0)) == 3 })
	c.control(trigger(7, Checkpoint))
	a := c.resp.waitAck(t, 7)
	var ids []string
	for _, s := range a.snap.Operators {
		ids = append(ids, s.OperatorID)
		if s.Finished {
			t.Fatalf("running operator %s snapshotted as finished", s.OperatorID)
		}
	}
	if !slices.Equal(ids, []string{"src", "op1", "op2"}) {
		t.Fatalf("snapshot operators %v", ids)
	}
	if got := seenIn(t, a.snap, "op2"); !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("op2 saw %v", got)
	}
	if string(a.snap.Operators[0].Lists["offset"].Elements[0]) != "3" {
		t.Fatalf("source offset %q", a.snap.Operators[0].Lists["offset"].Elements)
	}
	if !c.out.has(0, isBarrier(7)) {
		t.Fatalf("no barrier downstream: %v", describe(c.out.sub(0)))
	}
	c.control(complete(7))
	c.control(aborted(8))
	want := []string{"src:complete 7", "op1:complete 7", "op2:complete 7", "src:aborted 8", "op1:aborted 8", "op2:aborted 8"}
	eventually(t, "notifications", func() bool { return len(c.log.get()) == len(want) })
	if got := c.log.get(); !slices.Equal(got, want) {
		t.Fatalf("notifications %v, want %v", got, want)
	}
	// Barriers of done checkpoints are ignored.
	c.control(trigger(7, Checkpoint))
	c.control(trigger(9, Checkpoint))
	c.resp.waitAck(t, 9)
	if acks, _ := c.resp.counts(); acks != 2 {
		t.Fatalf("%d acks", acks)
	}
}

func TestFinalCheckpointBeforeEndOfPartition(t *testing.T) {
	c := startSourceChain(t, []int{1, 2}, true, TaskEnv{}, true)
	eventually(t, "end of data", func() bool { return c.out.has(0, isKind(EventEndOfData)) })
	// The coordinator is told, so it can trigger the final checkpoint at once.
	eventually(t, "end-of-data notice", func() bool { return c.resp.endOfDataNotices() == 1 })
	// A checkpoint the task took no part in after finishing does not end it.
	c.control(complete(5))
	c.control(trigger(6, Checkpoint))
	a := c.resp.waitAck(t, 6)
	if !c.running() || c.out.has(0, isKind(EventEndOfPartition)) {
		t.Fatal("task ended before its final checkpoint completed")
	}
	if len(a.snap.Operators) != 3 {
		t.Fatalf("final snapshot has %d operators, want all 3", len(a.snap.Operators))
	}
	for _, s := range a.snap.Operators {
		if !s.Finished {
			t.Fatalf("operator %s not marked finished", s.OperatorID)
		}
	}
	c.control(complete(6))
	if err := c.wait(); err != nil {
		t.Fatal(err)
	}
	if got, want := describe(c.out.sub(0)), []string{"1", "2", "wm:max", "EOD:true", "B6", "EOP"}; !slices.Equal(got, want) {
		t.Fatalf("output %v, want %v", got, want)
	}
	if !c.ops[0].finished || !c.ops[1].finished || !c.ops[0].checkpointing {
		t.Fatal("operators not finished or not told of checkpointing")
	}
}

func TestNoCheckpointingEndsAsBefore(t *testing.T) {
	c := startSourceChain(t, []int{1, 2}, true, TaskEnv{}, false)
	if err := c.wait(); err != nil {
		t.Fatal(err)
	}
	if got, want := describe(c.out.sub(0)), []string{"1", "2", "wm:max", "EOP"}; !slices.Equal(got, want) {
		t.Fatalf("output %v, want %v", got, want)
	}
	if c.ops[0].checkpointing || !c.ops[1].finished {
		t.Fatal("lifecycle changed without checkpointing")
	}
	if n := c.resp.endOfDataNotices(); n != 0 {
		t.Fatalf("%d end-of-data notices without a final checkpoint to wait for", n)
	}
}

func TestStopWithSavepoint(t *testing.T) {
	for _, tc := range []struct {
		typ      CheckpointType
		out      []string
		finished bool
	}{
		{SavepointTerminate, []string{"1", "wm:max", "EOD:true", "B3", "EOP"}, true},
		{SavepointSuspend, []string{"1", "EOD:false", "B3", "EOP"}, false},
	} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			c := startSourceChain(t, []int{1}, false, TaskEnv{}, true)
			eventually(t, "record", func() bool { return len(c.out.sub(0)) == 1 })
			c.control(trigger(3, tc.typ))
			a := c.resp.waitAck(t, 3)
			for _, s := range a.snap.Operators {
				if s.Finished != tc.finished {
					t.Fatalf("operator %s finished=%v in the savepoint", s.OperatorID, s.Finished)
				}
			}
			if !c.running() {
				t.Fatal("task ended before the savepoint completed")
			}
			c.control(complete(3))
			if err := c.wait(); err != nil {
				t.Fatal(err)
			}
			if got := describe(c.out.sub(0)); !slices.Equal(got, tc.out) {
				t.Fatalf("output %v, want %v", got, tc.out)
			}
			if c.ops[0].finished != tc.finished || c.ops[1].finished != tc.finished {
				t.Fatalf("operators finished: %v %v", c.ops[0].finished, c.ops[1].finished)
			}
			if hasMax := slices.Contains(c.ops[1].wms, MaxWatermark); hasMax != tc.finished {
				t.Fatalf("operator saw MaxWatermark: %v", hasMax)
			}
		})
	}
}

func TestDownstreamOfStopWithSavepoint(t *testing.T) {
	for _, drain := range []bool{true, false} {
		t.Run(fmt.Sprintf("drain=%v", drain), func(t *testing.T) {
			op := &ckOp{name: "op"}
			h := startInputTask(t, op, []int{2}, TaskEnv{}, true)
			sp := Event{Kind: EventBarrier, Barrier: CheckpointBarrier{ID: 4, Options: CheckpointOptions{Type: SavepointSuspend, ExactlyOnce: true}}}
			h.send(0, 0, rec(1), eod(drain), sp)
			h.send(0, 1, eod(drain), sp)
			a := h.resp.waitAck(t, 4)
			if a.snap.Operators[0].Finished != drain {
				t.Fatalf("finished=%v", a.snap.Operators[0].Finished)
			}
			h.send(0, 0, eop())
			h.send(0, 1, eop())
			h.control(complete(4))
			if err := h.wait(); err != nil {
				t.Fatal(err)
			}
			want := []string{"1", "EOD:false", "B4", "EOP"}
			if drain {
				want = []string{"1", "wm:max", "EOD:true", "B4", "EOP"}
			}
			if got := describe(h.out.sub(0)); !slices.Equal(got, want) || op.finished != drain {
				t.Fatalf("output %v (want %v), finished %v", got, want, op.finished)
			}
		})
	}
}

func TestRestorePlumbing(t *testing.T) {
	r := &TaskRestore{CheckpointID: 3, Operators: map[string]*OperatorRestore{
		"op1": {Lists: map[string][][]byte{"seen": {[]byte("1")}}},
	}}
	c := startSourceChain(t, []int{1}, true, TaskEnv{Restore: r}, true)
	eventually(t, "end of data", func() bool { return c.out.has(0, isKind(EventEndOfData)) })
	c.finalCheckpoint(4)
	if c.ops[0].restore != r.Operators["op1"] || c.ops[1].restore != nil || !c.ops[0].checkpointing {
		t.Fatal("Context.Restore or Checkpointing not set before Open")
	}
	if c.ops[0].seen == nil {
		t.Fatal("a source with some unfinished operators must run")
	}
}

func TestRestoredFinishedSourceEndsAtOnce(t *testing.T) {
	fin := &OperatorRestore{Finished: true}
	r := &TaskRestore{CheckpointID: 3, Operators: map[string]*OperatorRestore{"src": fin, "op1": fin, "op2": fin}}
	for _, checkpointing := range []bool{true, false} {
		t.Run(fmt.Sprintf("checkpointing=%v", checkpointing), func(t *testing.T) {
			c := startSourceChain(t, []int{1, 2}, false, TaskEnv{Restore: r}, checkpointing)
			want := []string{"wm:max", "EOP"}
			if checkpointing {
				want = []string{"wm:max", "EOD:true", "B4", "EOP"}
				eventually(t, "end of data", func() bool { return c.out.has(0, isKind(EventEndOfData)) })
				a := c.finalCheckpoint(4)
				if len(a.snap.Operators) != 3 || !a.snap.Operators[2].Finished {
					t.Fatalf("snapshot %+v", a.snap.Operators)
				}
			} else if err := c.wait(); err != nil {
				t.Fatal(err)
			}
			if got := describe(c.out.sub(0)); !slices.Equal(got, want) {
				t.Fatalf("output %v, want %v", got, want)
			}
			if c.src.i != 0 || c.ops[0].finished || len(c.ops[0].wms) != 0 {
				t.Fatal("a finished chain ran again")
			}
		})
	}
}

// Without periodic checkpoints (savepoints only) a streaming task ends at
// the end of its input as without checkpointing: no end of data, no
// final checkpoint to wait for, operators finished.
func TestManualSavepointsOnlyEndWithoutFinalCheckpoint(t *testing.T) {
	c := startManualOnly(t, []int{1, 2})
	if err := c.wait(); err != nil {
		t.Fatal(err)
	}
	got := describe(c.out.sub(0))
	if len(got) == 0 || got[len(got)-1] != "EOP" || slices.Contains(got, "EOD:true") || slices.Contains(got, "EOD:false") {
		t.Fatalf("output %v, want the records, the final watermark and end of partition only", got)
	}
	if !c.ops[0].finished {
		t.Fatal("the operator was not finished")
	}
	if acks, declines := c.resp.counts(); acks+declines != 0 {
		t.Fatalf("%d acks, %d declines without any trigger", acks, declines)
	}
}
