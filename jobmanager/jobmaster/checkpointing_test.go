package jobmaster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/ha"
	"github.com/gofl/gofl/internal/clock"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/jobmanager/checkpoint"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/jobmanager/failover"
	"github.com/gofl/gofl/jobmanager/scheduler"
	"github.com/gofl/gofl/rpc/pb"
)

// ckJob is src -> sink, one operator each, one subtask each.
func ckJob(name string) *jobgraph.JobGraph {
	src, sink := vertex("src", 1), vertex("sink", 1)
	src.Operators = []jobgraph.Operator{{ID: "op-src"}}
	sink.Operators = []jobgraph.Operator{{ID: "op-sink"}}
	jg := job(name, src, sink)
	jg.Edges = []*jobgraph.Edge{{Source: "src", Target: "sink", Distribution: jobgraph.AllToAll, PartitionType: jobgraph.Pipelined}}
	return jg
}

func (h *harness) ack(a eg.ExecutionAttemptID, id int64) {
	h.t.Helper()
	_, err := h.jm.AcknowledgeCheckpoint(context.Background(), &pb.AcknowledgeCheckpointRequest{JobId: h.jm.JobID(), Attempt: attemptProto(a), CheckpointId: id,
		Operators: []*pb.OperatorSubtaskStateHandle{{OperatorId: "op-" + string(a.JobVertex), SubtaskIndex: a.Subtask, File: &pb.StateFile{Path: string(a.JobVertex) + "-state", Size: 4}}},
		Metrics:   &pb.CheckpointMetrics{StateSize: 4}})
	if err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) checkpointCalls(tm, method string, id int64) []call {
	var out []call
	for _, c := range h.tm(tm).log(method) {
		if c.checkpoint == id {
			out = append(out, c)
		}
	}
	return out
}

// Periodic checkpoints go to the source, complete with every task's ack
// once the metadata is written, are notified to every task, and a
// restarted task restores the latest one.
func TestCheckpointTriggerAckNotifyAndRestore(t *testing.T) {
	clk := clock.NewFake(t0)
	dir := t.TempDir()
	cfg := testConfig(clk, 1)
	cfg.Checkpoint = checkpoint.Config{Interval: time.Second, CheckpointsDir: "file://" + dir}
	h := start(t, cfg, ckJob("ck"), &fakeRM{})
	h.register("tm1", 2)
	waitFor(t, "both deployments", func() bool { return len(h.tm("tm1").log("SubmitTask")) == 2 })
	for _, c := range h.tm("tm1").log("SubmitTask") {
		if c.tdd.TaskRestore != nil {
			t.Errorf("first deployment of %s restores %v without a savepoint", c.attempt, c.tdd.TaskRestore)
		}
	}
	src, sink := h.attempt("src", 0), h.attempt("sink", 0)
	for _, a := range []eg.ExecutionAttemptID{src, sink} {
		if err := h.report(a, eg.Running); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the checkpoint timer", func() bool {
		h.advance(time.Second)
		return len(h.checkpointCalls("tm1", "TriggerCheckpoint", 1)) > 0
	})
	trig := h.checkpointCalls("tm1", "TriggerCheckpoint", 1)
	if len(trig) != 1 || trig[0].attempt != src {
		t.Fatalf("triggers %v; want one at the source %s", calls(trig), src)
	}
	loc := "file://" + filepath.Join(dir, "ck", "chk-1")
	if got := trig[0].options.GetTargetLocation(); got != loc || !trig[0].options.ExactlyOnce {
		t.Errorf("options %v; want target %s, exactly once", trig[0].options, loc)
	}
	h.ack(src, 1)
	h.ack(sink, 1)
	waitFor(t, "the completion notifications", func() bool { return len(h.checkpointCalls("tm1", "NotifyCheckpoint", 1)) == 2 })
	for _, c := range h.checkpointCalls("tm1", "NotifyCheckpoint", 1) {
		if !c.complete {
			t.Errorf("notification %v is not a completion", c)
		}
	}
	_, md, err := checkpoint.Store{}.Read(context.Background(), loc)
	if err != nil {
		t.Fatal(err)
	}
	if md.CheckpointId != 1 || len(md.Operators) != 2 || md.Operators[0].Subtasks[0].File.Path != "src-state" {
		t.Errorf("metadata %v", md)
	}
	if st := h.jm.CheckpointStats(); st.Completed != 1 || st.LatestCompleted == nil || st.LatestCompleted.ExternalPath != loc || st.LatestCompleted.StateSize != 8 {
		t.Errorf("stats %+v", st)
	}

	// The sink fails: its region (both tasks) restarts from checkpoint 1.
	if _, err := h.jm.UpdateTaskExecutionState(context.Background(), &pb.UpdateTaskExecutionStateRequest{JobId: h.jm.JobID(),
		Attempt: attemptProto(sink), State: eg.Failed.String(), Failure: failover.Encode(errors.New("boom"))}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the redeployments", func() bool { return len(h.tm("tm1").log("SubmitTask")) == 4 })
	for _, c := range h.tm("tm1").log("SubmitTask")[2:] {
		tr := c.tdd.TaskRestore
		if tr == nil || tr.CheckpointId != 1 || tr.Location != loc || len(tr.Operators) != 1 || tr.Operators[0].OperatorId != "op-"+string(c.attempt.JobVertex) {
			t.Errorf("redeployment of %s restores %v; want checkpoint 1's state of its operator", c.attempt, tr)
		}
	}
}

