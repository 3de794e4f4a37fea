package jobmaster

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/clock"
	"github.com/gofl/gofl/jobgraph"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/jobmanager/scheduler"
	"github.com/gofl/gofl/rpc/pb"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func calls(cs []call) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return out
}

// RegisterJobMaster is retried with backoff on the JobMaster's clock, not
// at a fixed pace; the job starts once it went through.
func TestRegistrationRetriesWithBackoff(t *testing.T) {
	clk := clock.NewFake(t0)
	rm := &fakeRM{registerErrs: []error{errors.New("busy"), errors.New("busy")}}
	h := start(t, testConfig(clk, 0), job("reg", vertex("a", 2)), rm)
	waitFor(t, "the first attempt", func() bool { n, _, _ := rm.snapshot(); return n == 1 })
	waitFor(t, "the retry timer", func() bool { return clk.Pending() == 2 }) // heartbeat + retry
	if n, _, _ := rm.snapshot(); n != 1 {
		t.Fatalf("%d registrations before the backoff passed", n)
	}
	h.advance(100 * time.Millisecond) // first pause: 100 ms
	waitFor(t, "the second attempt", func() bool { n, _, _ := rm.snapshot(); return n == 2 })
	waitFor(t, "the next retry timer", func() bool { return clk.Pending() == 2 })
	h.advance(100 * time.Millisecond) // the second pause is 200 ms
	if n, _, _ := rm.snapshot(); n != 2 {
		t.Fatalf("%d registrations 100 ms into a 200 ms pause", n)
	}
	h.advance(100 * time.Millisecond)
	waitFor(t, "the job to start and declare 2 slots", func() bool {
		n, d, _ := rm.snapshot()
		return n == 3 && slices.Equal(d, []int{2})
	})
}

// A declaration the ResourceManager rejects for an unknown JobMaster (it
// restarted, or dropped the JobMaster) makes the JobMaster register again
// and declare its newest requirement.
func TestUnknownJobMasterRegistersAgainAndDeclares(t *testing.T) {
	rm := &fakeRM{forget: true}
	start(t, testConfig(clock.NewFake(t0), 0), job("again", vertex("a", 3)), rm)
	waitFor(t, "the requirement after re-registering", func() bool {
		n, d, _ := rm.snapshot()
		return n == 2 && slices.Equal(d, []int{3})
	})
}

// A deployment the TaskManager rejects fails the attempt and cancels it
// through the same outbox, right behind the SubmitTask.
func TestRejectedDeploymentIsCancelled(t *testing.T) {
	h := start(t, testConfig(clock.NewFake(t0), 0), job("reject", vertex("a", 1)), &fakeRM{})
	h.tm("tm1").submitErr = status.Error(codes.FailedPrecondition, "slot tm1/0 is not allocated to the job")
	h.register("tm1", 1)
	a := h.attempt("a", 0)
	waitFor(t, "the cancel", func() bool { return len(h.tm("tm1").log("CancelTask")) > 0 })
	got := calls(h.tm("tm1").log("SubmitTask", "CancelTask"))
	if want := []string{"SubmitTask " + a.String(), "CancelTask " + a.String()}; !slices.Equal(got, want) {
		t.Fatalf("TaskManager calls %q, want %q", got, want)
	}
}

// A deployment without an answer within the RPC timeout (retries
// included) fails too, and is cancelled: the TaskManager may have started
// it.
func TestUnansweredDeploymentIsCancelled(t *testing.T) {
	cfg := testConfig(nil, 1)
	cfg.RPCTimeout = 300 * time.Millisecond
	h := start(t, cfg, job("silent", vertex("a", 1)), &fakeRM{})
	h.tm("tm1").submitBlocks = true
	h.register("tm1", 1)
	a := h.attempt("a", 0)
	waitFor(t, "the cancel", func() bool { return len(h.tm("tm1").log("CancelTask")) > 0 })
	// Tried until the deadline (a retry fits), then cancelled.
	got := calls(h.tm("tm1").log("SubmitTask", "CancelTask"))
	i := slices.Index(got, "CancelTask "+a.String())
	if i < 1 || slices.ContainsFunc(got[:i], func(c string) bool { return c != "SubmitTask "+a.String() }) {
		t.Fatalf("TaskManager calls %q, want SubmitTask %s until the cancel", got, a)
	}
	// The restart waits until the TaskManager said the attempt does not
	// run there; the fake says so.
	waitFor(t, "the restarted attempt", func() bool { n, _ := h.state("a", 0); return n == 1 })
}

