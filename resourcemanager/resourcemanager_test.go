package resourcemanager

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/providers"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/rpc/restapi"
)

func wantCode(t *testing.T, err error, code codes.Code, mentions ...string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("error = %v, want code %s", err, code)
	}
	for _, m := range mentions {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("error %q does not mention %q", err, m)
		}
	}
}

func TestRegisterTaskExecutor(t *testing.T) {
	t.Run("ok", func(t *testing.T) {
		c := startRM(t, testConfig())
		te := c.startTE("tm1", 2)
		resp := te.register(t, c)
		if resp.ResourceManagerId != c.rm.ID() || resp.HeartbeatIntervalMs != 1000 || resp.HeartbeatTimeoutMs != 3000 {
			t.Fatalf("response = %v; want RM id %s, 1000/3000 ms", resp, c.rm.ID())
		}
		if ids := c.taskManagerIDs(); !slices.Equal(ids, []string{"tm1"}) {
			t.Fatalf("TaskManagers = %v", ids)
		}
		c.advance(2 * time.Second)
		if n := te.heartbeatCount(); n != 2 {
			t.Fatalf("%d heartbeats in two intervals, want 2", n)
		}
	})
	t.Run("wrong protocol version", func(t *testing.T) {
		c := startRM(t, testConfig())
		req := c.startTE("tm1", 1).registration()
		req.ProtocolVersion = 2
		_, err := c.client.RegisterTaskExecutor(ctxT(t), req)
		wantCode(t, err, codes.FailedPrecondition, "protocol 2", "protocol 1")
		if ids := c.taskManagerIDs(); len(ids) != 0 {
			t.Fatalf("registered anyway: %v", ids)
		}
	})
	t.Run("invalid input", func(t *testing.T) {
		c := startRM(t, testConfig())
		te := c.startTE("tm1", 1)
		for _, tc := range []struct {
			name    string
			edit    func(*pb.RegisterTaskExecutorRequest)
			mention string
		}{
			{"no location", func(r *pb.RegisterTaskExecutorRequest) { r.Location = nil }, "resource_id"},
			{"no resource ID", func(r *pb.RegisterTaskExecutorRequest) { r.Location.ResourceId = "" }, "resource_id"},
			{"no RPC address", func(r *pb.RegisterTaskExecutorRequest) { r.Location.RpcAddress = "" }, "rpc_address"},
			{"no slots", func(r *pb.RegisterTaskExecutorRequest) { r.NumberOfSlots = 0 }, "number_of_slots"},
			{"negative slots", func(r *pb.RegisterTaskExecutorRequest) { r.NumberOfSlots = -3 }, "number_of_slots"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				req := te.registration()
				tc.edit(req)
				_, err := c.client.RegisterTaskExecutor(ctxT(t), req)
				wantCode(t, err, codes.InvalidArgument, tc.mention)
			})
		}
		if ids := c.taskManagerIDs(); len(ids) != 0 {
			t.Fatalf("registered anyway: %v", ids)
		}
	})
	t.Run("undialable address", func(t *testing.T) {
		c := startRM(t, testConfig())
		req := c.startTE("tm1", 1).registration()
		req.Location.RpcAddress = "dns://%%bad"
		_, err := c.client.RegisterTaskExecutor(ctxT(t), req)
		wantCode(t, err, codes.InvalidArgument, "rpc_address")
	})
	t.Run("duplicate resource ID while alive", func(t *testing.T) {
		c := startRM(t, testConfig())
		first := c.startTE("tm1", 1)
		first.register(t, c)
		second := c.startTE("tm1", 1) // another process claiming the same resource ID
		_, err := c.client.RegisterTaskExecutor(ctxT(t), second.registration())
		wantCode(t, err, codes.AlreadyExists, "tm1", first.addr)
		tm, err := c.rm.TaskManager(ctxT(t), "tm1")
		if err != nil || tm.Path != first.addr {
			t.Fatalf("TaskManager = %+v, %v; want the first registration kept", tm, err)
		}
	})
	t.Run("a new instance on the same address replaces the old one", func(t *testing.T) {
		c := startRM(t, testConfig())
		old := c.startTE("tm1", 1)
		old.register(t, c)
		req := old.registration()
		req.InstanceId = "restarted"
		req.NumberOfSlots = 1
		if _, err := c.client.RegisterTaskExecutor(ctxT(t), req); err != nil {
			t.Fatalf("re-registration of a restarted process on the same address: %v", err)
		}
		if ids := c.taskManagerIDs(); !slices.Equal(ids, []string{"tm1"}) {
			t.Fatalf("TaskManagers = %v", ids)
		}
		if !strings.Contains(c.logs.String(), "restarted as instance restarted") {
			t.Error("the log does not say why the old registration was replaced")
		}
	})
	t.Run("same instance is idempotent", func(t *testing.T) {
		c := startRM(t, testConfig())
		te := c.startTE("tm1", 2)
		te.register(t, c)
		te.register(t, c)
		if _, err := c.client.RegisterTaskExecutor(ctxT(t), te.registration()); err != nil {
			t.Fatal(err)
		}
		if ids := c.taskManagerIDs(); !slices.Equal(ids, []string{"tm1"}) {
			t.Fatalf("TaskManagers = %v", ids)
		}
		if free := c.freeSlots(); free != 2 {
			t.Fatalf("free slots = %d, want 2 (re-registration must keep the slots)", free)
		}
	})
	t.Run("stale registration is replaced", func(t *testing.T) {
		cfg := testConfig()
		cfg.HeartbeatInterval = time.Hour // no tick: the registration itself must notice the old one is stale
		c := startRM(t, cfg)
		old := c.startTE("tm1", 1)
		old.register(t, c)
		c.advance(cfg.HeartbeatTimeout + time.Millisecond)
		restarted := c.startTE("tm1", 3)
		restarted.register(t, c)
		tm, err := c.rm.TaskManager(ctxT(t), "tm1")
		if err != nil || tm.Path != restarted.addr || tm.SlotsNumber != 3 {
			t.Fatalf("TaskManager = %+v, %v; want the restarted one at %s with 3 slots", tm, err, restarted.addr)
		}
		if !strings.Contains(c.logs.String(), "heartbeat timeout") {
			t.Error("the log does not say why the old registration was removed")
		}
	})
}