// A savepoint goes to the given directory, completes with the acks and
// reports its location; an unknown request is not found.
func TestSavepointThroughJobMaster(t *testing.T) {
	dir := t.TempDir()
	h := start(t, testConfig(nil, 0), ckJob("sp"), &fakeRM{})
	h.register("tm1", 2)
	waitFor(t, "both deployments", func() bool { return len(h.tm("tm1").log("SubmitTask")) == 2 })
	src, sink := h.attempt("src", 0), h.attempt("sink", 0)
	ctx := context.Background()
	// Not all tasks run yet: the request fails at once.
	id, err := h.jm.TriggerSavepoint(ctx, "file://"+dir, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := h.jm.SavepointStatus(id); !ok || !st.Done || !errors.Is(st.Err, checkpoint.ErrNotAllRunning) {
		t.Errorf("savepoint before the tasks run: %+v", st)
	}
	for _, a := range []eg.ExecutionAttemptID{src, sink} {
		if err := h.report(a, eg.Running); err != nil {
			t.Fatal(err)
		}
	}
	id, err = h.jm.TriggerSavepoint(ctx, "file://"+dir, true, false)
	if err != nil {
		t.Fatal(err)
	}
	if st, ok := h.jm.SavepointStatus(id); !ok || st.Done {
		t.Errorf("savepoint status right after the trigger: %+v %v", st, ok)
	}
	waitFor(t, "the savepoint trigger", func() bool { return len(h.tm("tm1").log("TriggerCheckpoint")) == 1 })
	trig := h.tm("tm1").log("TriggerCheckpoint")[0]
	if trig.options.Type != pb.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT_SUSPEND || !strings.HasPrefix(trig.options.TargetLocation, "file://"+dir+"/savepoint-sp-") {
		t.Errorf("trigger options %v", trig.options)
	}
	h.ack(src, trig.checkpoint)
	h.ack(sink, trig.checkpoint)
	var st SavepointStatus
	waitFor(t, "the savepoint", func() bool { st, _ = h.jm.SavepointStatus(id); return st.Done })
	if st.Err != nil || st.Location != trig.options.TargetLocation {
		t.Fatalf("savepoint %+v", st)
	}
	if _, err := os.Stat(filepath.Join(strings.TrimPrefix(st.Location, "file://"), "_metadata")); err != nil {
		t.Error(err)
	}
	if _, ok := h.jm.SavepointStatus("nope"); ok {
		t.Error("an unknown request has a status")
	}
}

// execution.savepoint.path: the first deployments restore it; a missing
// savepoint or one with state of an operator the job lacks fails New with
// an error naming the path.
func TestSavepointPathAtStart(t *testing.T) {
	dir := t.TempDir()
	sp := "file://" + filepath.Join(dir, "savepoint-1")
	md := &pb.CheckpointMetadata{CheckpointId: 7, Type: pb.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT, Operators: []*pb.OperatorState{
		{OperatorId: "op-src", Parallelism: 1, MaxParallelism: 128, Subtasks: []*pb.OperatorSubtaskStateHandle{{OperatorId: "op-src", File: &pb.StateFile{Path: "f"}}}}}}
	if err := (checkpoint.Store{}).Write(context.Background(), sp, md); err != nil {
		t.Fatal(err)
	}
	log := zerolog.New(zerolog.NewTestWriter(t))

	cfg := testConfig(nil, 0)
	cfg.SavepointPath = "file://" + filepath.Join(dir, "missing")
	if _, err := New(cfg, ckJob("missing"), &fakeRM{}, log); !errors.Is(err, ErrRestore) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing savepoint: %v", err)
	}
	other := ckJob("renamed")
	other.Vertices[0].Operators[0].ID = "op-new"
	cfg.SavepointPath = sp
	if _, err := New(cfg, other, &fakeRM{}, log); !errors.Is(err, checkpoint.ErrUnknownOperators) || !strings.Contains(err.Error(), "op-src") ||
		!strings.Contains(err.Error(), sp) {
		t.Errorf("unclaimed state: %v", err)
	}
	cfg.IgnoreUnclaimedState = true
	if _, err := New(cfg, other, &fakeRM{}, log); err != nil {
		t.Errorf("unclaimed state allowed: %v", err)
	}

	cfg.IgnoreUnclaimedState = false
	h := start(t, cfg, ckJob("restored"), &fakeRM{})
	h.register("tm1", 2)
	waitFor(t, "both deployments", func() bool { return len(h.tm("tm1").log("SubmitTask")) == 2 })
	for _, c := range h.tm("tm1").log("SubmitTask") {
		tr := c.tdd.TaskRestore
		switch c.attempt.JobVertex {
		case "src":
			if tr == nil || tr.CheckpointId != 7 || tr.Location != sp {
				t.Errorf("source restores %v; want savepoint 7 at %s", tr, sp)
			}
		default:
			if tr != nil {
				t.Errorf("stateless sink restores %v", tr)
			}
		}
	}
	if st := h.jm.CheckpointStats(); st.LatestRestored == nil || st.LatestRestored.ID != 7 {
		t.Errorf("restored stats %+v", st.LatestRestored)
	}
	if h.status() != scheduler.JobRunning {
		t.Errorf("status %s", h.status())
	}
}

