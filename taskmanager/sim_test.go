package taskmanager

import (
	"context"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	"github.com/gofl/gofl/internal/clock"
	"github.com/gofl/gofl/internal/mailbox/mailboxtest"
	"github.com/gofl/gofl/rpc/pb"
)

// In-memory clients that call the fakes' handlers directly.
type rmClient struct {
	pb.ResourceManagerServiceClient
	srv *fakeRM
}

func (c rmClient) RegisterTaskExecutor(ctx context.Context, req *pb.RegisterTaskExecutorRequest, _ ...grpc.CallOption) (*pb.RegisterTaskExecutorResponse, error) {
	return c.srv.RegisterTaskExecutor(ctx, req)
}
func (c rmClient) SendSlotReport(ctx context.Context, req *pb.SendSlotReportRequest, _ ...grpc.CallOption) (*pb.Ack, error) {
	return c.srv.SendSlotReport(ctx, req)
}

type jmClient struct {
	pb.JobMasterServiceClient
	srv *fakeJM
}

func (c jmClient) RegisterTaskManager(ctx context.Context, req *pb.RegisterTaskManagerRequest, _ ...grpc.CallOption) (*pb.RegisterTaskManagerResponse, error) {
	return c.srv.RegisterTaskManager(ctx, req)
}
func (c jmClient) OfferSlots(ctx context.Context, req *pb.OfferSlotsRequest, _ ...grpc.CallOption) (*pb.OfferSlotsResponse, error) {
	return c.srv.OfferSlots(ctx, req)
}
func (c jmClient) UpdateTaskExecutionState(ctx context.Context, req *pb.UpdateTaskExecutionStateRequest, _ ...grpc.CallOption) (*pb.Ack, error) {
	return c.srv.UpdateTaskExecutionState(ctx, req)
}

// simTasks is a TaskRunner whose tasks end when the test says.
type simTasks struct {
	started []TaskContext
	names   []string
}

func (s *simTasks) DataAddress(jobID string) (string, error) { return "data-" + jobID + ":1", nil }
func (s *simTasks) StartTask(req *pb.SubmitTaskRequest, tc TaskContext) RunningTask {
	s.started = append(s.started, tc)
	s.names = append(s.names, attemptKey(req.Tdd.Attempt))
	return simTask{}
}
func (s *simTasks) ReleasePartitions(*pb.ReleasePartitionsRequest) {}
func (s *simTasks) ReleaseJob(string)                              {}
func (s *simTasks) Close()                                         {}

type simTask struct{}

func (simTask) Cancel()                    {}
func (simTask) Metrics() *pb.TaskIOMetrics { return nil }

// TestRunsWithoutNetworkOrGoroutines drives a TaskExecutor the way the
// fault simulator will: no listener, in-memory peers, simulated tasks, a
// manual clock, and every turn run by the test.
func TestRunsWithoutNetworkOrGoroutines(t *testing.T) {
	exec, clk, rm, jm, tasks := &mailboxtest.StepExecutor{}, clock.NewFake(time.Unix(1000, 0)), newFakeRM(), newFakeJM(), &simTasks{}
	te, err := New(Config{
		ResourceID: "tm-sim", NumberOfSlots: 1, RPCBindAddress: "tm-sim:1", ResourceManagerAddress: "rm:1",
		NoRPCServer: true, Clock: clk, Executor: exec, Rand: rand.New(rand.NewPCG(7, 7)),
		DialResourceManager: func(string) (pb.ResourceManagerServiceClient, io.Closer, error) {
			return rmClient{srv: rm}, nopCloser{}, nil
		},
		DialJobMaster: func(string) (pb.JobMasterServiceClient, io.Closer, error) {
			return jmClient{srv: jm}, nopCloser{}, nil
		},
		TaskRunner: func(TaskRunnerHost) TaskRunner { return tasks },
	}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if te.Address() != "tm-sim:1" {
		t.Fatalf("address %s", te.Address())
	}
	if err := te.Start(); err != nil {
		t.Fatal(err)
	}
	exec.Drain()
	if r := recv(t, rm.registers, "registration"); r.Location.RpcAddress != "tm-sim:1" {
		t.Fatalf("registration %v", r)
	}
	recv(t, rm.reports, "slot report")

	svc, ctx := te.Service(), context.Background()
	if _, err := svc.RequestSlot(ctx, &pb.RequestSlotRequest{AllocationId: "a1", JobId: testJobID, JobMasterAddress: "jm:1", ResourceManagerId: "rm-1"}); err != nil {
		t.Fatal(err)
	}
	exec.Drain()
	if r := recv(t, jm.registers, "RegisterTaskManager"); r.Location.DataAddress != "data-"+testJobID+":1" {
		t.Fatalf("RegisterTaskManager %v", r)
	}
	recv(t, jm.offers, "offer")
	a := attempt("v", 0, 0)
	if _, err := svc.SubmitTask(ctx, &pb.SubmitTaskRequest{JobId: testJobID, JobMasterId: "jm-1", Tdd: tdd(testJobID, "a1", "anything", "", a)}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tasks.names, []string{attemptKey(a)}) {
		t.Fatalf("started %v", tasks.names)
	}
	tc := tasks.started[0]
	tc.State(StateInitializing)
	tc.State(StateRunning)
	tc.Ended(TaskResult{})
	exec.Drain()
	var got []string
	for len(jm.updates) > 0 {
		got = append(got, (<-jm.updates).State)
	}
	if !slices.Equal(got, []string{StateInitializing, StateRunning, StateFinished}) {
		t.Fatalf("updates %v", got)
	}
	// A crashed TaskExecutor is one never driven again: nothing of it runs
	// on its own (goleak checks at the end of the package's tests).
}
