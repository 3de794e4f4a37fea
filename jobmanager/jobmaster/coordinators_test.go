package jobmaster

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/clock"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/jobmanager/checkpoint"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/jobmanager/failover"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/stream/codec"
	"github.com/gofl/gofl/stream/source"
)

// poolSplit and poolSource: a pull-based enumerator over a fixed list of
// split IDs (the config, comma-separated), handed out one per request.
type poolSplit struct{ ID string }

func (s poolSplit) SplitID() string { return s.ID }

type poolSource struct{ ids []string }

func (p poolSource) Boundedness() source.Boundedness { return source.Bounded }
func (p poolSource) CreateEnumerator(ctx source.SplitEnumeratorContext[poolSplit]) (source.SplitEnumerator[poolSplit, []string], error) {
	return &poolEnum{ctx: ctx, pool: append([]string(nil), p.ids...)}, nil
}
func (p poolSource) RestoreEnumerator(ctx source.SplitEnumeratorContext[poolSplit], st []string) (source.SplitEnumerator[poolSplit, []string], error) {
	return &poolEnum{ctx: ctx, pool: st}, nil
}
func (p poolSource) CreateReader(source.ReaderContext) (source.SourceReader[int, poolSplit], error) {
	return nil, errors.New("no reader in the JobMaster")
}

type poolEnum struct {
	ctx  source.SplitEnumeratorContext[poolSplit]
	pool []string
}

func (e *poolEnum) Start() error { return nil }
func (e *poolEnum) HandleSplitRequest(sub int, _ string) {
	if len(e.pool) == 0 {
		e.ctx.SignalNoMoreSplits(sub)
		return
	}
	e.ctx.AssignSplits(map[int][]poolSplit{sub: {{ID: e.pool[0]}}})
	e.pool = e.pool[1:]
}
func (e *poolEnum) AddSplitsBack(splits []poolSplit, _ int) {
	back := make([]string, 0, len(splits)+len(e.pool))
	for _, s := range splits {
		back = append(back, s.ID)
	}
	e.pool = append(back, e.pool...)
}
func (e *poolEnum) AddReader(int)                         {}
func (e *poolEnum) HandleSourceEvent(int, []byte)         {}
func (e *poolEnum) SnapshotState(int64) ([]string, error) { return slices.Clone(e.pool), nil }
func (e *poolEnum) NotifyCheckpointComplete(int64) error  { return nil }
func (e *poolEnum) Close() error                          { return nil }
func (e *poolEnum) String() string                        { return strings.Join(e.pool, ",") }
func init() {
	source.RegisterSource("jobmaster-test-pool", func(cfg []byte) (source.Source[int, poolSplit, []string], error) {
		return poolSource{ids: strings.Split(string(cfg), ",")}, nil
	})
}

var poolSplitCodec = codec.MustFor[poolSplit]()

// coordJob is src (2 subtasks, a coordinated source) -> sink.
func coordJob(name string) *jobgraph.JobGraph {
	jg := ckJob(name)
	jg.Vertices[0].Parallelism = 2
	jg.Vertices[0].Operators[0].Coordinator = "jobmaster-test-pool"
	jg.Vertices[0].Operators[0].CoordinatorConfig = []byte("a,b,c")
	return jg
}

func (h *harness) operatorEvent(a eg.ExecutionAttemptID, seq int64, kind source.EventKind) error {
	_, err := h.jm.SendOperatorEventToCoordinator(context.Background(), &pb.OperatorEventRequest{JobId: h.jm.JobID(),
		Attempt: attemptProto(a), OperatorId: "op-src", Seq: seq, Payload: source.EventCodec.Append(nil, source.Event{Kind: kind})})
	return err
}

// assigned returns the splits (or "none" for NoMoreSplits) the coordinator
// sent to attempt a, in order, checking the sequence numbers.
func (h *harness) assigned(a eg.ExecutionAttemptID) []string {
	h.t.Helper()
	var out []string
	for i, c := range h.tm("tm1").log("SendOperatorEventToTask") {
		if c.attempt != a {
			continue
		}
		if c.event.Seq != int64(len(out)+1) || c.event.OperatorId != "op-src" {
			h.t.Errorf("event %d to %s has seq %d, operator %q", i, a, c.event.Seq, c.event.OperatorId)
		}
		ev, _, err := source.EventCodec.Decode(c.event.Payload)
		if err != nil {
			h.t.Fatal(err)
		}
		switch ev.Kind {
		case source.NoMoreSplits:
			out = append(out, "none")
		case source.AddSplits:
			sp, err := source.DecodeSplits(poolSplitCodec, ev.Splits)
			if err != nil {
				h.t.Fatal(err)
			}
			for _, s := range sp {
				out = append(out, s.ID)
			}
		}
	}
	return out
}