// runCkJobUntilTriggered runs ckJob(name) on one TaskManager, both tasks
// RUNNING, and moves the clock on until checkpoint id is triggered.
func runCkJobUntilTriggered(t *testing.T, cfg Config, name string, id int64) (h *harness, src, sink eg.ExecutionAttemptID) {
	t.Helper()
	h = start(t, cfg, ckJob(name), &fakeRM{})
	h.register("tm1", 2)
	waitFor(t, "both deployments", func() bool { return len(h.tm("tm1").log("SubmitTask")) == 2 })
	src, sink = h.attempt("src", 0), h.attempt("sink", 0)
	for _, a := range []eg.ExecutionAttemptID{src, sink} {
		if err := h.report(a, eg.Running); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the checkpoint timer", func() bool {
		h.advance(time.Second)
		return len(h.checkpointCalls("tm1", "TriggerCheckpoint", id)) > 0
	})
	return h, src, sink
}

// noneRecovery is the checkpoint recovery of job "ha" in in-memory HA
// services (type none), retaining 1 checkpoint.
func noneRecovery(t *testing.T) *CheckpointRecovery {
	t.Helper()
	services := ha.NewNone(nil)
	t.Cleanup(func() { services.Close() })
	store, err := services.CompletedCheckpointStore(context.Background(), "ha", 1)
	if err != nil {
		t.Fatal(err)
	}
	return &CheckpointRecovery{Checkpoints: store, IDs: services.CheckpointIDCounter("ha")}
}

