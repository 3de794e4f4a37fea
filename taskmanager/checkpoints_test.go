package taskmanager

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/rpc/pb"
)

func recvWithin[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

func trigger(job string, a *pb.ExecutionAttemptID, id int64) *pb.TriggerCheckpointRequest {
	return &pb.TriggerCheckpointRequest{JobId: job, Attempt: a, CheckpointId: id, TimestampMs: 1,
		Options: &pb.CheckpointOptions{Type: pb.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT, TargetLocation: "file:///chk/" + job}}
}

// A trigger reaches the task in the job's runner, and every acknowledgement
// reaches the JobMaster, none replacing another.
func TestCheckpointTriggerReachesTheRunnerAndAcksTheJobMaster(t *testing.T) {
	c := newCluster(t, nil, nil, Config{})
	bin := c.jobBinary()
	c.activeSlot("a1", 0, testJobID)
	a := attempt("src", 0, 0)
	d := runnerTDD(testJobID, "a1", bin, "sleep", `{"duration":"1h"}`, a)
	d.JobInformation.ProgramArgs = []string{"-checkpoints"}
	if err := c.submit(testJobID, d); err != nil {
		t.Fatal(err)
	}
	c.statesWithin(a, 2, runnerWait) // INITIALIZING RUNNING
	ctx := context.Background()
	for id := int64(1); id <= 3; id++ {
		if _, err := c.client.TriggerCheckpoint(ctx, trigger(testJobID, a, id)); err != nil {
			t.Fatalf("trigger %d: %v", id, err)
		}
	}
	got := map[int64]bool{}
	for range 3 {
		ack := recvWithin(t, c.jm.acks, runnerWait, "AcknowledgeCheckpoint")
		if ack.JobId != testJobID || attemptKey(ack.Attempt) != attemptKey(a) || len(ack.Operators) != 1 ||
			string(ack.Operators[0].File.GetInline()) != "file:///chk/"+testJobID {
			t.Fatalf("ack %v", ack)
		}
		got[ack.CheckpointId] = true
	}
	if len(got) != 3 {
		t.Fatalf("acknowledged %v, want 1, 2 and 3", got)
	}
	if _, err := c.client.NotifyCheckpoint(ctx, &pb.NotifyCheckpointRequest{JobId: testJobID, Attempt: a, CheckpointId: 3, Complete: true}); err != nil {
		t.Fatal(err)
	}
	none(t, c.jm.declines, 50*time.Millisecond, "DeclineCheckpoint")
}

func TestCheckpointOfUnknownAttemptIsNotFound(t *testing.T) {
	c := newCluster(t, nil, nil, Config{})
	c.activeSlot("a1", 0, testJobID)
	a := attempt("src", 0, 0)
	if err := c.submit(testJobID, tdd(testJobID, "a1", "sleep", `{"duration":"1h"}`, a)); err != nil {
		t.Fatal(err)
	}
	c.states(a, 2)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		job  string
		a    *pb.ExecutionAttemptID
	}{
		{"unknown attempt", testJobID, attempt("src", 0, 1)},
		{"unknown job", testJobID2, a},
	} {
		if _, err := c.client.TriggerCheckpoint(ctx, trigger(tc.job, tc.a, 1)); status.Code(err) != codes.NotFound {
			t.Fatalf("%s: trigger answered %v", tc.name, err)
		}
		if _, err := c.client.NotifyCheckpoint(ctx, &pb.NotifyCheckpointRequest{JobId: tc.job, Attempt: tc.a, CheckpointId: 1}); status.Code(err) != codes.NotFound {
			t.Fatalf("%s: notify answered %v", tc.name, err)
		}
	}

	// A built-in task takes no checkpoints: its trigger is declined with
	// the reason, its notices are no-ops.
	if _, err := c.client.TriggerCheckpoint(ctx, trigger(testJobID, a, 4)); err != nil {
		t.Fatal(err)
	}
	dec := recv(t, c.jm.declines, "DeclineCheckpoint")
	if dec.CheckpointId != 4 || attemptKey(dec.Attempt) != attemptKey(a) || !strings.Contains(dec.Reason.GetMessage(), `built-in invokable "sleep"`) {
		t.Fatalf("decline %v", dec)
	}
	if _, err := c.client.NotifyCheckpoint(ctx, &pb.NotifyCheckpointRequest{JobId: testJobID, Attempt: a, CheckpointId: 4, Complete: true}); err != nil {
		t.Fatal(err)
	}

	// A cancelled attempt is gone for checkpoints.
	if _, err := c.client.CancelTask(ctx, &pb.CancelTaskRequest{JobId: testJobID, Attempt: a}); err != nil {
		t.Fatal(err)
	}
	c.states(a, 1)
	if _, err := c.client.TriggerCheckpoint(ctx, trigger(testJobID, a, 5)); status.Code(err) != codes.NotFound {
		t.Fatalf("trigger of a cancelled task: %v", err)
	}
}

// A runner of an SDK without checkpoints answers UNIMPLEMENTED; the
// TaskManager declines for it.
func TestRunnerWithoutCheckpointsDeclines(t *testing.T) {
	c := newCluster(t, nil, nil, Config{})
	bin := c.jobBinary()
	c.activeSlot("a1", 0, testJobID)
	a := attempt("src", 0, 0)
	if err := c.submit(testJobID, runnerTDD(testJobID, "a1", bin, "sleep", `{"duration":"1h"}`, a)); err != nil {
		t.Fatal(err)
	}
	c.statesWithin(a, 2, runnerWait)
	if _, err := c.client.TriggerCheckpoint(context.Background(), trigger(testJobID, a, 7)); err != nil {
		t.Fatal(err)
	}
	dec := recvWithin(t, c.jm.declines, runnerWait, "DeclineCheckpoint")
	if dec.JobId != testJobID || dec.CheckpointId != 7 || !strings.Contains(dec.Reason.GetMessage(), "takes no checkpoints") {
		t.Fatalf("decline %v", dec)
	}
}