func TestSlotMatchingTwoJobs(t *testing.T) {
	c := startRM(t, testConfig())
	tm1, tm2 := c.startTE("tm1", 2), c.startTE("tm2", 2)
	tm1.register(t, c)
	tm2.register(t, c)
	c.job("a", 3)
	c.job("b", 1)
	if a, b := tm1.grantedTo("a")+tm2.grantedTo("a"), tm1.grantedTo("b")+tm2.grantedTo("b"); a != 3 || b != 1 {
		t.Fatalf("granted a=%d b=%d, want 3 and 1", a, b)
	}
	// First registered TaskManager first.
	if tm1.grantedTo("a") != 2 {
		t.Errorf("tm1 granted %d slots to a, want 2", tm1.grantedTo("a"))
	}
	seen := map[string]bool{}
	for _, r := range append(tm1.granted(), tm2.granted()...) {
		if seen[r.AllocationId] || len(r.AllocationId) != 32 {
			t.Fatalf("allocation ID %q not unique or not 32 hex digits", r.AllocationId)
		}
		seen[r.AllocationId] = true
		if r.ResourceManagerId != c.rm.ID() || r.JobMasterAddress != "jm-"+r.JobId+":6123" {
			t.Fatalf("RequestSlot = %v; want RM id %s and the job's JobMaster address", r, c.rm.ID())
		}
	}
	if free := c.freeSlots(); free != 0 {
		t.Fatalf("free slots = %d, want 0", free)
	}
	// Nothing more is requested over a few heartbeats: requirements are met.
	c.advance(3 * time.Second)
	if n := tm1.attemptCount() + tm2.attemptCount(); n != 4 {
		t.Fatalf("%d RequestSlot calls, want 4", n)
	}
}