// With HA, checkpoint ids start at the counter's value, the counter moves
// past an id before its trigger goes out, and a completed checkpoint is in
// the CompletedCheckpointStore before any task hears of its completion.
func TestCheckpointRecordedInHAStores(t *testing.T) {
	clk := clock.NewFake(t0)
	dir := t.TempDir()
	cfg := testConfig(clk, 1)
	cfg.Checkpoint = checkpoint.Config{Interval: time.Second, CheckpointsDir: "file://" + dir, FirstID: 7}
	cfg.HA = noneRecovery(t)
	store, ids := cfg.HA.Checkpoints, cfg.HA.IDs
	h, src, sink := runCkJobUntilTriggered(t, cfg, "ha", 7)
	if next, err := ids.Get(context.Background()); err != nil || next != 8 {
		t.Fatalf("the counter is at %d (%v) once checkpoint 7 was triggered, want 8", next, err)
	}
	if _, ok := store.Latest(); ok {
		t.Fatal("a checkpoint is in the store before it completed")
	}
	h.ack(src, 7)
	h.ack(sink, 7)
	waitFor(t, "the completion notifications", func() bool { return len(h.checkpointCalls("tm1", "NotifyCheckpoint", 7)) == 2 })
	latest, ok := store.Latest()
	if loc := "file://" + filepath.Join(dir, "ha", "chk-7"); !ok || latest.ID != 7 || latest.Location != loc {
		t.Fatalf("latest stored checkpoint %+v (%v), want 7 at %s", latest, ok, loc)
	}
}

// With HA, a checkpoint the coordinator aborts while its metadata write is
// in flight (here: a task failed) is never recorded in the
// CompletedCheckpointStore, whose entry would point at the directory the
// abort discards once the write ended.
func TestCheckpointAbortedDuringItsMetadataWriteIsNotRecordedInHA(t *testing.T) {
	clk := clock.NewFake(t0)
	dir := t.TempDir()
	cfg := testConfig(clk, 1)
	cfg.Checkpoint = checkpoint.Config{Interval: time.Second, CheckpointsDir: "file://" + dir}
	cfg.HA = noneRecovery(t)
	store := cfg.HA.Checkpoints
	writing, release, wrote := make(chan string, 1), make(chan struct{}), make(chan error, 1)
	cfg.writeMetadata = func(ctx context.Context, location string, md *pb.CheckpointMetadata) error {
		if md.CheckpointId != 1 {
			return checkpoint.Store{}.Write(ctx, location, md)
		}
		writing <- location
		<-release
		err := checkpoint.Store{}.Write(ctx, location, md)
		wrote <- err
		return err
	}
	h, src, sink := runCkJobUntilTriggered(t, cfg, "ha", 1)
	h.ack(src, 1)
	h.ack(sink, 1)
	var loc string
	waitFor(t, "the metadata write", func() bool {
		select {
		case loc = <-writing:
			return true
		default:
			return false
		}
	})
	// The sink fails: the failover aborts the pending checkpoint.
	if _, err := h.jm.UpdateTaskExecutionState(context.Background(), &pb.UpdateTaskExecutionStateRequest{JobId: h.jm.JobID(),
		Attempt: attemptProto(sink), State: eg.Failed.String(), Failure: failover.Encode(errors.New("boom"))}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the redeployments", func() bool { return len(h.tm("tm1").log("SubmitTask")) == 4 })
	close(release)
	if err := <-wrote; err != nil {
		t.Fatalf("the metadata write: %v", err)
	}
	waitFor(t, "the aborted checkpoint's directory discarded after its write", func() bool {
		_, err := os.Stat(strings.TrimPrefix(loc, "file://"))
		return errors.Is(err, os.ErrNotExist)
	})
	if cp, ok := store.Latest(); ok {
		t.Fatalf("the HA store holds checkpoint %+v, which the coordinator aborted", cp)
	}
	for _, c := range h.checkpointCalls("tm1", "NotifyCheckpoint", 1) {
		if c.complete {
			t.Errorf("a task heard of the aborted checkpoint's completion: %v", c)
		}
	}
}
