package runtime

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// prioGate is a LocalGate with a priority channel.
type prioGate struct {
	*LocalGate
	prio chan ChannelBatch
}

func (g *prioGate) Priority() <-chan ChannelBatch { return g.prio }

// prioWriter models a network writer: emitted events wait as unsent until
// Flush; a priority event goes ahead of them and returns them.
type prioWriter struct {
	mu     sync.Mutex
	sent   []Event
	unsent []Event
}

func (w *prioWriter) NumSubpartitions() int { return 1 }
func (w *prioWriter) Emit(_ int, ev Event) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.unsent = append(w.unsent, ev)
	return nil
}
func (w *prioWriter) EmitPriority(_ int, ev Event) ([]Event, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent = append(w.sent, ev)
	return slices.Clone(w.unsent), nil
}
func (w *prioWriter) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent, w.unsent = append(w.sent, w.unsent...), nil
	return nil
}
func (w *prioWriter) Finish() error { return w.Flush() }
func (w *prioWriter) all() []Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append(slices.Clone(w.sent), w.unsent...)
}

type unalignedHarness struct {
	*harness
	pg  []*prioGate
	out *prioWriter
}

func startUnaligned(t *testing.T, op Operator, channels int, env TaskEnv) *unalignedHarness {
	t.Helper()
	spec := &TaskSpec{
		Name: "t", NumInputs: 1, InputCodecs: []Codec{intCodec{}},
		Operators: []OperatorSpec{{ID: "op", Name: "op", Input: -1, NewOperator: func() Operator { return op }}},
		Outputs:   []OutputSpec{{From: 0, NewPartitioner: func(int) Partitioner { return Forward{} }, Codec: intCodec{}}},
	}
	u := &unalignedHarness{harness: &harness{t: t}, out: &prioWriter{}}
	g := &prioGate{LocalGate: NewLocalGate(channels, 64), prio: make(chan ChannelBatch, 4)}
	u.pg = append(u.pg, g)
	u.gates = append(u.gates, g.LocalGate)
	env.Gates = []InputGate{g}
	h := u.harness
	h.ctx, h.resp, h.done = t.Context(), &fakeResponder{}, make(chan error, 1)
	env.Writers = []ResultWriter{u.out}
	env.Parallelism, env.MaxParallelism = 1, 128
	h.ctl = make(chan CheckpointControl, 16)
	env.Control, env.Responder, env.Checkpointing = h.ctl, h.resp, true
	go func() { h.done <- RunTask(h.ctx, spec, env) }()
	t.Cleanup(func() { <-h.done })
	return u
}

func ubar(id int64) CheckpointBarrier {
	return CheckpointBarrier{ID: id, Options: CheckpointOptions{ExactlyOnce: true, Unaligned: true}}
}

func inFlightOf(t *testing.T, snap *TaskSnapshot, output bool, gate, channel int) []int {
	t.Helper()
	for _, d := range snap.InFlight {
		if d.Output == output && d.Gate == gate && d.Channel == channel {
			recs, err := decodeInFlight(intCodec{}, d.Data)
			if err != nil {
				t.Fatal(err)
			}
			var vs []int
			for _, r := range recs {
				vs = append(vs, r.Value.(int))
			}
			return vs
		}
	}
	return nil
}

// TestUnalignedBarrierOvertakesHeldRecords: while the task is stuck in
// record 1, more records of both channels queue up and a priority barrier
// arrives for channel 0. The task snapshots right after record 1 (the rest
// of its batch and the queued batches are overtaken), forwards the barrier
// ahead of its unsent output, captures channel 0 up to the barrier's
// position and channel 1 up to its in-band barrier, and acknowledges only
// then, with exactly those records as in-flight data. Every record is
// still processed once.
func TestUnalignedBarrierOvertakesHeldRecords(t *testing.T) {
	release := make(chan struct{})
	var saw sync.Map
	op := &ckOp{name: "op"}
	op.onRecord = func(v int) {
		saw.Store(v, true)
		if v == 1 {
			<-release
		}
	}
	u := startUnaligned(t, op, 2, TaskEnv{})
	u.send(0, 0, rec(1), rec(2), rec(3))
	eventually(t, "record 1 in process", func() bool { _, ok := saw.Load(1); return ok })
	u.send(0, 0, rec(4), rec(5), Event{Kind: EventBarrierPosition, Barrier: ubar(1)})
	u.send(0, 0, rec(6))
	u.send(0, 1, rec(10), rec(11))
	u.pg[0].prio <- ChannelBatch{Channel: 0, Events: []Event{{Kind: EventBarrier, Barrier: ubar(1), Priority: true}}}
	close(release)
	eventually(t, "record 11 processed", func() bool { _, ok := saw.Load(11); return ok })
	if acks, declines := u.resp.counts(); acks != 0 || declines != 0 {
		t.Fatalf("%d acks, %d declines before channel 1's barrier", acks, declines)
	}
	u.send(0, 1, rec(12), Event{Kind: EventBarrier, Barrier: ubar(1)}, rec(13))
	a := u.resp.waitAck(t, 1)
	if got := seenIn(t, a.snap, "op"); !slices.Equal(got, []int{1}) {
		t.Fatalf("snapshot saw %v, want [1]: taken right after the record in process", got)
	}
	if got := inFlightOf(t, a.snap, false, 0, 0); !slices.Equal(got, []int{2, 3, 4, 5}) {
		t.Fatalf("channel 0 state %v, want [2 3 4 5]", got)
	}
	if got := inFlightOf(t, a.snap, false, 0, 1); !slices.Equal(got, []int{10, 11, 12}) {
		t.Fatalf("channel 1 state %v, want [10 11 12]", got)
	}
	if got := inFlightOf(t, a.snap, true, 0, 0); !slices.Equal(got, []int{1}) {
		t.Fatalf("output in-flight %v, want [1] (overtaken by the barrier)", got)
	}
	if !a.metrics.Unaligned || a.metrics.PersistedInFlightBytes <= 0 {
		t.Fatalf("metrics %+v, want unaligned with in-flight bytes", a.metrics)
	}
	eventually(t, "every record processed", func() bool { _, ok := saw.Load(13); return ok })
	u.send(0, 0, eop())
	u.send(0, 1, eop())
	u.finalCheckpoint(2)
	if got := sorted(op.seen); !slices.Equal(got, []int{1, 2, 3, 4, 5, 6, 10, 11, 12, 13}) {
		t.Fatalf("processed %v", got)
	}
	// The barrier went ahead of the unsent output record 1.
	if d := describe(u.out.all()); d[0] != "B1" || d[1] != "1" {
		t.Fatalf("output %v, want B1 before 1", d)
	}
}

