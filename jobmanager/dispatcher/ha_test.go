package dispatcher

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"

	"github.com/gofl/gofl/ha"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/resourcemanager"
	"github.com/gofl/gofl/rpc/restapi"
)

// idleRM accepts JobMasters and never offers a slot: jobs wait in CREATED.
type idleRM struct{}

func (idleRM) RegisterJobMaster(context.Context, string, string, resourcemanager.JobMasterGateway) error {
	return nil
}
func (idleRM) DeclareResourceRequirements(context.Context, string, int) error { return nil }
func (idleRM) DisconnectJobMaster(context.Context, string, error) error       { return nil }
func (idleRM) TaskManagers(context.Context) ([]restapi.TaskManagerInfo, error) {
	return nil, nil
}
func (idleRM) TaskManager(context.Context, string) (restapi.TaskManagerInfo, error) {
	return restapi.TaskManagerInfo{}, nil
}
func (idleRM) Overview(context.Context) (int, int, int, error) { return 0, 0, 0, nil }

func haJob(id string) *jobgraph.JobGraph {
	return &jobgraph.JobGraph{JobID: id, Name: id, Type: jobgraph.Streaming,
		Vertices: []*jobgraph.Vertex{{ID: "v", Name: "v", Parallelism: 1, Invokable: "noop", SlotSharingGroup: "default"}}}
}

func runDispatcher(t *testing.T, s ha.Services) *Dispatcher {
	t.Helper()
	d := New(Config{HA: &HA{Services: s}}, idleRM{}, zerolog.Nop())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return d
}

// A leader's Dispatcher stores every accepted JobGraph, refuses a job that
// reached a terminal state under any leader, and a new leader recovers
// exactly the stored jobs without a result, cleaning up the others.
func TestHAJobGraphsAndResults(t *testing.T) {
	ctx := context.Background()
	s := ha.NewNone(nil)
	defer s.Close()
	var session ha.SessionID
	d := runDispatcher(t, s)
	if _, err := d.SubmitJob(ctx, haJob(jobA)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.JobGraphStore().RecoverJobGraph(ctx, jobA); err != nil {
		t.Fatalf("job a was acknowledged but its graph is not stored: %v", err)
	}
	if err := s.JobResultStore().CreateDirtyResult(ctx, session, ha.JobResult{JobID: jobB, State: "FINISHED"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.SubmitJob(ctx, haJob(jobB)); !errors.Is(err, restapi.ErrDuplicateJob) {
		t.Fatalf("submitting a job with a result entry: %v, want ErrDuplicateJob", err)
	}
	// c ended under a former leader that could not clean up.
	b, _ := proto.Marshal(jobgraph.ToProto(haJob(jobC)))
	if err := s.JobGraphStore().PutJobGraph(ctx, session, jobC, b); err != nil {
		t.Fatal(err)
	}
	if err := s.JobResultStore().CreateDirtyResult(ctx, session, ha.JobResult{JobID: jobC, State: "CANCELED"}); err != nil {
		t.Fatal(err)
	}

	next := runDispatcher(t, s)
	recovered, err := next.RecoverJobs(ctx)
	if err != nil || !slices.Equal(recovered, []string{jobA}) {
		t.Fatalf("recovered %v (%v), want [a]", recovered, err)
	}
	if det, err := next.JobDetails(ctx, jobA); err != nil || det.ID != jobA {
		t.Errorf("recovered job a: %+v, %v", det, err)
	}
	if _, err := next.JobDetails(ctx, jobC); !errors.Is(err, restapi.ErrJobNotFound) {
		t.Errorf("terminal job c runs again: %v", err)
	}
	if ids, _ := s.JobGraphStore().JobIDs(ctx); !slices.Equal(ids, []string{jobA}) {
		t.Errorf("stored graphs %v, want [a]", ids)
	}
	if clean, _ := s.JobResultStore().HasCleanJobResultEntry(ctx, jobC); !clean {
		t.Error("job c's result was not marked clean")
	}

	// A job that ends gets a result entry and its graph goes.
	if err := next.CancelJob(ctx, jobA); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		clean, _ := s.JobResultStore().HasCleanJobResultEntry(ctx, jobA)
		ids, _ := s.JobGraphStore().JobIDs(ctx)
		if clean && len(ids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after cancelling job a: clean result entry %v, stored graphs %v", clean, ids)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Job IDs in Flink's syntax (32 hex digits), as the Dispatcher requires.
const (
	jobA = "0000000000000000000000000000000a"
	jobB = "0000000000000000000000000000000b"
	jobC = "0000000000000000000000000000000c"
)