// Heartbeats run on the JobMaster's clock, one round per interval, with at
// most one in flight per TaskManager.
func TestHeartbeatsOnTheClockOneInFlight(t *testing.T) {
	clk := clock.NewFake(t0)
	h := start(t, testConfig(clk, 0), job("hb", vertex("a", 1)), &fakeRM{})
	tm := h.tm("tm1")
	tm.hbBlock = make(chan struct{})
	h.register("tm1", 1)
	h.onMailbox(func() {})
	if n := tm.heartbeatCount(); n != 0 {
		t.Fatalf("%d heartbeats before the first interval", n)
	}
	h.advance(hbInterval)
	waitFor(t, "the first heartbeat", func() bool { return tm.heartbeatCount() == 1 })
	h.advance(hbInterval)
	h.advance(hbInterval)
	if n := tm.heartbeatCount(); n != 1 {
		t.Fatalf("%d heartbeats in flight, want 1", n)
	}
	close(tm.hbBlock)
	h.heartbeatHandled("tm1")
	h.advance(hbInterval)
	waitFor(t, "the next round", func() bool { return tm.heartbeatCount() == 2 })
}

// A TaskManager that stops answering heartbeats is lost after the
// heartbeat timeout of the JobMaster's clock; its tasks fail.
func TestSilentTaskManagerIsLost(t *testing.T) {
	clk := clock.NewFake(t0)
	h := start(t, testConfig(clk, 0), job("silent-tm", vertex("a", 1)), &fakeRM{})
	h.tm("tm1").hbBlock = make(chan struct{}) // never answers
	h.register("tm1", 1)
	h.idle("tm1")
	for i := 0; i < 5; i++ {
		h.advance(hbInterval)
	}
	if st := h.status(); st != scheduler.JobRunning {
		t.Fatalf("job %s within the heartbeat timeout", st)
	}
	h.advance(hbInterval)
	waitFor(t, "the job to fail", func() bool { return h.status() == scheduler.JobFailed })
	<-h.jm.Done()
	if r := h.jm.Result(); !errors.Is(r.Cause, scheduler.ErrTaskManagerLost) {
		t.Fatalf("result %+v, want a TaskManager-lost cause", r)
	}
}

// Every heartbeat answer is reconciled: an attempt the TaskManager runs
// that the job does not know is cancelled, and an acknowledged attempt it
// no longer runs fails once missing for the grace period.
func TestHeartbeatReconciliation(t *testing.T) {
	clk := clock.NewFake(t0)
	cfg := testConfig(clk, 1)
	cfg.Scheduler.MissingTaskGrace = 2 * hbInterval
	h := start(t, cfg, job("reconcile", vertex("a", 1)), &fakeRM{})
	tm := h.tm("tm1")
	stranger := &pb.ExecutionAttemptID{Graph: 99, JobVertexId: "a", SubtaskIndex: 0}
	tm.heartbeat = func() (*pb.TaskManagerHeartbeatResponse, error) {
		return &pb.TaskManagerHeartbeatResponse{Running: []*pb.ExecutionAttemptID{stranger}}, nil
	}
	h.register("tm1", 1)
	h.idle("tm1") // deployed and acknowledged
	a := h.attempt("a", 0)
	if err := h.report(a, eg.Running); err != nil {
		t.Fatal(err)
	}
	h.advance(hbInterval) // missing since 10 s; the stranger is cancelled
	h.heartbeatHandled("tm1")
	waitFor(t, "the stranger's cancel", func() bool {
		return slices.Contains(calls(tm.log("CancelTask")), "CancelTask "+attemptID(stranger).String())
	})
	h.advance(hbInterval) // missing for 10 s
	h.heartbeatHandled("tm1")
	if n, st := h.state("a", 0); n != 0 || st != eg.Running {
		t.Fatalf("attempt %d %s within the grace period", n, st)
	}
	h.advance(hbInterval) // missing for 20 s: failed, restarted
	h.heartbeatHandled("tm1")
	waitFor(t, "the new attempt's deployment", func() bool {
		return slices.Contains(calls(tm.log("SubmitTask")), "SubmitTask "+h.attempt("a", 0).String()) && h.attempt("a", 0).Attempt == 1
	})
	ex := h.jm.sched // read the history on the mailbox
	var cause error
	h.onMailbox(func() { cause = ex.ExceptionHistory()[0].Cause })
	if !errors.Is(cause, scheduler.ErrTaskMissing) || !strings.Contains(cause.Error(), "TaskManager tm1 does not run "+a.String()) {
		t.Fatalf("failure %v", cause)
	}
}

