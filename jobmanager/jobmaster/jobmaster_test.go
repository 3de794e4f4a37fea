package jobmaster

import (
	"errors"
	"testing"

	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/jobmanager/failover"
	"github.com/gofl/gofl/rpc/pb"
)

func TestRemoteFailureKeepsClassification(t *testing.T) {
	for _, tc := range []struct {
		info *pb.FailureInfo
		want failover.FailureType
	}{
		{&pb.FailureInfo{Type: "recoverable", Message: "boom"}, failover.FailureRecoverable},
		{&pb.FailureInfo{Type: "", Message: "boom"}, failover.FailureRecoverable},
		{&pb.FailureInfo{Type: "non-recoverable", Message: "bad input"}, failover.FailureNonRecoverable},
		{&pb.FailureInfo{Type: "environment", Message: "disk"}, failover.FailureEnvironment},
		{&pb.FailureInfo{Type: "partition-data-missing", Message: "gone", MissingPartition: "r[0]@x"}, failover.FailurePartitionDataMissing},
	} {
		err := remoteFailure(tc.info)
		if got := failover.Classify(err); got != tc.want {
			t.Errorf("%+v classified %s, want %s", tc.info, got, tc.want)
		}
		var re *RemoteError
		if !errors.As(err, &re) || re.Message != tc.info.Message {
			t.Errorf("%+v: %v does not carry the remote message", tc.info, err)
		}
	}
	var pnf *failover.PartitionNotFoundError
	if err := remoteFailure(&pb.FailureInfo{Type: "partition-data-missing", MissingPartition: "r[3]@a"}); !errors.As(err, &pnf) || pnf.ResultPartitionID != "r[3]@a" {
		t.Fatalf("missing partition lost: %v", err)
	}
	if remoteFailure(nil) != nil {
		t.Fatal("no failure info must mean no cause")
	}
}

func TestVertexStatus(t *testing.T) {
	counts := func(kv ...any) map[string]int {
		m := map[string]int{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(eg.ExecutionState).String()] = kv[i+1].(int)
		}
		return m
	}
	for _, tc := range []struct {
		tasks map[string]int
		want  eg.ExecutionState
	}{
		{counts(eg.Created, 3), eg.Created},
		{counts(eg.Scheduled, 1, eg.Created, 2), eg.Scheduled},
		{counts(eg.Running, 1, eg.Deploying, 2), eg.Running},
		{counts(eg.Finished, 3), eg.Finished},
		{counts(eg.Finished, 2, eg.Running, 1), eg.Running},
		{counts(eg.Running, 2, eg.Failed, 1), eg.Failed},
		{counts(eg.Canceling, 1, eg.Canceled, 2), eg.Canceling},
		{counts(eg.Canceled, 3), eg.Canceled},
	} {
		if got := vertexStatus(tc.tasks, 3); got != tc.want.String() {
			t.Errorf("vertexStatus(%v) = %s, want %s", tc.tasks, got, tc.want)
		}
	}
}
