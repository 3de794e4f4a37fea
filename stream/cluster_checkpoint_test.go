package stream

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/stream/codec"
	"github.com/gofl/gofl/stream/runtime"
	"github.com/gofl/gofl/taskmanager/network"
	"github.com/gofl/gofl/taskmanager/runner"
)

// Barriers, cancel markers and end-of-data cross the network with their
// full payload, in order with the records, and a barrier is delivered
// without a flush after a partially filled buffer.
func TestCheckpointEventsCrossTheNetwork(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prod, cons := shuffleEnv(t), shuffleEnv(t)
	pid := producerPartition("r1", 0)
	p, err := prod.CreateResultPartition(ctx, pid, network.Pipelined, 2)
	if err != nil {
		t.Fatal(err)
	}
	c, err := codec.For[string]()
	if err != nil {
		t.Fatal(err)
	}
	sc := valueCodec[string]{c: c, typ: "string"}
	w := &netWriter{p: p, c: sc}
	g, err := cons.CreateInputGate("task#0/input-0", []network.InputChannelSpec{{Partition: pid, Subpartition: 1, Address: prod.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ng := &netGate{g: g, c: sc, ch: make(chan runtime.ChannelBatch, 16)}
	pumpCtx, stopPump := context.WithCancel(ctx)
	pumpDone := make(chan struct{})
	go func() { defer close(pumpDone); ng.pump(pumpCtx, func(error) {}) }()
	defer func() { stopPump(); <-pumpDone }()

	barrier := runtime.CheckpointBarrier{ID: 7, Timestamp: 1234567, Options: runtime.CheckpointOptions{
		Type: runtime.SavepointTerminate, ExactlyOnce: true, Unaligned: true, AlignedTimeout: 1500 * time.Millisecond,
		TargetLocation: "hdfs://nn:9000/savepoints/savepoint-abcdef-0123456789ab"}}
	var got []runtime.Event
	next := func(what string) runtime.Event {
		t.Helper()
		for len(got) == 0 {
			select {
			case b := <-ng.ch:
				got = append(got, b.Events...)
			case <-ctx.Done():
				t.Fatalf("waiting for %s: %v", what, ctx.Err())
			}
		}
		ev := got[0]
		got = got[1:]
		return ev
	}
	// A record in a partial buffer and then a barrier, no flush.
	if err := w.Emit(1, runtime.Event{Kind: runtime.EventRecord, Record: runtime.Record{Value: "before"}}); err != nil {
		t.Fatal(err)
	}
	for s := range 2 { // the runtime sends a barrier to every subpartition
		if err := w.Emit(s, runtime.Event{Kind: runtime.EventBarrier, Barrier: barrier}); err != nil {
			t.Fatal(err)
		}
	}
	if ev := next("the record"); ev.Kind != runtime.EventRecord || ev.Record.Value != "before" {
		t.Fatalf("first %+v", ev)
	}
	if ev := next("the barrier"); ev.Kind != runtime.EventBarrier || !reflect.DeepEqual(ev.Barrier, barrier) {
		t.Fatalf("barrier %+v, want %+v", ev.Barrier, barrier)
	}
	cancelled := runtime.CheckpointBarrier{ID: 8, Options: runtime.CheckpointOptions{TargetLocation: "file:///c/chk-8"}}
	for _, ev := range []runtime.Event{
		{Kind: runtime.EventCancelBarrier, Barrier: cancelled},
		{Kind: runtime.EventWatermark, Watermark: 99},
		{Kind: runtime.EventEndOfData, Drain: true},
		{Kind: runtime.EventEndOfData, Drain: false},
	} {
		if err := w.Emit(1, ev); err != nil {
			t.Fatal(err)
		}
		if got := next("event"); !reflect.DeepEqual(got, ev) {
			t.Fatalf("sent %+v, received %+v", ev, got)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if ev := next("the end"); ev.Kind != runtime.EventEndOfPartition {
		t.Fatalf("last %+v", ev)
	}
}

func TestDecodeEventRejectsGarbage(t *testing.T) {
	good := appendBarrier(nil, runtime.CheckpointBarrier{ID: 1, Options: runtime.CheckpointOptions{TargetLocation: "file:///x"}})
	for _, ev := range []network.CustomEvent{
		{EventKind: kindBarrier, Payload: good[:len(good)-1]},
		{EventKind: kindBarrier, Payload: good[:10]},
		{EventKind: kindCancelBarrier, Payload: append(append([]byte(nil), good[:16]...), 9, 0, 0, 0)},
		{EventKind: kindEndOfData, Payload: []byte{2}},
		{EventKind: kindWatermark, Payload: []byte{1}},
		{EventKind: kindEndOfData + 10},
	} {
		if _, err := decodeEvent(ev); !errors.Is(err, codec.ErrCorrupt) {
			t.Errorf("kind %d payload %x: %v", ev.EventKind, ev.Payload, err)
		}
	}
}

// The executor queues triggers and notices for the task without blocking
// and declines what a task cannot take.
func TestExecutorDeliversCheckpointControl(t *testing.T) {
	ex := newClusterExecutor(&Plan{Graph: &jobgraph.JobGraph{}}, nil, "", zerolog.Nop())
	defer ex.fss.Close()
	reports := make(chan *pb.RunnerCheckpointReport, 100)
	ex.SetCheckpointReporter(func(r *pb.RunnerCheckpointReport) { reports <- r })
	stream := &pb.ExecutionAttemptID{Graph: 1, JobVertexId: "v", SubtaskIndex: 0}
	batch := &pb.ExecutionAttemptID{Graph: 1, JobVertexId: "b", SubtaskIndex: 0}
	st := &clusterTask{control: make(chan runtime.CheckpointControl, controlQueue), jobID: "job", attempt: stream}
	ex.tasks[attemptString(stream)] = st
	ex.tasks[attemptString(batch)] = &clusterTask{jobID: "job", attempt: batch}

	opts := &pb.CheckpointOptions{Type: pb.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT, TargetLocation: "file:///sp", ExactlyOnce: true, AlignedTimeoutMs: 30}
	if err := ex.TriggerCheckpoint(&pb.TriggerCheckpointRequest{JobId: "job", Attempt: stream, CheckpointId: 3, TimestampMs: 77, Options: opts}); err != nil {
		t.Fatal(err)
	}
	want := runtime.CheckpointControl{Kind: runtime.TriggerCheckpoint, Barrier: runtime.CheckpointBarrier{ID: 3, Timestamp: 77,
		Options: runtime.CheckpointOptions{Type: runtime.Savepoint, ExactlyOnce: true, AlignedTimeout: 30 * time.Millisecond, TargetLocation: "file:///sp"}}}
	if got := <-st.control; !reflect.DeepEqual(got, want) {
		t.Fatalf("control %+v, want %+v", got, want)
	}
	if err := ex.NotifyCheckpoint(&pb.NotifyCheckpointRequest{JobId: "job", Attempt: stream, CheckpointId: 3, Complete: true}); err != nil {
		t.Fatal(err)
	}
	if got := <-st.control; got.Kind != runtime.NotifyCheckpointComplete || got.CheckpointID != 3 {
		t.Fatalf("notice %+v", got)
	}
	_ = ex.NotifyCheckpoint(&pb.NotifyCheckpointRequest{JobId: "job", Attempt: stream, CheckpointId: 4})
	if got := <-st.control; got.Kind != runtime.NotifyCheckpointAborted || got.CheckpointID != 4 {
		t.Fatalf("abort notice %+v", got)
	}
	if len(reports) != 0 {
		t.Fatalf("unexpected report %v", <-reports)
	}

	// A full queue declines; it never blocks the RPC.
	for i := range controlQueue {
		st.control <- runtime.CheckpointControl{CheckpointID: int64(i)}
	}
	if err := ex.TriggerCheckpoint(&pb.TriggerCheckpointRequest{JobId: "job", Attempt: stream, CheckpointId: 5}); err != nil {
		t.Fatal(err)
	}
	if d := (<-reports).GetDecline(); d == nil || d.CheckpointId != 5 || !strings.Contains(d.Reason.GetMessage(), "queued") {
		t.Fatalf("decline %v", d)
	}
	// A batch job's task takes no checkpoints.
	if err := ex.TriggerCheckpoint(&pb.TriggerCheckpointRequest{JobId: "job", Attempt: batch, CheckpointId: 6}); err != nil {
		t.Fatal(err)
	}
	if d := (<-reports).GetDecline(); d == nil || d.CheckpointId != 6 || !strings.Contains(d.Reason.GetMessage(), "batch job") {
		t.Fatalf("decline %v", d)
	}
	// An ended task is not found.
	gone := &pb.ExecutionAttemptID{Graph: 1, JobVertexId: "v", SubtaskIndex: 1}
	if err := ex.TriggerCheckpoint(&pb.TriggerCheckpointRequest{JobId: "job", Attempt: gone, CheckpointId: 7}); !errors.Is(err, runner.ErrTaskNotFound) {
		t.Fatalf("trigger of an unknown task: %v", err)
	}
	if err := ex.NotifyCheckpoint(&pb.NotifyCheckpointRequest{JobId: "job", Attempt: gone, CheckpointId: 7}); !errors.Is(err, runner.ErrTaskNotFound) {
		t.Fatalf("notice to an unknown task: %v", err)
	}
}

func TestCheckpointingInterval(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 0, "0": 0, "10 s": 10 * time.Second, "500ms": 500 * time.Millisecond, "junk": 0} {
		cfg := map[string]string{}
		if in != "" {
			cfg["execution.checkpointing.interval"] = in
		}
		if got := checkpointingInterval(cfg); got != want {
			t.Errorf("%q: %v, want %v", in, got, want)
		}
	}
}

// A task restoring from a checkpoint whose state file is gone fails,
// naming the file; the JobMaster decides what follows. Periodic
// checkpointing stays off: a finished task would otherwise wait for a final
// checkpoint no one triggers here.
func TestTaskWithMissingStateFileFails(t *testing.T) {
	env := NewEnvironment()
	Process(Generate(env, 10, func(i int64) int64 { return i }), func(_ *ProcessContext, v int64, _ Collector[struct{}]) error { return nil })
	p, err := env.Plan()
	if err != nil {
		t.Fatal(err)
	}
	v := p.Graph.Vertices[0]
	ex := newClusterExecutor(p, shuffleEnv(t), "", zerolog.Nop())
	defer ex.fss.Close()
	dir := t.TempDir()
	run := func(a *pb.ExecutionAttemptID, tr *pb.TaskRestore) *pb.RunnerTaskState {
		t.Helper()
		states := make(chan *pb.RunnerTaskState, 10)
		err := ex.Submit(context.Background(), &pb.SubmitTaskRequest{JobId: "job", Tdd: &pb.TaskDeploymentDescriptor{Attempt: a,
			JobInformation:  &pb.JobInformation{JobId: "job", JobType: pb.JobType_JOB_TYPE_STREAMING, Config: map[string]string{}},
			TaskInformation: &pb.TaskInformation{JobVertexId: string(v.ID), TaskName: v.Name, NumberOfSubtasks: 1, MaxParallelism: 128},
			TaskRestore:     tr}}, func(st *pb.RunnerTaskState) { states <- st })
		if err != nil {
			t.Fatal(err)
		}
		for {
			select {
			case st := <-states:
				switch st.State {
				case stateFinished, stateFailed, stateCanceled:
					return st
				}
			case <-time.After(time.Minute):
				t.Fatal("the task did not end")
			}
		}
	}
	ok := run(&pb.ExecutionAttemptID{Graph: 1, JobVertexId: string(v.ID)}, nil)
	if ok.State != stateFinished {
		t.Fatalf("fresh start: %v", ok)
	}
	opID := v.Operators[0].ID
	tr := &pb.TaskRestore{CheckpointId: 4, Location: "file://" + dir + "/chk-4", Operators: []*pb.OperatorSubtaskStateHandle{{
		OperatorId: opID, Parallelism: 1, MaxParallelism: 128, File: &pb.StateFile{Path: "gone-0-0-abc", Size: 100},
		KeyGroups: []*pb.KeyGroupRegion{{KeyGroup: 0, Region: &pb.StateFileRegion{Offset: 12, Length: 20}}}}}}
	st := run(&pb.ExecutionAttemptID{Graph: 1, JobVertexId: string(v.ID), AttemptNumber: 1}, tr)
	if st.State != stateFailed || !strings.Contains(st.Failure.GetMessage(), dir+"/chk-4/gone-0-0-abc") {
		t.Fatalf("restore from a missing file: %v", st)
	}
	ex.wg.Wait()
}
