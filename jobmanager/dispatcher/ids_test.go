package dispatcher

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/rpc/restapi"
)

// Attack: a submission naming its job "../../../../tmp/x" was accepted,
// and every TaskManager then used it as a directory name. The Dispatcher
// refuses a malformed job ID before anything else sees it.
func TestSubmitRefusesMalformedJobID(t *testing.T) {
	d := New(Config{}, nil, zerolog.Nop()) // not running: an accepted job would time out
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, id := range []string{"../../../../tmp/x", "job1", strings.Repeat("A", 32)} {
		jg := &jobgraph.JobGraph{JobID: id, Name: "x", Type: jobgraph.Streaming,
			Vertices: []*jobgraph.Vertex{{ID: "src", Invokable: "noop", Parallelism: 1}}}
		_, err := d.SubmitJob(ctx, jg)
		var ve *jobgraph.ValidationError
		if !errors.As(err, &ve) || !strings.Contains(err.Error(), "job id") || !strings.Contains(err.Error(), "32 lowercase hexadecimal") {
			t.Errorf("job id %q: %v; want a validation error naming the job id and the rule", id, err)
		}
	}
}

// Calls on the JobMasterService with a malformed job ID are refused before
// any lookup.
func TestJobMasterServiceRefusesMalformedJobID(t *testing.T) {
	svc := New(Config{}, nil, zerolog.Nop()).JobMasterService()
	_, err := svc.UpdateTaskExecutionState(context.Background(), &pb.UpdateTaskExecutionStateRequest{JobId: "../x"})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "job_id") {
		t.Errorf("UpdateTaskExecutionState: %v; want InvalidArgument naming job_id", err)
	}
}

// A job's configuration cannot name staged delegation tokens itself:
// SubmitJob drops restapi.JobConfigDelegationTokensFile before PrepareJob,
// which gets the job ID and the tokens the client sent; its error fails
// the submission.
func TestSubmitPreparesJobTokens(t *testing.T) {
	errRefused := errors.New("test: refused")
	var seen map[string]string
	var seenID string
	d := New(Config{PrepareJob: func(_ context.Context, jg *jobgraph.JobGraph) error {
		seen, seenID = maps.Clone(jg.Config), jg.JobID
		return errRefused
	}}, nil, zerolog.Nop())
	jg := &jobgraph.JobGraph{Name: "x", Type: jobgraph.Streaming, Vertices: []*jobgraph.Vertex{{ID: "src", Invokable: "noop", Parallelism: 1}},
		Config: map[string]string{restapi.JobConfigDelegationTokens: `[{"token":"t"}]`, restapi.JobConfigDelegationTokensFile: "file:///other/cluster/tokens"}}
	if _, err := d.SubmitJob(context.Background(), jg); !errors.Is(err, errRefused) {
		t.Fatalf("SubmitJob = %v, want PrepareJob's error", err)
	}
	if _, ok := seen[restapi.JobConfigDelegationTokensFile]; ok || seen[restapi.JobConfigDelegationTokens] == "" || jobgraph.ValidateJobID(seenID) != nil || seenID == "" {
		t.Errorf("PrepareJob saw job %q with %v; want an ID, the tokens and no token file", seenID, seen)
	}
}