// The split enumerator runs in the JobMaster: requests reach it in order
// (repeats ignored), assignments go to the requesting attempt numbered, a
// failed reader's uncheckpointed splits go to its next attempt, a stale
// attempt's events are refused, and the enumerator's state lands in the
// checkpoint's _metadata.
func TestCoordinatorAssignsSplitsAndTakesThemBack(t *testing.T) {
	clk := clock.NewFake(t0)
	dir := t.TempDir()
	cfg := testConfig(clk, 2)
	cfg.Checkpoint = checkpoint.Config{Interval: time.Second, CheckpointsDir: "file://" + dir}
	h := start(t, cfg, coordJob("coord"), &fakeRM{})
	h.register("tm1", 3)
	waitFor(t, "the deployments", func() bool { return len(h.tm("tm1").log("SubmitTask")) == 3 })
	s0, s1, sink := h.attempt("src", 0), h.attempt("src", 1), h.attempt("sink", 0)
	for _, a := range []eg.ExecutionAttemptID{s0, s1, sink} {
		if err := h.report(a, eg.Running); err != nil {
			t.Fatal(err)
		}
	}
	for seq, k := range []source.EventKind{source.ReaderRegistration, source.SplitRequest, source.SplitRequest} {
		if err := h.operatorEvent(s0, int64(seq+1), k); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.operatorEvent(s0, 3, source.SplitRequest); err != nil { // a repeat
		t.Fatal(err)
	}
	for seq, k := range []source.EventKind{source.ReaderRegistration, source.SplitRequest} {
		if err := h.operatorEvent(s1, int64(seq+1), k); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "three assignments", func() bool { return len(h.tm("tm1").log("SendOperatorEventToTask")) == 3 })
	if got := h.assigned(s0); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("subtask 0 got %v; want [a b]", got)
	}
	if got := h.assigned(s1); !slices.Equal(got, []string{"c"}) {
		t.Errorf("subtask 1 got %v; want [c]", got)
	}

	// Checkpoint 1: the enumerator's pool (empty) is in the metadata.
	waitFor(t, "the checkpoint trigger", func() bool {
		h.advance(time.Second)
		return len(h.checkpointCalls("tm1", "TriggerCheckpoint", 1)) == 2
	})
	for _, a := range []eg.ExecutionAttemptID{s0, s1, sink} {
		h.ack(a, 1)
	}
	waitFor(t, "checkpoint 1", func() bool { return len(h.checkpointCalls("tm1", "NotifyCheckpoint", 1)) == 3 })
	_, md, err := checkpoint.Store{}.Read(context.Background(), "file://"+filepath.Join(dir, "coord", "chk-1"))
	if err != nil {
		t.Fatal(err)
	}
	if coordinatorState(md, "op-src") == nil {
		t.Errorf("checkpoint 1's metadata has no coordinator state: %v", md)
	}

	// After the checkpoint subtask 1 takes nothing more; subtask 0 fails
	// after asking for a split it gets none of: it restarts from
	// checkpoint 1 and its splits are those of its state (none go back).
	if err := h.operatorEvent(s1, 3, source.SplitRequest); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "no more splits for subtask 1", func() bool { return slices.Equal(h.assigned(s1), []string{"c", "none"}) })
	if _, err := h.jm.UpdateTaskExecutionState(context.Background(), &pb.UpdateTaskExecutionStateRequest{JobId: h.jm.JobID(),
		Attempt: attemptProto(s0), State: eg.Failed.String(), Failure: failover.Encode(errors.New("boom"))}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cancellations", func() bool { return len(h.tm("tm1").log("CancelTask")) == 2 })
	for _, c := range h.tm("tm1").log("CancelTask") {
		_ = h.report(c.attempt, eg.Canceled)
	}
	waitFor(t, "all redeployed", func() bool { return len(h.tm("tm1").log("SubmitTask")) == 6 })
	n0 := h.attempt("src", 0)
	if err := h.report(n0, eg.Running); err != nil {
		t.Fatal(err)
	}
	if err := h.operatorEvent(s0, 4, source.SplitRequest); status.Code(err) != codes.NotFound {
		t.Errorf("event of the failed attempt: %v; want NOT_FOUND", err)
	}
	for seq, k := range []source.EventKind{source.ReaderRegistration, source.SplitRequest} {
		if err := h.operatorEvent(n0, int64(seq+1), k); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the answer to the new attempt", func() bool { return len(h.assigned(n0)) == 1 })
	if got := h.assigned(n0); !slices.Equal(got, []string{"none"}) {
		t.Errorf("the new attempt got %v; want no more splits (a and b were checkpointed in its reader)", got)
	}
}

// Splits assigned after the last completed checkpoint go back when their
// reader fails, and reach its next attempt.
func TestCoordinatorGivesUncheckpointedSplitsBack(t *testing.T) {
	h := start(t, testConfig(nil, 2), coordJob("back"), &fakeRM{})
	h.register("tm1", 3)
	waitFor(t, "the deployments", func() bool { return len(h.tm("tm1").log("SubmitTask")) == 3 })
	s0, s1, sink := h.attempt("src", 0), h.attempt("src", 1), h.attempt("sink", 0)
	for _, a := range []eg.ExecutionAttemptID{s0, s1, sink} {
		if err := h.report(a, eg.Running); err != nil {
			t.Fatal(err)
		}
	}
	for seq, k := range []source.EventKind{source.ReaderRegistration, source.SplitRequest, source.SplitRequest} {
		if err := h.operatorEvent(s0, int64(seq+1), k); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "two assignments", func() bool { return len(h.assigned(s0)) == 2 })
	if _, err := h.jm.UpdateTaskExecutionState(context.Background(), &pb.UpdateTaskExecutionStateRequest{JobId: h.jm.JobID(),
		Attempt: attemptProto(s0), State: eg.Failed.String(), Failure: failover.Encode(errors.New("boom"))}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the cancellations", func() bool { return len(h.tm("tm1").log("CancelTask")) == 2 })
	for _, c := range h.tm("tm1").log("CancelTask") {
		_ = h.report(c.attempt, eg.Canceled)
	}
	waitFor(t, "all redeployed", func() bool { return len(h.tm("tm1").log("SubmitTask")) == 6 })
	n1 := h.attempt("src", 1)
	if err := h.report(n1, eg.Running); err != nil {
		t.Fatal(err)
	}
	for seq, k := range []source.EventKind{source.ReaderRegistration, source.SplitRequest, source.SplitRequest, source.SplitRequest, source.SplitRequest} {
		if err := h.operatorEvent(n1, int64(seq+1), k); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "four answers", func() bool { return len(h.assigned(n1)) == 4 })
	if got := h.assigned(n1); !slices.Equal(got, []string{"a", "b", "c", "none"}) {
		t.Errorf("the restarted subtask 1 got %v; want [a b c none]: without a checkpoint every split goes back", got)
	}
	// A gap in the numbers (a lost event) fails the job.
	if err := h.operatorEvent(n1, 9, source.SplitRequest); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the global failure", func() bool {
		_, st := h.state("src", 1)
		return st != eg.Running
	})
}

