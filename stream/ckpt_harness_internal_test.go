package stream

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/gofl/gofl/stream/runtime"
)

// This file is a small driver for operator checkpoint tests: it runs one
// operator with runtime.RunTask (so its Context, clock and timers are the
// real ones) behind a wrapper that takes snapshots and delivers
// notifications when marker records reach it, in stream order.

type snapMarker struct{ id int64 }
type notifyMarker struct{ id int64 }
type syncMarker struct{ id int }

type snapResult struct {
	snap *runtime.OperatorSnapshot
	err  error
}

type harnessOp struct {
	inner   runtime.Operator
	restore *runtime.OperatorRestore
	h       *harness
	ctx     *runtime.Context
}

func (w *harnessOp) Open(ctx *runtime.Context) error {
	w.ctx = ctx
	ctx.Restore = w.restore
	ctx.Checkpointing = true
	return w.inner.Open(ctx)
}

func (w *harnessOp) ProcessElement(input int, r runtime.Record) error {
	switch m := r.Value.(type) {
	case snapMarker:
		snap := &runtime.OperatorSnapshot{OperatorID: w.ctx.OperatorID}
		err := w.inner.(runtime.CheckpointedOperator).SnapshotState(m.id, snap)
		if err == nil && !w.h.asyncSnaps {
			err = snap.Materialize()
		}
		w.h.snaps <- snapResult{snap, err}
		return nil
	case notifyMarker:
		err := w.inner.(runtime.CheckpointListener).NotifyCheckpointComplete(m.id)
		w.h.snaps <- snapResult{err: err}
		return nil
	case syncMarker:
		w.h.acks <- m.id
		return nil
	}
	return w.inner.ProcessElement(input, r)
}

func (w *harnessOp) ProcessWatermark(wm int64) error { return w.inner.ProcessWatermark(wm) }
func (w *harnessOp) Finish() error                   { return w.inner.Finish() }
func (w *harnessOp) Close() error                    { return w.inner.Close() }

type fakeGate struct{ c chan runtime.ChannelBatch }

func (g *fakeGate) NumChannels() int                     { return 1 }
func (g *fakeGate) Batches() <-chan runtime.ChannelBatch { return g.c }

// captureWriter records what the operator emits.
type captureWriter struct {
	mu   sync.Mutex
	recs []runtime.Record
}

func (w *captureWriter) NumSubpartitions() int { return 1 }
func (w *captureWriter) Emit(_ int, ev runtime.Event) error {
	if ev.Kind == runtime.EventRecord {
		w.mu.Lock()
		w.recs = append(w.recs, ev.Record)
		w.mu.Unlock()
	}
	return nil
}
func (w *captureWriter) Flush() error  { return nil }
func (w *captureWriter) Finish() error { return nil }

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(ms int64) {
	c.mu.Lock()
	c.now = time.UnixMilli(ms)
	c.mu.Unlock()
}

type harness struct {
	t      *testing.T
	gates  []*fakeGate
	out    *captureWriter
	snaps  chan snapResult
	acks   chan int
	done   chan error
	cancel context.CancelFunc
	clock  *fakeClock
	seq    int
	// lastInput is the input of the last scripted record.
	lastInput int
	// asyncSnaps leaves the asynchronous part of snapshots (KeyedStream)
	// to the test; otherwise it runs on the task goroutine.
	asyncSnaps bool
}

// startHarness runs op as subtask sub of par with maxPar key groups.
func startHarness(t *testing.T, newOp func() runtime.Operator, inputs, sub, par, maxPar int, restore *runtime.OperatorRestore, clockMs int64) *harness {
	t.Helper()
	return startHarnessWith(t, newOp, inputs, sub, par, maxPar, restore, clockMs, false)
}

// startHarnessWith is startHarness; asyncSnaps: see harness.asyncSnaps.
func startHarnessWith(t *testing.T, newOp func() runtime.Operator, inputs, sub, par, maxPar int, restore *runtime.OperatorRestore, clockMs int64, asyncSnaps bool) *harness {
	t.Helper()
	h := &harness{t: t, out: &captureWriter{}, snaps: make(chan snapResult), acks: make(chan int), done: make(chan error, 1), clock: &fakeClock{}, asyncSnaps: asyncSnaps}
	h.clock.Set(clockMs)
	env := runtime.TaskEnv{SubtaskIndex: sub, Parallelism: par, MaxParallelism: maxPar, Writers: []runtime.ResultWriter{h.out}, Now: h.clock.Now}
	for i := 0; i < inputs; i++ {
		g := &fakeGate{c: make(chan runtime.ChannelBatch, 16)}
		h.gates = append(h.gates, g)
		env.Gates = append(env.Gates, g)
	}
	spec := &runtime.TaskSpec{
		Name:      "harness",
		NumInputs: inputs,
		Operators: []runtime.OperatorSpec{{ID: "op", Name: "op-under-test", Input: -1, NewOperator: func() runtime.Operator {
			return &harnessOp{inner: newOp(), restore: restore, h: h}
		}}},
		Outputs: []runtime.OutputSpec{{From: 0, NewPartitioner: func(int) runtime.Partitioner { return runtime.Forward{} }}},
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- runtime.RunTask(ctx, spec, env) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-h.done:
		case <-time.After(30 * time.Second):
			t.Error("task did not stop")
		}
	})
	return h
}