// TestUnalignedRestoreReplaysInFlight: a restored task emits the output
// in-flight data first and processes the input channel state before
// reading its gates.
func TestUnalignedRestoreReplaysInFlight(t *testing.T) {
	enc := func(vs ...int) []byte {
		var b []byte
		for _, v := range vs {
			var err error
			if b, err = appendInFlightRecord(b, intCodec{}, Record{Value: v, Timestamp: int64(v), HasTimestamp: true}); err != nil {
				t.Fatal(err)
			}
		}
		return b
	}
	op := &ckOp{name: "op"}
	restore := &TaskRestore{CheckpointID: 1, Operators: map[string]*OperatorRestore{}, InFlight: []InFlightData{
		{Output: true, Gate: 0, Channel: 0, Data: enc(100)},
		{Gate: 0, Channel: 1, Data: enc(10, 11)},
		{Gate: 0, Channel: 0, Data: enc(2, 3)},
	}}
	u := startUnaligned(t, op, 2, TaskEnv{Restore: restore})
	u.send(0, 0, rec(7), eop())
	u.send(0, 1, eop())
	u.finalCheckpoint(2)
	if !slices.Equal(op.seen[:4], []int{10, 11, 2, 3}) || op.seen[4] != 7 {
		t.Fatalf("processed %v, want the channel state [10 11 2 3] before 7", op.seen)
	}
	if d := describe(u.out.all()); d[0] != "100" || d[1] != "10" {
		t.Fatalf("output %v, want the restored 100 first", d)
	}
	// A restore whose channels do not exist any more fails clearly.
	op2 := &ckOp{name: "op"}
	bad := &TaskRestore{CheckpointID: 1, InFlight: []InFlightData{{Gate: 0, Channel: 5, Data: enc(1)}}}
	u2 := startUnaligned(t, op2, 2, TaskEnv{Restore: bad})
	if err := u2.wait(); err == nil || !errors.Is(err, ErrInFlightRescale) {
		t.Fatalf("restore at another parallelism: %v, want ErrInFlightRescale", err)
	}
}

// TestAlignedTimeoutSwitchesToUnaligned: an aligned checkpoint with a 5 s
// aligned timeout holds channel 0 back after its barrier; once the
// alignment lasted 5 s (injected clock) the task snapshots, releases
// channel 0 (its held records are after the barrier: not captured) and
// captures channel 1 up to its barrier.
func TestAlignedTimeoutSwitchesToUnaligned(t *testing.T) {
	clock := time.UnixMilli(1_000_000)
	var mu sync.Mutex
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	op := &ckOp{name: "op"}
	var saw sync.Map
	op.onRecord = func(v int) { saw.Store(v, true) }
	u := startUnaligned(t, op, 2, TaskEnv{Now: now})
	b := CheckpointBarrier{ID: 1, Options: CheckpointOptions{ExactlyOnce: true, AlignedTimeout: 5 * time.Second}}
	// One gate: channel 0's batch (barrier included) is handled before
	// channel 1's record 10, so once 10 is processed the alignment began.
	u.send(0, 0, rec(1), Event{Kind: EventBarrier, Barrier: b}, rec(2))
	u.send(0, 1, rec(10))
	eventually(t, "record 10 processed", func() bool { _, ok := saw.Load(10); return ok })
	mu.Lock()
	clock = clock.Add(6 * time.Second)
	mu.Unlock()
	u.send(0, 1, rec(11)) // wakes the task; processed before the switch
	eventually(t, "record 2 released", func() bool { _, ok := saw.Load(2); return ok })
	u.send(0, 1, rec(12), Event{Kind: EventBarrier, Barrier: b}, rec(13))
	a := u.resp.waitAck(t, 1)
	if !a.metrics.Unaligned || a.metrics.AlignmentDuration < 5*time.Second {
		t.Fatalf("metrics %+v, want unaligned after >= 5s of alignment", a.metrics)
	}
	if got := seenIn(t, a.snap, "op"); !slices.Equal(sorted(got), []int{1, 10, 11}) {
		t.Fatalf("snapshot saw %v, want [1 10 11]", got)
	}
	if got := inFlightOf(t, a.snap, false, 0, 1); !slices.Equal(got, []int{12}) {
		t.Fatalf("channel 1 state %v, want [12]", got)
	}
	if got := inFlightOf(t, a.snap, false, 0, 0); got != nil {
		t.Fatalf("channel 0 state %v, want none (its held records follow its barrier)", got)
	}
	if !a.barrier.Options.Unaligned {
		t.Fatal("the forwarded barrier is not unaligned")
	}
	u.send(0, 0, eop())
	u.send(0, 1, eop())
	u.finalCheckpoint(2)
}