// A job started from a checkpoint restores its enumerator from the
// coordinator state in the _metadata: what was assigned before the
// checkpoint is not handed out again.
func TestCoordinatorRestoredFromCheckpoint(t *testing.T) {
	clk := clock.NewFake(t0)
	dir := t.TempDir()
	cfg := testConfig(clk, 0)
	cfg.Checkpoint = checkpoint.Config{Interval: time.Second, CheckpointsDir: "file://" + dir}
	h := start(t, cfg, coordJob("first"), &fakeRM{})
	h.register("tm1", 3)
	waitFor(t, "the deployments", func() bool { return len(h.tm("tm1").log("SubmitTask")) == 3 })
	s0, s1, sink := h.attempt("src", 0), h.attempt("src", 1), h.attempt("sink", 0)
	for _, a := range []eg.ExecutionAttemptID{s0, s1, sink} {
		if err := h.report(a, eg.Running); err != nil {
			t.Fatal(err)
		}
	}
	for seq, k := range []source.EventKind{source.ReaderRegistration, source.SplitRequest} {
		if err := h.operatorEvent(s0, int64(seq+1), k); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the first assignment", func() bool { return len(h.assigned(s0)) == 1 })
	waitFor(t, "the checkpoint trigger", func() bool {
		h.advance(time.Second)
		return len(h.checkpointCalls("tm1", "TriggerCheckpoint", 1)) == 2
	})
	for _, a := range []eg.ExecutionAttemptID{s0, s1, sink} {
		h.ack(a, 1)
	}
	waitFor(t, "checkpoint 1", func() bool { return len(h.checkpointCalls("tm1", "NotifyCheckpoint", 1)) == 3 })

	cfg2 := testConfig(nil, 0)
	cfg2.SavepointPath = "file://" + filepath.Join(dir, "first", "chk-1")
	h2 := start(t, cfg2, coordJob("second"), &fakeRM{})
	h2.register("tm1", 3)
	waitFor(t, "the deployments", func() bool { return len(h2.tm("tm1").log("SubmitTask")) == 3 })
	r1 := h2.attempt("src", 1)
	if err := h2.report(r1, eg.Running); err != nil {
		t.Fatal(err)
	}
	for seq, k := range []source.EventKind{source.ReaderRegistration, source.SplitRequest, source.SplitRequest, source.SplitRequest} {
		if err := h2.operatorEvent(r1, int64(seq+1), k); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "three answers", func() bool { return len(h2.assigned(r1)) == 3 })
	if got := h2.assigned(r1); !slices.Equal(got, []string{"b", "c", "none"}) {
		t.Errorf("restored enumerator handed out %v; want [b c none] (a was checkpointed in reader 0)", got)
	}
}