func TestSlotSelection(t *testing.T) {
	for _, tc := range []struct {
		name   string
		evenly bool
		want   []int // slots granted per TaskManager
	}{
		{"fills the first TaskManager by default", false, []int{3, 0, 0}},
		{"spreads evenly when configured", true, []int{1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.EvenlySpreadOut = tc.evenly
			c := startRM(t, cfg)
			tes := []*fakeTE{c.startTE("tm1", 4), c.startTE("tm2", 4), c.startTE("tm3", 4)}
			for _, te := range tes {
				te.register(t, c)
			}
			c.job("a", 3)
			var got []int
			for _, te := range tes {
				got = append(got, len(te.granted()))
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("granted per TaskManager = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRequestSlotsToATaskExecutorAreOrdered: calls to one TaskExecutor go
// through its outbox, one at a time, in the order the RM made them.
func TestRequestSlotsToATaskExecutorAreOrdered(t *testing.T) {
	c := startRM(t, testConfig())
	te := c.startTE("tm1", 4)
	te.register(t, c)
	c.job("a", 4)
	var order []int32
	for _, r := range te.granted() {
		order = append(order, r.SlotIndex)
	}
	if !slices.Equal(order, []int32{0, 1, 2, 3}) {
		t.Fatalf("slots granted in order %v, want 0..3", order)
	}
	if n := te.get(func(te *fakeTE) int { return te.maxInFlight }); n != 1 {
		t.Fatalf("%d RequestSlot calls in flight at once, want 1", n)
	}
}

func TestRequestSlotTransientFailuresAreRetried(t *testing.T) {
	c := startRM(t, testConfig())
	te := c.startTE("tm1", 1)
	te.set(func(te *fakeTE) { te.failRequests = 3 })
	te.register(t, c)
	jm := c.job("a", 1)
	if n := te.attemptCount(); n != 1 {
		t.Fatalf("%d RequestSlot calls before the retry pause passed, want 1", n)
	}
	// The outbox retries after 50, 100 and 200 ms (±20%).
	c.advance(500 * time.Millisecond)
	if n, g := te.attemptCount(), len(te.granted()); n != 4 || g != 1 {
		t.Fatalf("%d RequestSlot calls, %d granted; want 4 (3 failed, retried) and 1", n, g)
	}
	if free := c.freeSlots(); free != 0 {
		t.Fatalf("free slots = %d, want 0", free)
	}
	if n := jm.noticeList(); len(n) != 0 {
		t.Errorf("notified not enough resources %v; the slot was there all along", n)
	}
	if strings.Contains(c.logs.String(), "RequestSlot failed") {
		t.Error("a RequestSlot that succeeded on a retry was logged as failed")
	}
}

func TestRequestSlotFailingForGoodWaitsForTheNextTick(t *testing.T) {
	c := startRM(t, testConfig())
	te := c.startTE("tm1", 1)
	te.set(func(te *fakeTE) {
		te.failRequests = 3
		te.failWith = status.Error(codes.FailedPrecondition, "injected: not registered at this ResourceManager")
	})
	te.register(t, c)
	c.job("a", 1)
	for tick := 1; tick <= 3; tick++ {
		if n := te.attemptCount(); n != tick {
			t.Fatalf("before tick %d: %d RequestSlot calls, want %d (one per heartbeat interval)", tick, n, tick)
		}
		c.advance(time.Second)
	}
	if n, g := te.attemptCount(), len(te.granted()); n != 4 || g != 1 {
		t.Fatalf("%d RequestSlot calls, %d granted; want 4 and 1", n, g)
	}
	if !strings.Contains(c.logs.String(), "RequestSlot failed") {
		t.Error("the log does not mention the failed RequestSlot")
	}
}

func TestRequestSlotRetriesEndAtTheRPCTimeout(t *testing.T) {
	cfg := testConfig()
	cfg.RPCTimeout = 2 * time.Second
	cfg.HeartbeatInterval = time.Hour // only the outbox's retries
	c := startRM(t, cfg)
	te := c.startTE("tm1", 1)
	te.set(func(te *fakeTE) { te.failRequests = 1000 })
	te.register(t, c)
	c.job("a", 1)
	c.advance(3 * time.Second)
	n := te.attemptCount()
	if n < 4 || n > 8 {
		t.Fatalf("%d attempts within the 2 s RPC timeout; want a handful (backoff 50 ms doubling to 1 s)", n)
	}
	if log := c.logs.String(); !strings.Contains(log, "RequestSlot failed") || !strings.Contains(log, "delivery deadline passed") {
		t.Errorf("the log does not say the RequestSlot failed for good at its deadline:\n%s", log)
	}
	// Blocked until the next tick: no more attempts.
	c.advance(10 * time.Second)
	if m := te.attemptCount(); m != n {
		t.Fatalf("%d more attempts without a tick", m-n)
	}
}

func TestRequestSlotRejectedByATaskExecutorWithAStaleView(t *testing.T) {
	// The TaskExecutor allocated slot 0 to another job but has not reported
	// it yet; the RM's RequestSlot is refused (not retried), the RM uses
	// slot 1, and its next heartbeat adopts the allocation of slot 0.
	c := startRM(t, testConfig())
	te := c.startTE("tm1", 2)
	te.register(t, c)
	te.setSlot(0, "x1", "other")
	c.job("a", 1)
	if g := te.granted(); len(g) != 1 || g[0].SlotIndex != 1 || te.attemptCount() != 2 {
		t.Fatalf("granted %v after %d calls; want slot 1 after 2", g, te.attemptCount())
	}
	c.advance(time.Second)
	if free := c.freeSlots(); free != 0 {
		t.Fatalf("free slots = %d, want 0", free)
	}
	if !strings.Contains(c.logs.String(), "adopted") {
		t.Error("the log does not mention the adopted allocation")
	}
}

func TestNotEnoughResources(t *testing.T) {
	cfg := testConfig()
	cfg.SlotRequestTimeout = 5 * time.Second
	c := startRM(t, cfg)
	te := c.startTE("tm1", 2)
	te.register(t, c)
	jm := c.job("a", 3)
	// At once: the cluster has 2 slots, the job needs 3.
	if n := jm.noticeList(); !slices.Equal(n, []int{2}) {
		t.Fatalf("notices right after declaring = %v, want [2]", n)
	}
	if g := len(te.granted()); g != 2 {
		t.Fatalf("%d slots granted, want 2", g)
	}
	// Not again on every tick while nothing changes.
	c.advance(4 * time.Second)
	if n := jm.noticeList(); !slices.Equal(n, []int{2}) {
		t.Fatalf("notices = %v, want just [2] before the slot request timeout", n)
	}
	// After slot.request.timeout: again, with a warning.
	c.advance(time.Second)
	if n := jm.noticeList(); !slices.Equal(n, []int{2, 2}) {
		t.Fatalf("notices = %v, want [2 2] at the slot request timeout", n)
	}
	log := c.logs.String()
	for _, want := range []string{`"level":"warn"`, "job a", "requires 3 slots", "2 are available"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	// A new TaskManager makes the requirement satisfiable.
	more := c.startTE("tm2", 1)
	more.register(t, c)
	if more.grantedTo("a") != 1 {
		t.Fatal("the third slot was not granted")
	}
}

func TestTaskExecutorHeartbeatTimeout(t *testing.T) {
	c := startRM(t, testConfig())
	tm1, tm2 := c.startTE("tm1", 1), c.startTE("tm2", 1)
	tm1.register(t, c)
	jm := c.job("a", 1)
	if len(tm1.granted()) != 1 {
		t.Fatal("slot not granted on tm1")
	}
	tm2.register(t, c)
	tm1.set(func(te *fakeTE) { te.unreachable = true })
	// Last heard at registration (t0); the timeout is 3 s, checked on ticks.
	c.advance(3 * time.Second)
	if ids := c.taskManagerIDs(); !slices.Equal(ids, []string{"tm1", "tm2"}) {
		t.Fatalf("TaskManagers = %v before the heartbeat timeout passed", ids)
	}
	c.advance(time.Second)
	if ids := c.taskManagerIDs(); !slices.Equal(ids, []string{"tm2"}) {
		t.Fatalf("TaskManagers = %v after the heartbeat timeout, want [tm2]", ids)
	}
	if log := c.logs.String(); !strings.Contains(log, "heartbeat timeout") || !strings.Contains(log, "tm1") {
		t.Errorf("the log does not say why tm1 was removed:\n%s", log)
	}
	// Silence is not a confirmed loss: the JobMaster judges by its own
	// heartbeats, which a TaskManager cut off only from the JobManager's
	// network answers no differently.
	if lost := jm.lostList(); len(lost) != 0 {
		t.Fatalf("the JobMaster was told %v were lost after a heartbeat timeout, want none", lost)
	}
	// Its slot is gone, so the job is matched again on tm2.
	if tm2.grantedTo("a") != 1 {
		t.Fatal("the slot was not granted on tm2")
	}
}

func TestJobMasterHeartbeatTimeoutDropsItsRequirement(t *testing.T) {
	c := startRM(t, testConfig())
	jm := c.job("a", 2)
	c.advance(2 * time.Second)
	if n := jm.heartbeatCount(); n != 2 {
		t.Fatalf("%d heartbeats to the JobMaster in two intervals, want 2", n)
	}
	jm.set(func(jm *fakeJM) { jm.unanswered = true })
	// Last heard at 2 s: still registered at 5 s, gone at 6 s.
	c.advance(3 * time.Second)
	if err := c.rm.DeclareResourceRequirements(ctxT(t), "a", 2); err != nil {
		t.Fatalf("disconnected before the heartbeat timeout: %v", err)
	}
	c.advance(time.Second)
	if err := c.rm.DeclareResourceRequirements(ctxT(t), "a", 2); !errors.Is(err, ErrJobMasterNotRegistered) {
		t.Fatalf("after the heartbeat timeout: %v, want ErrJobMasterNotRegistered", err)
	}
	te := c.startTE("tm1", 2)
	te.register(t, c)
	c.advance(time.Second)
	if n := te.attemptCount(); n != 0 {
		t.Fatalf("%d RequestSlot calls for a disconnected job", n)
	}
	if !strings.Contains(c.logs.String(), "JobMaster disconnected") {
		t.Error("the log does not mention the disconnection")
	}
}

func TestJobMasterHeartbeatErrorDisconnectsAtOnce(t *testing.T) {
	cfg := testConfig()
	cfg.HeartbeatTimeout = time.Hour
	c := startRM(t, cfg)
	jm := c.job("a", 1)
	jm.set(func(jm *fakeJM) { jm.fail = errors.New("job master stopped") })
	c.advance(time.Second)
	if err := c.rm.DeclareResourceRequirements(ctxT(t), "a", 1); !errors.Is(err, ErrJobMasterNotRegistered) {
		t.Fatalf("after a failed heartbeat: %v, want ErrJobMasterNotRegistered", err)
	}
}

// TestHungJobMasterDoesNotStallOthers: a JobMaster whose heartbeat never
// returns holds up nothing: another job gets its slots and heartbeats, and
// the hung one gets no second heartbeat while the first is in flight.
func TestHungJobMasterDoesNotStallOthers(t *testing.T) {
	cfg := testConfig()
	cfg.RPCTimeout = time.Hour // the hung call stays in flight for the whole test
	cfg.HeartbeatTimeout = time.Hour
	c := startRM(t, cfg)
	hung := c.job("hung", 1)
	hung.set(func(jm *fakeJM) { jm.hang = true })
	te := c.startTE("tm1", 2)
	te.register(t, c)
	if te.grantedTo("hung") != 1 {
		t.Fatal("the hung job's slot was not granted before its heartbeat hung")
	}
	// From now on the RM never settles (the hung call is in flight): wait
	// for events instead.
	c.clk.Advance(time.Second)
	eventually(t, "the hung JobMaster's heartbeat started", func() bool { return hung.heartbeatCount() == 1 })
	jm := &fakeJM{}
	if err := c.rm.RegisterJobMaster(ctxT(t), "b", "jm-b:6123", jm); err != nil {
		t.Fatal(err)
	}
	if err := c.rm.DeclareResourceRequirements(ctxT(t), "b", 1); err != nil {
		t.Fatal(err)
	}
	eventually(t, "job b gets its slot", func() bool { return te.grantedTo("b") == 1 })
	for i := 1; i <= 3; i++ {
		c.clk.Advance(time.Second)
		eventually(t, fmt.Sprintf("heartbeat %d to job b's JobMaster", i), func() bool { return jm.heartbeatCount() == i })
	}
	if n := hung.heartbeatCount(); n != 1 {
		t.Fatalf("%d heartbeats to the hung JobMaster, want 1 (one in flight at most)", n)
	}
}

func TestSlotReportsReconcile(t *testing.T) {
	c := startRM(t, testConfig())
	te := c.startTE("tm1", 3)
	if _, err := c.client.RegisterTaskExecutor(ctxT(t), te.registration()); err != nil {
		t.Fatal(err)
	}
	if free := c.freeSlots(); free != 0 {
		t.Fatalf("free slots before the first report = %d, want 0", free)
	}
	te.sendReport(t, c)
	if free := c.freeSlots(); free != 3 {
		t.Fatalf("free slots = %d, want 3", free)
	}
	// A report sent by the TaskExecutor.
	te.setSlot(0, "x1", "other")
	te.sendReport(t, c)
	if free := c.freeSlots(); free != 2 {
		t.Fatalf("free slots = %d, want 2", free)
	}
	// A report in a heartbeat response.
	te.setSlot(1, "x2", "other")
	te.setSlot(0, "", "")
	c.advance(time.Second)
	if tm, err := c.rm.TaskManager(ctxT(t), "tm1"); err != nil || tm.FreeSlots != 2 {
		t.Fatalf("TaskManager = %+v, %v; want 2 free slots", tm, err)
	}
	te.setSlot(0, "x1", "other")
	c.advance(time.Second)
	if free := c.freeSlots(); free != 1 {
		t.Fatalf("free slots = %d, want 1", free)
	}

	// Reports from unknown TaskExecutors or another process are refused.
	_, err := c.client.SendSlotReport(ctxT(t), &pb.SendSlotReportRequest{ResourceId: "nope", InstanceId: "x", SlotReport: &pb.SlotReport{}})
	wantCode(t, err, codes.NotFound, "nope")
	_, err = c.client.SendSlotReport(ctxT(t), &pb.SendSlotReportRequest{ResourceId: "tm1", InstanceId: "old", SlotReport: &pb.SlotReport{}})
	wantCode(t, err, codes.NotFound, "tm1", "old")
}

// TestPushedReportCrossingARequestSlot: a report the TaskExecutor sent
// before it granted a slot, arriving after the grant, does not free it;
// the RM asks for a fresh report instead (a heartbeat, without waiting for
// the tick), which settles it either way.
func TestPushedReportCrossingARequestSlot(t *testing.T) {
	cfg := testConfig()
	cfg.HeartbeatInterval = time.Hour // no tick: every heartbeat here is one the RM asked for
	c := startRM(t, cfg)
	te := c.startTE("tm1", 2)
	te.register(t, c)
	stale := &pb.SendSlotReportRequest{ResourceId: te.id, InstanceId: te.instance,
		SlotReport: &pb.SlotReport{Slots: []*pb.SlotStatus{{SlotIndex: 0}, {SlotIndex: 1}}}}
	c.job("a", 1)
	if len(te.granted()) != 1 || c.freeSlots() != 1 {
		t.Fatalf("granted %d, free %d; want 1 and 1", len(te.granted()), c.freeSlots())
	}
	if _, err := c.client.SendSlotReport(ctxT(t), stale); err != nil {
		t.Fatal(err)
	}
	c.settle()
	if n := te.heartbeatCount(); n != 1 {
		t.Fatalf("%d heartbeats after a report that contradicted a fresh grant, want 1", n)
	}
	if free, n := c.freeSlots(), te.attemptCount(); free != 1 || n != 1 {
		t.Fatalf("free slots %d, %d RequestSlot calls; want the grant kept (1, 1)", free, n)
	}
	// Now the TaskExecutor really frees it; its report is believed at once
	// (the RM did not change that slot since its last heartbeat), and the
	// slot is requested again.
	c.declare("a", 1) // a new declaration: no pause after a refused slot
	te.setSlot(0, "", "")
	te.sendReport(t, c)
	if n := te.attemptCount(); n != 2 {
		t.Fatalf("%d RequestSlot calls, want 2 (the freed slot requested again)", n)
	}
}

// TestReportsFromAnUnreachableTaskExecutorDoNotLoop: reports that prompt
// a heartbeat the TaskExecutor does not answer prompt no more until the
// next tick.
func TestReportsFromAnUnreachableTaskExecutorDoNotLoop(t *testing.T) {
	cfg := testConfig()
	cfg.HeartbeatTimeout = time.Hour
	c := startRM(t, cfg)
	te := c.startTE("tm1", 2)
	te.register(t, c)
	te.set(func(te *fakeTE) { te.unreachable = true })
	for i := range 5 {
		te.setSlot(0, fmt.Sprint("x", i), "other")
		te.sendReport(t, c)
	}
	if n := te.heartbeatCount(); n != 1 {
		t.Fatalf("%d heartbeats for 5 disagreeing reports of an unreachable TaskExecutor, want 1", n)
	}
	c.advance(time.Second)
	if n := te.heartbeatCount(); n != 2 {
		t.Fatalf("%d heartbeats after a tick, want 2", n)
	}
	// Reachable again: the next tick's heartbeat settles it.
	te.set(func(te *fakeTE) { te.unreachable = false })
	c.advance(time.Second)
	if free := c.freeSlots(); free != 1 {
		t.Fatalf("free slots = %d, want 1 (slot 0 adopted)", free)
	}
}

// TestRejectedOffersBackOff: a TaskExecutor whose JobMaster rejects every
// slot frees it at once; the RM pauses requesting slots for that job
// instead of storming (before: ~100 rejected offers a second).
func TestRejectedOffersBackOff(t *testing.T) {
	c := startRM(t, testConfig())
	te := c.startTE("tm1", 4)
	te.set(func(te *fakeTE) { te.reject = true })
	te.register(t, c)
	if err := c.rm.RegisterJobMaster(ctxT(t), "a", "jm-a:6123", &fakeJM{}); err != nil {
		t.Fatal(err)
	}
	if err := c.rm.DeclareResourceRequirements(ctxT(t), "a", 1); err != nil {
		t.Fatal(err)
	}
	// The RM must stop requesting on its own, with the clock standing still.
	c.settleOr(func() error {
		if n := te.attemptCount(); n > 20 {
			return fmt.Errorf("offer storm: %d RequestSlot calls without the clock moving", n)
		}
		return nil
	})
	if n := te.attemptCount(); n != 1 {
		t.Fatalf("%d RequestSlot calls right after the declaration, want 1", n)
	}
	c.advance(10 * time.Second)
	// Pauses 0.1, 0.2, 0.4, 0.8 s, then one per heartbeat interval (1 s).
	n := te.attemptCount()
	if n < 8 || n > 16 {
		t.Fatalf("%d RequestSlot calls in 10 s of rejected offers; want about 14", n)
	}
	if !strings.Contains(c.logs.String(), "refused a slot") {
		t.Error("the log does not mention the pause")
	}
	// The job declares again (it dropped the dead TaskManager): requested
	// at once, and kept.
	te.set(func(te *fakeTE) { te.reject = false })
	c.declare("a", 1)
	if m := te.attemptCount(); m != n+1 {
		t.Fatalf("%d RequestSlot calls after the declaration, want 1", m-n)
	}
	c.advance(10 * time.Second)
	if m, free := te.attemptCount(), c.freeSlots(); m != n+1 || free != 3 {
		t.Fatalf("%d more RequestSlot calls, %d free slots; want 1 and 3", m-n, free)
	}
}

// TestTaskManagerLostIsToldToEveryJobMaster: every way a TaskManager goes
// reaches every JobMaster at once.
func TestTaskManagerLostIsToldToEveryJobMaster(t *testing.T) {
	cfg := testConfig()
	cfg.HeartbeatTimeout = time.Hour
	c := startRM(t, cfg)
	a, b := c.job("a", 0), c.job("b", 0)
	tm3 := c.startTE("tm3", 1)
	c.startTE("tm1", 1).register(t, c)
	c.startTE("tm2", 1).register(t, c)
	tm3.register(t, c)
	if _, err := c.client.DisconnectTaskExecutor(ctxT(t), &pb.DisconnectTaskExecutorRequest{ResourceId: "tm1", Cause: "shutting down"}); err != nil {
		t.Fatal(err)
	}
	c.onRM(func() {
		c.rm.workerEvent(providers.WorkerTerminated{WorkerID: "tm2", Cause: errors.New("exit status 137"), ExitStatus: 137})
		// A worker whose TaskExecutor never registered: told all the same.
		c.rm.workerEvent(providers.WorkerTerminated{WorkerID: "tm9", Cause: errors.New("exit status 1"), ExitStatus: 1})
	})
	req := tm3.registration()
	req.InstanceId = "restarted" // a new process on the same address
	if _, err := c.client.RegisterTaskExecutor(ctxT(t), req); err != nil {
		t.Fatal(err)
	}
	want := []string{"tm1", "tm2", "tm9", "tm3"}
	for name, jm := range map[string]*fakeJM{"a": a, "b": b} {
		if lost := jm.lostList(); !slices.Equal(lost, want) {
			t.Errorf("JobMaster %s was told %v were lost, want %v", name, lost, want)
		}
		jm.mu.Lock()
		for _, cause := range jm.causes {
			if !errors.Is(cause, ErrTaskManagerLost) {
				t.Errorf("cause %v does not wrap ErrTaskManagerLost", cause)
			}
		}
		jm.mu.Unlock()
	}
}

func TestTaskManagersView(t *testing.T) {
	c := startRM(t, testConfig())
	tm1, tm2 := c.startTE("tm1", 3), c.startTE("tm2", 1)
	tm1.register(t, c)
	tm2.register(t, c)
	c.job("a", 1)
	c.advance(1500 * time.Millisecond) // heard from in the heartbeat at 1 s
	tms, err := c.rm.TaskManagers(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(tms) != 2 || tms[0].ID != "tm1" || tms[1].ID != "tm2" {
		t.Fatalf("TaskManagers = %+v, want tm1 and tm2 in registration order", tms)
	}
	got := tms[0]
	if got.Path != tm1.addr || got.DataPort != 6121 || got.SlotsNumber != 3 || got.FreeSlots != 2 {
		t.Fatalf("tm1 = %+v; want path %s, dataPort 6121, 3 slots, 2 free", got, tm1.addr)
	}
	if want := t0.Add(time.Second).UnixMilli(); got.TimeSinceLastHeartbeat != want {
		t.Fatalf("timeSinceLastHeartbeat = %d, want the epoch millis of the last heartbeat, %d", got.TimeSinceLastHeartbeat, want)
	}
	one, err := c.rm.TaskManager(ctxT(t), "tm2")
	if err != nil || !reflect.DeepEqual(one, tms[1]) {
		t.Fatalf("TaskManager(tm2) = %+v, %v; want %+v", one, err, tms[1])
	}
	if _, err := c.rm.TaskManager(ctxT(t), "nope"); !errors.Is(err, restapi.ErrTaskManagerNotFound) {
		t.Fatalf("TaskManager(nope) = %v, want ErrTaskManagerNotFound", err)
	}
	n, total, free, err := c.rm.Overview(ctxT(t))
	if err != nil || n != 2 || total != 4 || free != 3 {
		t.Fatalf("Overview = %d, %d, %d, %v; want 2, 4, 3", n, total, free, err)
	}
}

func TestDataPort(t *testing.T) {
	for addr, want := range map[string]int{"": 0, "host:6121": 6121, "[::1]:7000": 7000, "host": 0, "host:x": 0} {
		if got := dataPort(addr); got != want {
			t.Errorf("dataPort(%q) = %d, want %d", addr, got, want)
		}
	}
}

func TestDisconnectTaskExecutorActsAtOnce(t *testing.T) {
	cfg := testConfig()
	cfg.HeartbeatTimeout = time.Hour
	c := startRM(t, cfg)
	tm1, tm2 := c.startTE("tm1", 1), c.startTE("tm2", 1)
	tm1.register(t, c)
	tm2.register(t, c)
	if _, err := c.client.DisconnectTaskExecutor(ctxT(t), &pb.DisconnectTaskExecutorRequest{ResourceId: "tm1", Cause: "shutting down"}); err != nil {
		t.Fatal(err)
	}
	if ids := c.taskManagerIDs(); !slices.Equal(ids, []string{"tm2"}) {
		t.Fatalf("TaskManagers = %v, want [tm2]", ids)
	}
	// Idempotent.
	if _, err := c.client.DisconnectTaskExecutor(ctxT(t), &pb.DisconnectTaskExecutorRequest{ResourceId: "tm1"}); err != nil {
		t.Fatal(err)
	}
	// The provider path: a worker ended.
	c.onRM(func() {
		c.rm.workerEvent(providers.WorkerTerminated{WorkerID: "tm2", Cause: errors.New("exit status 137"), ExitStatus: 137})
	})
	if ids := c.taskManagerIDs(); len(ids) != 0 {
		t.Fatalf("TaskManagers = %v, want none", ids)
	}
	if log := c.logs.String(); !strings.Contains(log, "shutting down") || !strings.Contains(log, "exit status 137") {
		t.Errorf("the log does not say why:\n%s", log)
	}
}

func TestInProcessAPIValidationAndStop(t *testing.T) {
	c := startRM(t, testConfig())
	ctx := ctxT(t)
	if err := c.rm.RegisterJobMaster(ctx, "", "addr", &fakeJM{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty job ID: %v", err)
	}
	if err := c.rm.RegisterJobMaster(ctx, "a", "addr", nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("nil gateway: %v", err)
	}
	if err := c.rm.DeclareResourceRequirements(ctx, "a", 1); !errors.Is(err, ErrJobMasterNotRegistered) {
		t.Fatalf("unregistered job: %v", err)
	}
	jm := c.job("a", 1)
	if err := c.rm.RegisterJobMaster(ctx, "a", "jm-a:6123", jm); err != nil {
		t.Fatalf("re-registration: %v", err)
	}
	if err := c.rm.DeclareResourceRequirements(ctx, "a", -1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("negative requirement: %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := c.rm.DisconnectJobMaster(ctx, "a", errors.New("job finished")); err != nil {
			t.Fatalf("DisconnectJobMaster #%d: %v", i, err)
		}
	}
	c.stop()
	if _, err := c.rm.TaskManagers(context.Background()); !errors.Is(err, ErrStopped) {
		t.Fatalf("after stop: %v, want ErrStopped", err)
	}
}
