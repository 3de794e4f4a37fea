package jobmaster

import (
	"context"
	"io"
	"testing"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/internal/clock"
	"github.com/gofl/gofl/internal/mailbox/mailboxtest"
	"github.com/gofl/gofl/internal/version"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/jobmanager/scheduler"
	"github.com/gofl/gofl/rpc/pb"
)

// With an Executor and a fake clock a JobMaster runs without goroutines of
// its own: Start, then the driver runs its turns and moves its time.
func TestDrivenByAnExecutor(t *testing.T) {
	exec := &mailboxtest.StepExecutor{}
	clk := clock.NewFake(t0)
	tm := &fakeTM{}
	cfg := testConfig(clk, 0)
	cfg.Executor = exec
	cfg.DialTaskManager = func(string) (pb.TaskExecutorServiceClient, io.Closer, error) { return tm, tm, nil }
	rm := &fakeRM{}
	jm, err := New(cfg, job("driven", vertex("a", 2)), rm, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	jm.Start()
	exec.Drain()
	if _, d, _ := rm.snapshot(); len(d) != 1 || d[0] != 2 {
		t.Fatalf("declared %v, want [2]", d)
	}
	ctx := context.Background()
	if _, err := jm.RegisterTaskManager(ctx, &pb.RegisterTaskManagerRequest{ProtocolVersion: version.ProtocolVersion,
		Location: &pb.TaskManagerLocation{ResourceId: "tm1", RpcAddress: "tm1"}}); err != nil {
		t.Fatal(err)
	}
	resp, err := jm.OfferSlots(ctx, &pb.OfferSlotsRequest{ResourceId: "tm1", Slots: []*pb.SlotOffer{{AllocationId: "s0"}, {AllocationId: "s1", SlotIndex: 1}}})
	if err != nil || len(resp.Accepted) != 2 {
		t.Fatalf("offer: %v, %v", resp, err)
	}
	exec.Drain()
	if n := len(tm.log("SubmitTask")); n != 2 {
		t.Fatalf("%d deployments", n)
	}
	clk.Advance(hbInterval) // a heartbeat round: the TaskManager runs both
	exec.Drain()
	if tm.heartbeatCount() != 1 {
		t.Fatalf("%d heartbeats", tm.heartbeatCount())
	}
	g := jm.sched.Graph()
	for i := 0; i < 2; i++ {
		a := g.AttemptID(g.JobVertex("a").VertexAt(i))
		if _, err := jm.UpdateTaskExecutionState(ctx, &pb.UpdateTaskExecutionStateRequest{Attempt: attemptProto(a), State: eg.Finished.String()}); err != nil {
			t.Fatal(err)
		}
	}
	exec.Drain()
	select {
	case <-jm.Done():
	default:
		t.Fatal("not done once the job finished and its calls went through")
	}
	if r := jm.Result(); r.Status != scheduler.JobFinished {
		t.Fatalf("result %+v", r)
	}
	if got := calls(tm.log("DisconnectJobManager")); len(got) != 1 {
		t.Fatalf("DisconnectJobManager calls %v", got)
	}
}
