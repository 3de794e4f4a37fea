package taskmanager

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/gofl/gofl/internal/ids"
	"github.com/gofl/gofl/rpc/pb"
)

// FuzzCheckSubmitTask decodes arbitrary SubmitTaskRequests: the check never
// panics, and a request it accepts names a job and vertex that stay single
// path elements under the work dir.
func FuzzCheckSubmitTask(f *testing.F) {
	for _, req := range []*pb.SubmitTaskRequest{
		{JobId: testJobID, Tdd: tdd(testJobID, "a1", "noop", "", attempt("op", 0, 0))},
		{JobId: "../../../../tmp/x", Tdd: tdd("../../../../tmp/x", "a1", "noop", "", attempt("..", 0, 0))},
	} {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	base := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		var req pb.SubmitTaskRequest
		if proto.Unmarshal(b, &req) != nil || checkSubmitTask(&req) != nil {
			return
		}
		if _, err := ids.Join(base, "jobs", req.JobId); err != nil {
			t.Fatalf("accepted job id %q does not join: %v", req.JobId, err)
		}
		if _, err := ids.Join(base, "localState", req.JobId, req.Tdd.Attempt.JobVertexId); err != nil {
			t.Fatalf("accepted vertex id %q does not join: %v", req.Tdd.Attempt.JobVertexId, err)
		}
	})
}