func (h *harness) sendEvents(input int, evs ...runtime.Event) {
	select {
	case h.gates[input].c <- runtime.ChannelBatch{Channel: 0, Events: evs}:
	case err := <-h.done:
		h.done <- err
		h.t.Fatalf("task ended early: %v", err)
	}
}

// send sends values without timestamps on input.
func (h *harness) send(input int, vs ...any) {
	evs := make([]runtime.Event, len(vs))
	for i, v := range vs {
		evs[i] = runtime.Event{Kind: runtime.EventRecord, Record: runtime.Record{Value: v}}
	}
	h.sendEvents(input, evs...)
}

// sendTs sends one value with an event timestamp.
func (h *harness) sendTs(input int, ts int64, v any) {
	h.sendEvents(input, runtime.Event{Kind: runtime.EventRecord, Record: runtime.Record{Value: v, Timestamp: ts, HasTimestamp: true}})
}

// watermark advances every input's watermark.
func (h *harness) watermark(wm int64) {
	for i := range h.gates {
		h.sendEvents(i, runtime.Event{Kind: runtime.EventWatermark, Watermark: wm})
	}
}

// sync waits until everything sent so far was processed and due
// processing-time timers fired.
func (h *harness) sync() {
	h.t.Helper()
	for round := 0; round < 2; round++ {
		for i := range h.gates {
			h.seq++
			h.send(i, syncMarker{h.seq})
			select {
			case id := <-h.acks:
				if id != h.seq {
					h.t.Fatalf("sync %d acknowledged as %d", h.seq, id)
				}
			case err := <-h.done:
				h.done <- err
				h.t.Fatalf("task ended early: %v", err)
			case <-time.After(30 * time.Second):
				h.t.Fatal("sync timed out")
			}
		}
	}
}

func (h *harness) control(v any) snapResult {
	h.t.Helper()
	h.sync()
	h.send(0, v)
	select {
	case r := <-h.snaps:
		return r
	case err := <-h.done:
		h.done <- err
		h.t.Fatalf("task ended early: %v", err)
	case <-time.After(30 * time.Second):
		h.t.Fatal("snapshot timed out")
	}
	return snapResult{}
}

// snapshot takes checkpoint id after everything sent so far.
func (h *harness) snapshot(id int64) *runtime.OperatorSnapshot {
	h.t.Helper()
	r := h.control(snapMarker{id})
	if r.err != nil {
		h.t.Fatalf("snapshot %d: %v", id, r.err)
	}
	return r.snap
}

// notify delivers NotifyCheckpointComplete(id).
func (h *harness) notify(id int64) {
	h.t.Helper()
	if r := h.control(notifyMarker{id}); r.err != nil {
		h.t.Fatalf("notify %d: %v", id, r.err)
	}
}

// outputs returns what was emitted so far (after a sync).
func (h *harness) outputs() []runtime.Record {
	h.sync()
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	return append([]runtime.Record(nil), h.out.recs...)
}

// finish ends the input and waits for the task.
func (h *harness) finish() []runtime.Record {
	h.t.Helper()
	for i := range h.gates {
		h.sendEvents(i, runtime.Event{Kind: runtime.EventEndOfPartition})
	}
	select {
	case err := <-h.done:
		h.done <- err
		if err != nil {
			h.t.Fatalf("task failed: %v", err)
		}
	case <-time.After(30 * time.Second):
		h.t.Fatal("task did not finish")
	}
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	return append([]runtime.Record(nil), h.out.recs...)
}

// fail stops the task as a failure would (cancellation).
func (h *harness) fail() {
	h.cancel()
	select {
	case err := <-h.done:
		h.done <- err
	case <-time.After(30 * time.Second):
		h.t.Fatal("task did not stop")
	}
}

// finishErr ends the input and returns the task's error.
func (h *harness) waitErr() error {
	select {
	case err := <-h.done:
		h.done <- err
		return err
	case <-time.After(30 * time.Second):
		h.t.Fatal("task did not end")
	}
	return nil
}

// redistribute turns the snapshots of every old subtask into the restores
// of newPar subtasks, as the checkpoint restore does: key groups by range,
// list state split, union or broadcast.
func redistribute(snaps []*runtime.OperatorSnapshot, newPar, maxPar int) []*runtime.OperatorRestore {
	out := make([]*runtime.OperatorRestore, newPar)
	for i := range out {
		r := &runtime.OperatorRestore{Keyed: map[int]map[string][]byte{}, Lists: map[string][][]byte{}, StateTypes: map[string]string{}}
		start, end := runtime.KeyGroupRange(i, newPar, maxPar)
		lists := map[string][][]byte{}
		modes := map[string]runtime.ListStateMode{}
		for si, s := range snaps {
			for g, secs := range s.Keyed {
				if g >= start && g <= end {
					r.Keyed[g] = secs
				}
			}
			for name, l := range s.Lists {
				modes[name] = l.Mode
				if l.Mode == runtime.BroadcastList && si > 0 {
					continue
				}
				lists[name] = append(lists[name], l.Elements...)
			}
			for k, v := range s.StateTypes {
				r.StateTypes[k] = v
			}
		}
		for name, all := range lists {
			if modes[name] == runtime.SplitList {
				n := len(all)
				all = all[i*n/newPar : (i+1)*n/newPar]
			}
			r.Lists[name] = all
		}
		out[i] = r
	}
	return out
}

