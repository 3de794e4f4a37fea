package jobmaster

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gofl/gofl/jobmanager/failover"
	"github.com/gofl/gofl/rpc/pb"
)

func TestRecordAccumulatorsKeepsTheNewestAttemptAndBoundsTheJob(t *testing.T) {
	jm := &JobMaster{accumulators: map[subtaskKey]attemptAccumulators{}}
	at := func(subtask, attempt int32) *pb.ExecutionAttemptID {
		return &pb.ExecutionAttemptID{Graph: 7, JobVertexId: "v", SubtaskIndex: subtask, AttemptNumber: attempt}
	}
	record := func(a *pb.ExecutionAttemptID, v []byte) error {
		return jm.recordAccumulators(attemptID(a), map[string][]byte{"sink": v})
	}
	if err := record(at(0, 1), []byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := record(at(0, 0), []byte("stale attempt")); err != nil {
		t.Fatal(err)
	}
	if got := jm.accumulators[subtaskKey{vertex: "v", subtask: 0}]; got.attempt.Attempt != 1 || !bytes.Equal(got.values["sink"], []byte("new")) {
		t.Fatalf("an older attempt replaced the newer one: %+v", got)
	}
	if jm.accumulatorBytes != len("sink")+len("new") {
		t.Fatalf("accumulatorBytes = %d", jm.accumulatorBytes)
	}

	// Filling the job up to the bound is fine; one byte more fails the
	// task as non-recoverable and keeps nothing of it.
	room := MaxJobAccumulatorBytes - jm.accumulatorBytes - len("sink")
	if err := record(at(1, 0), make([]byte, room)); err != nil {
		t.Fatal(err)
	}
	err := record(at(2, 0), []byte("x"))
	if !errors.Is(err, ErrAccumulatorsTooLarge) || failover.Classify(err) != failover.FailureNonRecoverable {
		t.Fatalf("over the bound: %v (%v)", err, failover.Classify(err))
	}
	if _, kept := jm.accumulators[subtaskKey{vertex: "v", subtask: 2}]; kept {
		t.Fatal("the rejected results were kept")
	}
	// A newer attempt of a subtask replaces its bytes instead of adding.
	if err := record(at(1, 1), make([]byte, room)); err != nil {
		t.Fatalf("replacing a subtask's results counted them twice: %v", err)
	}
}
