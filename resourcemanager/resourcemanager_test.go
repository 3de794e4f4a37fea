package resourcemanager

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/mailbox"
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
		c := startRM(t, fastConfig())
		te := startTE(t, "tm1", 2)
		resp := te.register(t, c)
		if resp.ResourceManagerId != c.rm.ID() || resp.HeartbeatIntervalMs != 100 || resp.HeartbeatTimeoutMs != 300 {
			t.Fatalf("response = %v; want RM id %s, 100/300 ms", resp, c.rm.ID())
		}
		if ids := c.taskManagerIDs(); !slices.Equal(ids, []string{"tm1"}) {
			t.Fatalf("TaskManagers = %v", ids)
		}
		eventually(t, "the RM heartbeats the TaskExecutor", func() bool {
			te.mu.Lock()
			defer te.mu.Unlock()
			return te.heartbeats >= 2
		})
	})
	t.Run("wrong protocol version", func(t *testing.T) {
		c := startRM(t, fastConfig())
		req := startTE(t, "tm1", 1).registration()
		req.ProtocolVersion = 2
		_, err := c.client.RegisterTaskExecutor(ctxT(t), req)
		wantCode(t, err, codes.FailedPrecondition, "protocol 2", "protocol 1")
		if ids := c.taskManagerIDs(); len(ids) != 0 {
			t.Fatalf("registered anyway: %v", ids)
		}
	})
	t.Run("invalid input", func(t *testing.T) {
		c := startRM(t, fastConfig())
		te := startTE(t, "tm1", 1)
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
	t.Run("duplicate resource ID while alive", func(t *testing.T) {
		c := startRM(t, fastConfig())
		first := startTE(t, "tm1", 1)
		first.register(t, c)
		second := startTE(t, "tm1", 1) // another process claiming the same resource ID
		_, err := c.client.RegisterTaskExecutor(ctxT(t), second.registration())
		wantCode(t, err, codes.AlreadyExists, "tm1", first.addr)
		tm, err := c.rm.TaskManager(ctxT(t), "tm1")
		if err != nil || tm.Path != first.addr {
			t.Fatalf("TaskManager = %+v, %v; want the first registration kept", tm, err)
		}
	})
	t.Run("a new instance on the same address replaces the old one", func(t *testing.T) {
		c := startRM(t, fastConfig())
		old := startTE(t, "tm1", 1)
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
		c := startRM(t, fastConfig())
		te := startTE(t, "tm1", 2)
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
		cfg := fastConfig()
		cfg.HeartbeatInterval = time.Hour // no tick: the registration itself must notice the old one is stale
		c := startRM(t, cfg)
		old := startTE(t, "tm1", 1)
		old.register(t, c)
		time.Sleep(cfg.HeartbeatTimeout + 50*time.Millisecond)
		restarted := startTE(t, "tm1", 3)
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
	c := startRM(t, fastConfig())
	tm1, tm2 := startTE(t, "tm1", 2), startTE(t, "tm2", 2)
	tm1.register(t, c)
	tm2.register(t, c)
	c.job("a", 3)
	c.job("b", 1)
	eventually(t, "4 slots granted", func() bool { return len(tm1.granted())+len(tm2.granted()) == 4 })
	if a, b := tm1.grantedTo("a")+tm2.grantedTo("a"), tm1.grantedTo("b")+tm2.grantedTo("b"); a != 3 || b != 1 {
		t.Fatalf("granted a=%d b=%d, want 3 and 1", a, b)
	}
	// First registered TaskManager first.
	if tm1.grantedTo("a") != 2 {
		t.Errorf("tm1 granted %d slots to a, want 2", tm1.grantedTo("a"))
	}
	seen := map[string]bool{}
	for _, r := range append(tm1.granted(), tm2.granted()...) {
		if seen[r.AllocationId] || r.AllocationId == "" {
			t.Fatalf("allocation ID %q not unique", r.AllocationId)
		}
		seen[r.AllocationId] = true
		if r.ResourceManagerId != c.rm.ID() || r.JobMasterAddress != "jm-"+r.JobId+":6123" {
			t.Fatalf("RequestSlot = %v; want RM id %s and the job's JobMaster address", r, c.rm.ID())
		}
	}
	eventually(t, "no free slots", func() bool { return c.freeSlots() == 0 })
	// Nothing more is requested: requirements are met.
	time.Sleep(250 * time.Millisecond)
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
			cfg := fastConfig()
			cfg.EvenlySpreadOut = tc.evenly
			c := startRM(t, cfg)
			tes := []*fakeTE{startTE(t, "tm1", 4), startTE(t, "tm2", 4), startTE(t, "tm3", 4)}
			for _, te := range tes {
				te.register(t, c)
			}
			c.job("a", 3)
			var got []int
			eventually(t, "3 slots granted", func() bool {
				got = got[:0]
				total := 0
				for _, te := range tes {
					got = append(got, len(te.granted()))
					total += len(te.granted())
				}
				return total == 3
			})
			if !slices.Equal(got, tc.want) {
				t.Fatalf("granted per TaskManager = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRequestSlotFailureIsRetriedWithoutHotLoop(t *testing.T) {
	c := startRM(t, fastConfig())
	te := startTE(t, "tm1", 1)
	te.failNext(3)
	te.register(t, c)
	jm := c.job("a", 1)
	eventually(t, "the slot granted after 3 failures", func() bool { return len(te.granted()) == 1 })
	if n := te.attemptCount(); n != 4 {
		t.Fatalf("%d RequestSlot calls, want 4 (3 failed, 1 retry per heartbeat tick)", n)
	}
	eventually(t, "the RM sees the slot allocated", func() bool { return c.freeSlots() == 0 })
	if n := jm.noticeList(); len(n) != 0 {
		t.Errorf("notified not enough resources %v; the slot was there all along", n)
	}
	if !strings.Contains(c.logs.String(), "RequestSlot failed") {
		t.Error("the log does not mention the failed RequestSlot")
	}
}

func TestRequestSlotRejectedByATaskExecutorWithAStaleView(t *testing.T) {
	// The TaskExecutor allocated slot 0 to another job but has not reported
	// it yet; the RM's RequestSlot is refused and its next heartbeat corrects
	// the RM, which then uses slot 1.
	c := startRM(t, fastConfig())
	te := startTE(t, "tm1", 2)
	te.register(t, c)
	te.setSlot(0, "x1", "other")
	c.job("a", 1)
	eventually(t, "slot 1 granted to a", func() bool {
		g := te.granted()
		return len(g) == 1 && g[0].SlotIndex == 1
	})
	eventually(t, "no free slots", func() bool { return c.freeSlots() == 0 })
}

func TestNotEnoughResources(t *testing.T) {
	cfg := fastConfig()
	cfg.SlotRequestTimeout = 600 * time.Millisecond
	c := startRM(t, cfg)
	te := startTE(t, "tm1", 2)
	te.register(t, c)
	declared := time.Now()
	jm := c.job("a", 3)
	// At once: the cluster has 2 slots, the job needs 3.
	if n := jm.noticeList(); !slices.Equal(n, []int{2}) {
		t.Fatalf("notices right after declaring = %v, want [2]", n)
	}
	eventually(t, "both slots granted", func() bool { return len(te.granted()) == 2 })
	// Not again on every tick while nothing changes.
	time.Sleep(300 * time.Millisecond)
	if n := jm.noticeList(); !slices.Equal(n, []int{2}) && time.Since(declared) < cfg.SlotRequestTimeout {
		t.Fatalf("notices = %v, want just [2] before the slot request timeout", n)
	}
	// After slot.request.timeout: again, with a warning.
	eventually(t, "a second notice after the slot request timeout", func() bool { return len(jm.noticeList()) == 2 })
	if since := time.Since(declared); since < cfg.SlotRequestTimeout {
		t.Fatalf("second notice after %s, before the slot request timeout %s", since, cfg.SlotRequestTimeout)
	}
	if n := jm.noticeList(); n[1] != 2 {
		t.Fatalf("notices = %v, want acquired 2 again", n)
	}
	log := c.logs.String()
	for _, want := range []string{`"level":"warn"`, "job a", "requires 3 slots", "2 are available"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	// A new TaskManager makes the requirement satisfiable.
	more := startTE(t, "tm2", 1)
	more.register(t, c)
	eventually(t, "the third slot granted", func() bool { return more.grantedTo("a") == 1 })
}

func TestTaskExecutorHeartbeatTimeout(t *testing.T) {
	c := startRM(t, fastConfig())
	tm1, tm2 := startTE(t, "tm1", 1), startTE(t, "tm2", 1)
	tm1.register(t, c)
	c.job("a", 1)
	eventually(t, "slot granted on tm1", func() bool { return len(tm1.granted()) == 1 })
	tm2.register(t, c)
	tm1.setSilent(true)
	start := time.Now()
	eventually(t, "tm1 unregistered", func() bool { return slices.Equal(c.taskManagerIDs(), []string{"tm2"}) })
	// Last heard at most one interval before it went silent.
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("unregistered %s after going silent, well before the heartbeat timeout", d)
	}
	if log := c.logs.String(); !strings.Contains(log, "heartbeat timeout") || !strings.Contains(log, "tm1") {
		t.Errorf("the log does not say why tm1 was removed:\n%s", log)
	}
	// Its slot is gone, so the job is matched again on tm2.
	eventually(t, "slot granted on tm2", func() bool { return tm2.grantedTo("a") == 1 })
}

func TestJobMasterHeartbeatTimeoutDropsItsRequirement(t *testing.T) {
	c := startRM(t, fastConfig())
	jm := c.job("a", 2)
	eventually(t, "the JobMaster heartbeated", func() bool {
		jm.mu.Lock()
		defer jm.mu.Unlock()
		return jm.heartbeats >= 2
	})
	jm.setDead()
	eventually(t, "the JobMaster disconnected", func() bool {
		err := c.rm.DeclareResourceRequirements(ctxT(t), "a", 2)
		return errors.Is(err, ErrJobMasterNotRegistered)
	})
	te := startTE(t, "tm1", 2)
	te.register(t, c)
	time.Sleep(300 * time.Millisecond)
	if n := te.attemptCount(); n != 0 {
		t.Fatalf("%d RequestSlot calls for a disconnected job", n)
	}
	if !strings.Contains(c.logs.String(), "JobMaster disconnected") {
		t.Error("the log does not mention the disconnection")
	}
}

func TestJobMasterHeartbeatErrorDisconnectsAtOnce(t *testing.T) {
	cfg := fastConfig()
	cfg.HeartbeatTimeout = time.Hour
	c := startRM(t, cfg)
	jm := c.job("a", 1)
	jm.setFail(errors.New("job master stopped"))
	eventually(t, "the JobMaster disconnected", func() bool {
		return errors.Is(c.rm.DeclareResourceRequirements(ctxT(t), "a", 1), ErrJobMasterNotRegistered)
	})
}

func TestSlotReportsReconcile(t *testing.T) {
	c := startRM(t, fastConfig())
	te := startTE(t, "tm1", 3)
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
	eventually(t, "the heartbeat's report reconciled", func() bool {
		tm, err := c.rm.TaskManager(ctxT(t), "tm1")
		return err == nil && tm.FreeSlots == 2
	})
	te.setSlot(0, "x1", "other")
	eventually(t, "the heartbeat's report reconciled", func() bool { return c.freeSlots() == 1 })

	// Reports from unknown TaskExecutors or another process are refused.
	_, err := c.client.SendSlotReport(ctxT(t), &pb.SendSlotReportRequest{ResourceId: "nope", InstanceId: "x", SlotReport: &pb.SlotReport{}})
	wantCode(t, err, codes.NotFound, "nope")
	_, err = c.client.SendSlotReport(ctxT(t), &pb.SendSlotReportRequest{ResourceId: "tm1", InstanceId: "old", SlotReport: &pb.SlotReport{}})
	wantCode(t, err, codes.NotFound, "tm1", "old")
}

func TestTaskManagersView(t *testing.T) {
	c := startRM(t, fastConfig())
	tm1, tm2 := startTE(t, "tm1", 3), startTE(t, "tm2", 1)
	before := time.Now().UnixMilli()
	tm1.register(t, c)
	tm2.register(t, c)
	c.job("a", 1)
	eventually(t, "slot granted", func() bool { return len(tm1.granted()) == 1 })
	eventually(t, "the RM sees it allocated", func() bool { return c.freeSlots() == 3 })
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
	if now := time.Now().UnixMilli(); got.TimeSinceLastHeartbeat < before || got.TimeSinceLastHeartbeat > now {
		t.Fatalf("timeSinceLastHeartbeat = %d, want epoch millis in [%d, %d]", got.TimeSinceLastHeartbeat, before, now)
	}
	one, err := c.rm.TaskManager(ctxT(t), "tm2")
	if err != nil || one != tms[1] {
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
	cfg := fastConfig()
	cfg.HeartbeatTimeout = time.Hour
	c := startRM(t, cfg)
	tm1, tm2 := startTE(t, "tm1", 1), startTE(t, "tm2", 1)
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
	if _, err := mailbox.Call(ctxT(t), c.rm.mb, func() (struct{}, error) {
		c.rm.workerEvent(providers.WorkerTerminated{WorkerID: "tm2", Cause: errors.New("exit status 137"), ExitStatus: 137})
		return struct{}{}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if ids := c.taskManagerIDs(); len(ids) != 0 {
		t.Fatalf("TaskManagers = %v, want none", ids)
	}
	if log := c.logs.String(); !strings.Contains(log, "shutting down") || !strings.Contains(log, "exit status 137") {
		t.Errorf("the log does not say why:\n%s", log)
	}
}

func TestInProcessAPIValidationAndStop(t *testing.T) {
	c := startRM(t, fastConfig())
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
