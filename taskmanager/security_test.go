package taskmanager

import (
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/rpc/pb"
)

// testJobID is a well-formed job ID (32 hex characters, as Flink's JobID).
const (
	testJobID  = "0123456789abcdef0123456789abcdef"
	testJobID2 = "fedcba9876543210fedcba9876543210"
)

// Attack: a job ID "../../escaped" used to make the TaskManager create the
// job's runner directory (socket, log) outside its work dir. Every
// request naming such a job is refused with InvalidArgument now, and
// nothing is created outside the work dir.
func TestTraversalJobIDIsRefused(t *testing.T) {
	root := t.TempDir()
	work := filepath.Join(root, "a", "work")
	c := newCluster(t, nil, nil, Config{ResourceID: "tm-a", WorkDir: work})
	bin := c.jobBinary()
	const evil = "../../../escaped"

	err := c.requestSlot("a1", 0, evil)
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("RequestSlot of job %q: %v; want InvalidArgument", evil, err)
	}
	a := attempt("op", 0, 0)
	err = c.submit(evil, runnerTDD(evil, "a1", bin, "noop", "", a))
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("SubmitTask of job %q: %v; want InvalidArgument", evil, err)
	}
	if err == nil {
		c.statesWithin(a, 2, runnerWait) // let a runner start if it would
	}
	if _, err := os.Stat(filepath.Join(root, "escaped")); !os.IsNotExist(err) {
		t.Errorf("the TaskManager created %s outside its work dir %s (stat: %v)", filepath.Join(root, "escaped"), work, err)
	}
}

// A TDD whose parts disagree with the request or break the syntax is
// refused before anything runs, and the error names the field.
func TestMalformedDeploymentIsRefused(t *testing.T) {
	c := newCluster(t, nil, nil, Config{ResourceID: "tm-a"})
	c.activeSlot("a1", 0, testJobID)
	for name, mutate := range map[string]func(d *pb.TaskDeploymentDescriptor){
		"vertex id with a slash":  func(d *pb.TaskDeploymentDescriptor) { d.Attempt.JobVertexId = "a/../b" },
		"negative subtask":        func(d *pb.TaskDeploymentDescriptor) { d.Attempt.SubtaskIndex = -1 },
		"bad blob key":            func(d *pb.TaskDeploymentDescriptor) { d.JobInformation.JobBinaryKey = "sha256:../../x" },
		"other job's information": func(d *pb.TaskDeploymentDescriptor) { d.JobInformation.JobId = "ffffffffffffffffffffffffffffffff" },
		"no attempt":              func(d *pb.TaskDeploymentDescriptor) { d.Attempt = nil },
	} {
		d := tdd(testJobID, "a1", "noop", "", attempt("op", 0, 0))
		mutate(d)
		if err := c.submit(testJobID, d); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: SubmitTask: %v; want InvalidArgument", name, err)
		}
	}
}
