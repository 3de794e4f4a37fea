package dispatcher

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/rpc/pb"
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