// A TaskManager reporting lost partitions (its job runner died) reruns
// their producer with the consumers at once.
func TestReportPartitionsLostRerunsTheProducer(t *testing.T) {
	jg := job("lost", vertex("a", 1), vertex("b", 1))
	jg.Type = jobgraph.Batch
	jg.Edges = []*jobgraph.Edge{{Source: "a", Target: "b", Distribution: jobgraph.AllToAll, PartitionType: jobgraph.Blocking}}
	h := start(t, testConfig(clock.NewFake(t0), 1), jg, &fakeRM{})
	h.register("tm1", 1)
	a := h.attempt("a", 0)
	if err := h.report(a, eg.Finished); err != nil {
		t.Fatal(err)
	}
	b := h.attempt("b", 0)
	waitFor(t, "b's deployment", func() bool { return slices.Contains(calls(h.tm("tm1").log("SubmitTask")), "SubmitTask "+b.String()) })
	if err := h.report(b, eg.Running); err != nil {
		t.Fatal(err)
	}
	lost := &pb.ReportPartitionsLostRequest{JobId: "lost", ResourceId: "tm1", Cause: "job runner exited",
		Partitions: []*pb.ResultPartitionIDProto{partitionProto(eg.ResultPartitionID{Result: jg.ResultIDOf(0), Partition: 0, Producer: a})}}
	for i := 0; i < 2; i++ { // idempotent
		if _, err := h.jm.ReportPartitionsLost(context.Background(), lost); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "b's cancel", func() bool { return slices.Contains(calls(h.tm("tm1").log("CancelTask")), "CancelTask "+b.String()) })
	if err := h.report(b, eg.Canceled); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a's rerun", func() bool { return h.attempt("a", 0).Attempt == 1 })
	if n, _ := h.state("b", 0); n != 1 {
		t.Fatalf("b at attempt %d, want 1", n)
	}
}

// The ResourceManager's notice that a TaskManager's worker died drops it
// at once.
func TestNotifyTaskManagerLostDropsItNow(t *testing.T) {
	h := start(t, testConfig(clock.NewFake(t0), 0), job("gone", vertex("a", 1)), &fakeRM{})
	h.register("tm1", 1)
	h.jm.NotifyTaskManagerLost("tm1", errors.New("worker exited with code 137"))
	waitFor(t, "the job to fail", func() bool { return h.status() == scheduler.JobFailed })
	<-h.jm.Done()
	if r := h.jm.Result(); !errors.Is(r.Cause, scheduler.ErrTaskManagerLost) || !strings.Contains(r.Cause.Error(), "code 137") {
		t.Fatalf("result %+v", r)
	}
}

// A job that ended stops its JobMaster once its last calls are through, or
// after the RPC timeout when a TaskManager does not answer.
func TestEndedJobStopsDespiteAnUnreachableTaskManager(t *testing.T) {
	clk := clock.NewFake(t0)
	rm := &fakeRM{}
	h := start(t, testConfig(clk, 0), job("end", vertex("a", 1)), rm)
	h.tm("tm1").freeSlotErr = status.Error(codes.Unavailable, "connection refused")
	h.register("tm1", 1)
	h.idle("tm1")
	if err := h.report(h.attempt("a", 0), eg.Finished); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "FreeSlot", func() bool { return len(h.tm("tm1").log("FreeSlot")) > 0 })
	waitFor(t, "the ResourceManager to be told", func() bool { _, _, d := rm.snapshot(); return d })
	select {
	case <-h.jm.Done():
		t.Fatal("stopped with a FreeSlot still being retried")
	default:
	}
	clk.Advance(5 * time.Second) // Config.RPCTimeout
	select {
	case <-h.jm.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the JobMaster did not stop")
	}
	if r := h.jm.Result(); r.Status != scheduler.JobFinished {
		t.Fatalf("result %+v", r)
	}
}

// A deployment to a TaskManager that is not connected fails at once; the
// outcome is stepped after the Ready that deployed it, never from inside
// it.
func TestDeploymentToAMissingTaskManagerDoesNotReenterStep(t *testing.T) {
	h := start(t, testConfig(clock.NewFake(t0), 1), job("ghost", vertex("a", 1)), &fakeRM{})
	waitFor(t, "scheduling", func() bool { _, d, _ := h.rm.snapshot(); return len(d) > 0 })
	h.onMailbox(func() {
		// Slots of a TaskManager the JobMaster does not know: the scheduler
		// deploys there, the JobMaster fails the deployments.
		h.jm.step(scheduler.SlotsOffered{TaskManager: eg.TaskManagerLocation{ID: "ghost"},
			Slots: []scheduler.SlotOffer{{Allocation: "ghost/0"}}})
	})
	waitFor(t, "the job to fail", func() bool { return h.status() == scheduler.JobFailed })
	<-h.jm.Done()
	if r := h.jm.Result(); !strings.Contains(r.Cause.Error(), "TaskManager ghost is not connected") {
		t.Fatalf("result %+v", r)
	}
}