// values formats record values and timestamps, sorted, for comparison.
func values(recs []runtime.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		if r.HasTimestamp {
			out[i] = fmt.Sprintf("%v@%d", r.Value, r.Timestamp)
		} else {
			out[i] = fmt.Sprint(r.Value)
		}
	}
	sort.Strings(out)
	return out
}

// step is one input of a scripted run: a record (routed by key), a
// watermark or a clock change (to every subtask).
type step struct {
	input int
	key   any
	v     any
	ts    int64
	hasTs bool
	wm    *int64
	clock *int64
	// all sends the record to every subtask (a broadcast input).
	all bool
}

func rec(key, v any) step             { return step{key: key, v: v} }
func recTs(key, v any, ts int64) step { return step{key: key, v: v, ts: ts, hasTs: true} }
func rec2(input int, key, v any) step { return step{input: input, key: key, v: v} }
func wmStep(wm int64) step            { return step{wm: &wm} }
func clockStep(ms int64) step         { return step{clock: &ms} }
func rec2Ts(input int, key, v any, ts int64) step {
	return step{input: input, key: key, v: v, ts: ts, hasTs: true}
}

// runSteps runs steps on par subtasks (restored from restores when not
// nil). With snapshotID > 0 it snapshots every subtask at the end and
// fails them; otherwise it ends their input.
func runSteps(t *testing.T, newOp func() runtime.Operator, inputs, par, maxPar int, restores []*runtime.OperatorRestore, steps []step, clockMs int64, snapshotID int64) ([]runtime.Record, []*runtime.OperatorSnapshot) {
	t.Helper()
	hs := make([]*harness, par)
	for i := range hs {
		var r *runtime.OperatorRestore
		if restores != nil {
			r = restores[i]
		}
		hs[i] = startHarness(t, newOp, inputs, i, par, maxPar, r, clockMs)
	}
	for _, s := range steps {
		switch {
		case s.wm != nil:
			for _, h := range hs {
				h.watermark(*s.wm)
			}
		case s.clock != nil:
			for _, h := range hs {
				h.sync() // the clock moves between records, not during
				h.clock.Set(*s.clock)
				h.sync()
			}
		default:
			targets := hs
			if !s.all {
				targets = hs[runtime.OperatorIndex(runtime.KeyGroup(s.key, maxPar), maxPar, par):][:1]
			}
			for _, h := range targets {
				if s.input != h.lastInput {
					h.sync() // the inputs' interleaving is the script's
					h.lastInput = s.input
				}
				h.sendEvents(s.input, runtime.Event{Kind: runtime.EventRecord, Record: runtime.Record{Value: s.v, Timestamp: s.ts, HasTimestamp: s.hasTs}})
			}
		}
	}
	var out []runtime.Record
	var snaps []*runtime.OperatorSnapshot
	for _, h := range hs {
		if snapshotID > 0 {
			snaps = append(snaps, h.snapshot(snapshotID))
			out = append(out, h.outputs()...)
			h.fail()
		} else {
			out = append(out, h.finish()...)
		}
	}
	return out, snaps
}

// checkRestore runs first then second uninterrupted at parallelism 1, and
// again with a checkpoint after first at p1, restored at p2: the outputs
// must be equal.
func checkRestore(t *testing.T, newOp func() runtime.Operator, inputs int, first, second []step, p1, p2 int) {
	t.Helper()
	const maxPar = 128
	want, _ := runSteps(t, newOp, inputs, 1, maxPar, nil, append(append([]step(nil), first...), second...), 0, 0)
	out1, snaps := runSteps(t, newOp, inputs, p1, maxPar, nil, first, 0, 1)
	out2, _ := runSteps(t, newOp, inputs, p2, maxPar, redistribute(snaps, p2, maxPar), second, clockOf(first), 0)
	got := values(append(out1, out2...))
	if w := values(want); fmt.Sprint(got) != fmt.Sprint(w) {
		t.Fatalf("restored at p=%d from p=%d:\n got %v\nwant %v", p2, p1, got, w)
	}
	if len(want) == 0 {
		t.Fatal("the scenario emits nothing")
	}
}

// clockOf is the last clock a script set.
func clockOf(steps []step) int64 {
	var c int64
	for _, s := range steps {
		if s.clock != nil {
			c = *s.clock
		}
	}
	return c
}

func opOf[T any](s DataStream[T]) func() runtime.Operator { return s.n.newOperator }
