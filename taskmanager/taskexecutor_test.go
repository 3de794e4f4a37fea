package taskmanager

import (
	"context"
	"errors"
	"github.com/gofl/gofl/ha"
	"google.golang.org/grpc/credentials/insecure"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/clock"
	"github.com/gofl/gofl/internal/version"
	"github.com/gofl/gofl/rpc/pb"
)

func TestRegistrationRetriesUntilResourceManagerAppears(t *testing.T) {
	addr := freeAddr(t)
	clk := clock.NewFake(time.Unix(1000, 0))
	te, _, _, _ := startTE(t, Config{ResourceManagerAddress: addr, NumberOfSlots: 3, ResourceID: "tm-a", Clock: clk})
	// The first attempt failed and the next waits for its backoff.
	eventually(t, "a registration retry is pending", func() bool { return clk.Pending() > 0 })
	if s, err := te.Snapshot(context.Background()); err != nil || s.Registered {
		t.Fatalf("registered without a ResourceManager: %+v, %v", s, err)
	}
	rm := newFakeRM()
	serve(t, addr, func(s *grpc.Server) { pb.RegisterResourceManagerServiceServer(s, rm) })
	req := advanceUntil(t, clk, rm.registers, "registration")
	if req.ProtocolVersion != version.ProtocolVersion || req.NumberOfSlots != 3 || req.InstanceId == "" {
		t.Errorf("registration = %v", req)
	}
	loc := req.Location
	if loc.ResourceId != "tm-a" || loc.RpcAddress != te.Address() || loc.Host != "127.0.0.1" || loc.DataAddress != "" {
		t.Errorf("location = %v; address %s", loc, te.Address())
	}
	rep := recv(t, rm.reports, "slot report")
	if rep.ResourceId != "tm-a" || rep.InstanceId != req.InstanceId || len(rep.SlotReport.Slots) != 3 {
		t.Errorf("slot report = %v", rep)
	}
	for i, s := range rep.SlotReport.Slots {
		if int(s.SlotIndex) != i || s.AllocationId != "" {
			t.Errorf("slot %d = %v; want free", i, s)
		}
	}
	s, _ := te.Snapshot(context.Background())
	if !s.Registered || s.ResourceManagerID != "rm-1" {
		t.Errorf("snapshot = %+v", s)
	}
}

func TestDefaultResourceID(t *testing.T) {
	te, _, _, _ := startTE(t, Config{ResourceManagerAddress: freeAddr(t)})
	if !strings.HasPrefix(te.ResourceID(), te.Address()+"-") || len(te.ResourceID()) != len(te.Address())+7 {
		t.Errorf("resource ID %q for address %s", te.ResourceID(), te.Address())
	}
	if _, err := New(Config{NumberOfSlots: 0, ResourceManagerAddress: "nohost"}, testLogger(t)); err == nil ||
		!strings.Contains(err.Error(), "NumberOfSlots") || !strings.Contains(err.Error(), "host:port") {
		t.Errorf("New with a bad config = %v", err)
	}
}

func TestRegistrationRejectionsAreFatal(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{"protocol mismatch", status.Error(codes.FailedPrecondition, "protocol version 1 is not 2"),
			[]string{"rejected the registration", "protocol version 1", "protocol version 1 is not 2"}},
		{"duplicate", status.Error(codes.AlreadyExists, "tm-a is registered by instance abc"),
			[]string{`resource ID "tm-a" is held by another live TaskManager`, "registered by instance abc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rm := newFakeRM()
			rm.registerErr = func(n int) error {
				if n == 1 {
					return status.Error(codes.Unavailable, "starting")
				}
				return tc.err
			}
			addr, _ := serve(t, "127.0.0.1:0", func(s *grpc.Server) { pb.RegisterResourceManagerServiceServer(s, rm) })
			_, _, _, r := startTE(t, Config{ResourceManagerAddress: addr, ResourceID: "tm-a"})
			err := r.wait(t)
			if err == nil {
				t.Fatal("Run returned nil")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if n := len(rm.registers); n != 2 {
				t.Errorf("%d registration attempts; want 2 (a retry, then the fatal one)", n)
			}
		})
	}
}

func TestRequestSlotConnectsAndOffers(t *testing.T) {
	c := newCluster(t, nil, nil, Config{ResourceID: "tm-a"})
	if err := c.requestSlot("a1", 0, testJobID); err != nil {
		t.Fatal(err)
	}
	reg := recv(t, c.jm.registers, "RegisterTaskManager")
	if reg.JobId != testJobID || reg.ProtocolVersion != version.ProtocolVersion || reg.Location.ResourceId != "tm-a" || reg.Location.RpcAddress != c.te.Address() {
		t.Errorf("RegisterTaskManager = %v", reg)
	}
	offer := recv(t, c.jm.offers, "OfferSlots")
	if offer.JobId != testJobID || offer.ResourceId != "tm-a" || len(offer.Slots) != 1 || offer.Slots[0].AllocationId != "a1" || offer.Slots[0].SlotIndex != 0 {
		t.Errorf("OfferSlots = %v", offer)
	}
	eventually(t, "slot active", func() bool { return c.snapshot().Slots[0].Active })
	s := c.snapshot()
	if len(s.Jobs) != 1 || !s.Jobs[0].Connected || s.Jobs[0].JobMasterID != "jm-1" {
		t.Errorf("jobs = %+v", s.Jobs)
	}

	// Idempotent for the same allocation; no second registration or offer.
	if err := c.requestSlot("a1", 0, testJobID); err != nil {
		t.Errorf("repeated RequestSlot = %v", err)
	}
	// A second slot for the connected job is offered on the same connection.
	c.activeSlot("a2", 1, testJobID)
	if o := recv(t, c.jm.offers, "second offer"); len(o.Slots) != 1 || o.Slots[0].AllocationId != "a2" {
		t.Errorf("second offer = %v", o)
	}
	none(t, c.jm.registers, 50*time.Millisecond, "second RegisterTaskManager")

	for _, tc := range []struct {
		alloc string
		index int
		code  codes.Code
		msg   string
	}{
		{"b1", 0, codes.ResourceExhausted, "slot 0 is allocated to allocation a1 of job " + testJobID},
		{"b1", 7, codes.InvalidArgument, "slot index 7 out of range"},
		{"a1", 1, codes.FailedPrecondition, "allocation a1 already holds slot 0"},
	} {
		err := c.requestSlot(tc.alloc, tc.index, testJobID)
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("RequestSlot(%s, %d) = %v; want %v %q", tc.alloc, tc.index, err, tc.code, tc.msg)
		}
	}
	_, err := c.client.RequestSlot(context.Background(), &pb.RequestSlotRequest{AllocationId: "x", SlotIndex: 1, JobId: testJobID, JobMasterAddress: c.jmAddr, ResourceManagerId: "rm-old"})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "registered at rm-1") {
		t.Errorf("RequestSlot from another ResourceManager = %v", err)
	}
}

func TestRejectedOffersAreFreedAndReported(t *testing.T) {
	jm := newFakeJM()
	jm.accept = func(o *pb.SlotOffer) bool { return o.AllocationId == "a1" }
	c := newCluster(t, nil, jm, Config{})
	if err := c.requestSlot("a1", 0, testJobID); err != nil {
		t.Fatal(err)
	}
	if err := c.requestSlot("a2", 1, testJobID); err != nil {
		t.Fatal(err)
	}
	for {
		rep := recv(t, c.rm.reports, "slot report after the rejection")
		sl := rep.SlotReport.Slots
		if sl[1].AllocationId == "" && sl[0].AllocationId == "a1" {
			break
		}
	}
	s := c.snapshot()
	if !s.Slots[0].Active || s.Slots[1].AllocationID != "" {
		t.Errorf("slots = %+v", s.Slots)
	}
	if len(s.Jobs) != 1 {
		t.Errorf("job connection closed though slot a1 is held: %+v", s.Jobs)
	}

	// When every offered slot is rejected the connection is closed again.
	jm.accept = func(*pb.SlotOffer) bool { return false }
	if err := c.requestSlot("z1", 1, testJobID2); err != nil {
		t.Fatal(err)
	}
	d := recv(t, jm.disconnects, "DisconnectTaskManager for job2")
	if d.JobId != testJobID2 {
		t.Errorf("disconnect = %v", d)
	}
	eventually(t, "job2 forgotten", func() bool { return len(c.snapshot().Jobs) == 1 })
}

func TestUnacceptedSlotTimesOut(t *testing.T) {
	jm, rm := newFakeJM(), newFakeRM()
	jm.offerGate = make(chan struct{})
	rm.heartbeatTimeoutMs, jm.heartbeatTimeoutMs = 3_600_000, 3_600_000
	clk := clock.NewFake(time.Unix(1000, 0))
	c := newCluster(t, rm, jm, Config{SlotTimeout: time.Minute, Clock: clk})
	if err := c.requestSlot("a1", 0, testJobID); err != nil {
		t.Fatal(err)
	}
	recv(t, jm.offers, "offer")
	clk.Advance(59 * time.Second)
	if s := c.snapshot(); s.Slots[0].AllocationID != "a1" {
		t.Fatalf("slot freed before the slot timeout: %+v", s.Slots[0])
	}
	clk.Advance(time.Second)
	eventually(t, "slot freed after the slot timeout", func() bool { return c.snapshot().Slots[0].AllocationID == "" })
	close(jm.offerGate)
	eventually(t, "job forgotten", func() bool { return len(c.snapshot().Jobs) == 0 })
}

func TestSubmitTaskNeedsActiveSlotOfTheJob(t *testing.T) {
	jm := newFakeJM()
	gate := make(chan struct{})
	defer close(gate)
	c := newCluster(t, nil, jm, Config{})
	c.activeSlot("a1", 0, testJobID)
	a := attempt("v", 0, 0)

	const job0 = "00000000000000000000000000000000"
	err := c.submit(job0, tdd(job0, "a1", "noop", "", a))
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "not connected to the JobMaster of job "+job0) {
		t.Errorf("submit for an unknown job = %v", err)
	}
	err = c.submit(testJobID, tdd(testJobID, "nope", "noop", "", a))
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), `no slot is allocated to allocation "nope"`) {
		t.Errorf("submit to an unknown allocation = %v", err)
	}
	_, err = c.client.SubmitTask(context.Background(), &pb.SubmitTaskRequest{JobId: testJobID, JobMasterId: "jm-old", Tdd: tdd(testJobID, "a1", "noop", "", a)})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "JobMaster jm-old") {
		t.Errorf("submit from another JobMaster = %v", err)
	}

	// job2's slot stays inactive while its offer hangs.
	jm.offerGate = gate
	if err := c.requestSlot("a2", 1, testJobID2); err != nil {
		t.Fatal(err)
	}
	for o := recv(t, jm.offers, "offer"); o.JobId != testJobID2; o = recv(t, jm.offers, "offer") {
	}
	err = c.submit(testJobID, tdd(testJobID, "a2", "noop", "", a))
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "slot 1 (allocation a2) belongs to job "+testJobID2+", not "+testJobID) {
		t.Errorf("submit to another job's slot = %v", err)
	}
	// Deploying into the offered slot proves the JobMaster accepted it, even
	// before its OfferSlots reply arrives (Flink's tryMarkSlotActive).
	if err := c.submit(testJobID2, tdd(testJobID2, "a2", "noop", "", a)); err != nil {
		t.Errorf("submit to an offered slot whose reply is pending = %v", err)
	}
}

func TestNoopTaskReportsInOrderAndKeepsBlockingPartitions(t *testing.T) {
	c := newCluster(t, nil, nil, Config{})
	c.activeSlot("a1", 0, testJobID)
	a := attempt("src", 0, 0)
	d := tdd(testJobID, "a1", "noop", "", a)
	d.ProducedPartitions = []*pb.ResultPartitionDeploymentDescriptor{
		{ResultId: "r-blocking", PartitionIndex: 0, PartitionType: pb.ResultPartitionType_RESULT_PARTITION_TYPE_BLOCKING, NumberOfSubpartitions: 2},
		{ResultId: "r-pipelined", PartitionIndex: 0, PartitionType: pb.ResultPartitionType_RESULT_PARTITION_TYPE_PIPELINED, NumberOfSubpartitions: 2},
	}
	if err := c.submit(testJobID, d); err != nil {
		t.Fatal(err)
	}
	if err := c.submit(testJobID, d); status.Code(err) != codes.AlreadyExists && err != nil {
		t.Errorf("duplicate submit = %v", err)
	}
	us := c.states(a, 3)
	if got := stateNames(us); !slices.Equal(got, []string{StateInitializing, StateRunning, StateFinished}) {
		t.Fatalf("states = %v", got)
	}
	for _, u := range us {
		if u.JobId != testJobID || u.Failure != nil {
			t.Errorf("update = %v", u)
		}
	}
	if m := us[2].Metrics; m == nil || attemptKey(m.Attempt) != attemptKey(a) {
		t.Errorf("the final update carries no final metrics: %v", us[2])
	}
	s := c.snapshot()
	if len(s.Tasks) != 0 || len(s.Partitions) != 1 || s.Partitions[0].ResultID != "r-blocking" || s.Partitions[0].Producer != attemptKey(a) {
		t.Fatalf("tasks %+v, partitions %+v", s.Tasks, s.Partitions)
	}

	// Freeing the slot keeps the connection while a partition is held.
	if _, err := c.client.FreeSlot(context.Background(), &pb.FreeSlotRequest{AllocationId: "a1", Cause: "idle"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "slot free", func() bool { return c.snapshot().Slots[0].AllocationID == "" })
	if s := c.snapshot(); len(s.Jobs) != 1 {
		t.Errorf("connection closed while a partition is kept: %+v", s.Jobs)
	}
	_, err := c.client.ReleasePartitions(context.Background(), &pb.ReleasePartitionsRequest{JobId: testJobID, Partitions: []*pb.ResultPartitionIDProto{
		{ResultId: "r-blocking", PartitionIndex: 0, Producer: a},
		{ResultId: "unknown", PartitionIndex: 3, Producer: a},
	}})
	if err != nil {
		t.Fatal(err)
	}
	s = c.snapshot()
	if len(s.Partitions) != 0 || len(s.Jobs) != 0 {
		t.Errorf("after release: partitions %+v, jobs %+v", s.Partitions, s.Jobs)
	}
	recv(t, c.jm.disconnects, "DisconnectTaskManager once the job holds nothing")
}

func TestCancelSleepingTask(t *testing.T) {
	c := newCluster(t, nil, nil, Config{})
	c.activeSlot("a1", 0, testJobID)
	a := attempt("sleeper", 0, 0)
	if err := c.submit(testJobID, tdd(testJobID, "a1", "sleep", `{"duration":"1 min"}`, a)); err != nil {
		t.Fatal(err)
	}
	if got := stateNames(c.states(a, 2)); !slices.Equal(got, []string{StateInitializing, StateRunning}) {
		t.Fatalf("states = %v", got)
	}
	hb, err := c.client.HeartbeatFromJobManager(context.Background(), &pb.HeartbeatRequest{SenderId: "jm-1", JobId: testJobID})
	if err != nil || len(hb.Running) != 1 || attemptKey(hb.Running[0]) != attemptKey(a) || hb.SlotReport.Slots[0].AllocationId != "a1" {
		t.Fatalf("heartbeat = %v, %v", hb, err)
	}
	// A built-in task exchanges no data: its metrics are zeros.
	if len(hb.Metrics) != 1 || attemptKey(hb.Metrics[0].Attempt) != attemptKey(a) || hb.Metrics[0].NumRecordsIn != 0 || hb.Metrics[0].TimestampMs == 0 {
		t.Fatalf("heartbeat metrics = %v", hb.Metrics)
	}
	for i := 0; i < 2; i++ { // idempotent
		if _, err := c.client.CancelTask(context.Background(), &pb.CancelTaskRequest{JobId: testJobID, Attempt: a}); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.states(a, 1)[0].State; got != StateCanceled {
		t.Fatalf("state = %s; want CANCELED", got)
	}
	if _, err := c.client.CancelTask(context.Background(), &pb.CancelTaskRequest{JobId: testJobID, Attempt: attempt("nope", 0, 0)}); err != nil {
		t.Errorf("cancel of an unknown task = %v", err)
	}
	eventually(t, "task gone", func() bool { return len(c.snapshot().Tasks) == 0 })
	if s := c.snapshot(); !s.Slots[0].Active {
		t.Errorf("cancelling a task must keep its slot: %+v", s.Slots[0])
	}
}

func TestFailAfterNFailsThenPasses(t *testing.T) {
	c := newCluster(t, nil, nil, Config{})
	c.activeSlot("a1", 0, testJobID)
	cfg := `{"duration":"10ms","failAttempts":1}`
	a0 := attempt("flaky", 0, 0)
	if err := c.submit(testJobID, tdd(testJobID, "a1", "fail-after-n", cfg, a0)); err != nil {
		t.Fatal(err)
	}
	us := c.states(a0, 3)
	if got := stateNames(us); !slices.Equal(got, []string{StateInitializing, StateRunning, StateFailed}) {
		t.Fatalf("attempt 0 states = %v", got)
	}
	if f := us[2].Failure; f == nil || f.Type != "recoverable" || !strings.Contains(f.Message, "attempt 0 fails") || f.Stack != "" {
		t.Errorf("failure = %v", f)
	}
	a1 := attempt("flaky", 0, 1)
	if err := c.submit(testJobID, tdd(testJobID, "a1", "fail-after-n", cfg, a1)); err != nil {
		t.Fatal(err)
	}
	if got := stateNames(c.states(a1, 3)); !slices.Equal(got, []string{StateInitializing, StateRunning, StateFinished}) {
		t.Fatalf("attempt 1 states = %v", got)
	}
}

func TestFailuresAreClassified(t *testing.T) {
	c := newCluster(t, nil, nil, Config{})
	c.activeSlot("a1", 0, testJobID)

	p := attempt("panicky", 0, 0)
	if err := c.submit(testJobID, tdd(testJobID, "a1", "test-panic", "", p)); err != nil {
		t.Fatal(err)
	}
	us := c.states(p, 3)
	if got := stateNames(us); !slices.Equal(got, []string{StateInitializing, StateRunning, StateFailed}) {
		t.Fatalf("panic states = %v", got)
	}
	if f := us[2].Failure; f == nil || f.Type != "recoverable" || !strings.Contains(f.Message, "task panicked: boom") ||
		!strings.Contains(f.Stack, "goroutine") || !strings.Contains(f.Stack, "TestMain") {
		t.Errorf("panic failure = %v", f)
	}

	u := attempt("unknown", 0, 0)
	if err := c.submit(testJobID, tdd(testJobID, "a1", "no-such-invokable", "", u)); err != nil {
		t.Fatal(err)
	}
	us = c.states(u, 1) // fails while deploying: no INITIALIZING
	if f := us[0].Failure; us[0].State != StateFailed || f == nil || f.Type != "non-recoverable" || !strings.Contains(f.Message, `unknown invokable "no-such-invokable"`) {
		t.Errorf("unknown invokable update = %v", us[0])
	}

	b := attempt("badconfig", 0, 0)
	if err := c.submit(testJobID, tdd(testJobID, "a1", "sleep", `{"duration":"soon"}`, b)); err != nil {
		t.Fatal(err)
	}
	us = c.states(b, 1)
	if f := us[0].Failure; us[0].State != StateFailed || f == nil || f.Type != "non-recoverable" || !strings.Contains(f.Message, "duration") {
		t.Errorf("bad config update = %v", us[0])
	}
}

func TestJobMasterHeartbeatTimeout(t *testing.T) {
	jm, rm := newFakeJM(), newFakeRM()
	jm.heartbeatTimeoutMs, rm.heartbeatTimeoutMs = 10_000, 3_600_000
	clk := clock.NewFake(time.Unix(1000, 0))
	c := newCluster(t, rm, jm, Config{Clock: clk})
	c.activeSlot("a1", 0, testJobID)
	a := attempt("sleeper", 0, 0)
	if err := c.submit(testJobID, tdd(testJobID, "a1", "sleep", `{"duration":"1 min"}`, a)); err != nil {
		t.Fatal(err)
	}
	c.states(a, 2)
	// Heartbeats keep the JobMaster alive well past the timeout.
	for i := 0; i < 10; i++ {
		if _, err := c.client.HeartbeatFromJobManager(context.Background(), &pb.HeartbeatRequest{SenderId: "jm-1", JobId: testJobID}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(3 * time.Second)
	}
	if s := c.snapshot(); len(s.Tasks) != 1 || len(s.Jobs) != 1 {
		t.Fatalf("lost the JobMaster despite heartbeats: %+v", s)
	}
	none(t, jm.disconnects, 0, "DisconnectTaskManager despite heartbeats")
	clk.Advance(10 * time.Second)
	d := recv(t, jm.disconnects, "DisconnectTaskManager after the heartbeat timeout")
	if d.JobId != testJobID || !strings.Contains(d.Cause, "heartbeat") {
		t.Errorf("disconnect = %v", d)
	}
	eventually(t, "task cancelled and slot freed", func() bool {
		s := c.snapshot()
		return len(s.Tasks) == 0 && s.Slots[0].AllocationID == "" && len(s.Jobs) == 0
	})
	for {
		rep := recv(t, c.rm.reports, "slot report with the slot free")
		if rep.SlotReport.Slots[0].AllocationId == "" {
			break
		}
	}
	_, err := c.client.HeartbeatFromJobManager(context.Background(), &pb.HeartbeatRequest{SenderId: "jm-1", JobId: testJobID})
	if status.Code(err) != codes.NotFound {
		t.Errorf("heartbeat of a forgotten job = %v", err)
	}

	// The JobMaster is back: the next slot request registers again.
	jm.heartbeatTimeoutMs = 60_000
	c.activeSlot("a2", 0, testJobID)
	if r := recv(t, jm.registers, "second RegisterTaskManager"); r.JobId != testJobID {
		t.Errorf("register = %v", r)
	}
}

func TestDisconnectJobManagerFreesTheJob(t *testing.T) {
	c := newCluster(t, nil, nil, Config{})
	c.activeSlot("a1", 0, testJobID)
	c.activeSlot("a2", 1, testJobID2)
	a := attempt("sleeper", 0, 0)
	if err := c.submit(testJobID, tdd(testJobID, "a1", "sleep", `{"duration":"1 min"}`, a)); err != nil {
		t.Fatal(err)
	}
	c.states(a, 2)
	if _, err := c.client.DisconnectJobManager(context.Background(), &pb.DisconnectJobManagerRequest{JobId: testJobID, Cause: "job finished"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "job1 freed", func() bool {
		s := c.snapshot()
		return len(s.Tasks) == 0 && s.Slots[0].AllocationID == "" && len(s.Jobs) == 1 && s.Slots[1].Active
	})
}

func TestResourceManagerHeartbeatLossReregisters(t *testing.T) {
	rm, jm := newFakeRM(), newFakeJM()
	rm.heartbeatTimeoutMs, jm.heartbeatTimeoutMs = 10_000, 3_600_000
	clk := clock.NewFake(time.Unix(1000, 0))
	c := newCluster(t, rm, jm, Config{Clock: clk})
	c.activeSlot("a1", 0, testJobID)
	for i := 0; i < 10; i++ {
		hb, err := c.client.HeartbeatFromResourceManager(context.Background(), &pb.HeartbeatRequest{SenderId: "rm-1"})
		if err != nil || hb.SlotReport.Slots[0].AllocationId != "a1" {
			t.Fatalf("heartbeat = %v, %v", hb, err)
		}
		clk.Advance(3 * time.Second)
	}
	c.snapshot() // the timers' turns ran
	none(t, rm.registers, 0, "re-registration despite heartbeats")
	clk.Advance(10 * time.Second)
	recv(t, rm.registers, "re-registration after the heartbeat timeout")
	for {
		rep := recv(t, rm.reports, "slot report after re-registration")
		if rep.SlotReport.Slots[0].AllocationId == "a1" && rep.SlotReport.Slots[0].JobId == testJobID {
			break
		}
	}
	if s := c.snapshot(); !s.Registered || !s.Slots[0].Active {
		t.Errorf("after re-registration: %+v", s)
	}
}

func TestShutdownFailsTasksAndDisconnects(t *testing.T) {
	c := newCluster(t, nil, nil, Config{ResourceID: "tm-a"})
	c.activeSlot("a1", 0, testJobID)
	a := attempt("sleeper", 0, 0)
	if err := c.submit(testJobID, tdd(testJobID, "a1", "sleep", `{"duration":"1 min"}`, a)); err != nil {
		t.Fatal(err)
	}
	c.states(a, 2)
	c.cancel() // SIGTERM: Nomad alloc stop, node drain, local provider
	if err := c.run.wait(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
	// Not CANCELED: the JobMaster did not cancel the task and would never
	// restart it; a recoverable environment failure makes it fail over.
	u := c.states(a, 1)[0]
	if f := u.Failure; u.State != StateFailed || f.GetType() != "environment" || !strings.Contains(f.GetMessage(), "TaskManager tm-a is shutting down") {
		t.Errorf("update on shutdown = %v", u)
	}
	recv(t, c.jm.disconnects, "DisconnectTaskManager on shutdown")
	if d := recv(t, c.rm.disconnects, "DisconnectTaskExecutor on shutdown"); d.ResourceId != c.te.ResourceID() {
		t.Errorf("disconnect = %v", d)
	}
	if _, err := c.te.Snapshot(context.Background()); err == nil {
		t.Error("Snapshot after Run returned")
	}
}

func TestShutdownKeepsCancelsTheJobMasterAskedFor(t *testing.T) {
	c := newCluster(t, nil, nil, Config{ResourceID: "tm-a"})
	c.activeSlot("a1", 0, testJobID)
	a := attempt("slow-cancel", 0, 0)
	if err := c.submit(testJobID, tdd(testJobID, "a1", "test-ignore-cancel", "", a)); err != nil {
		t.Fatal(err)
	}
	c.states(a, 2)
	if _, err := c.client.CancelTask(context.Background(), &pb.CancelTaskRequest{JobId: testJobID, Attempt: a}); err != nil {
		t.Fatal(err)
	}
	c.cancel() // the shutdown overtakes the task's end
	eventually(t, "shutting down", func() bool {
		_, err := c.client.RequestSlot(context.Background(), &pb.RequestSlotRequest{AllocationId: "x", SlotIndex: 1, JobId: testJobID, JobMasterAddress: c.jmAddr})
		return status.Code(err) == codes.Unavailable
	})
	testRelease <- struct{}{}
	if got := c.states(a, 1)[0].State; got != StateCanceled {
		t.Errorf("state = %s; want CANCELED, as the JobMaster asked", got)
	}
	if err := c.run.wait(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
}

func TestFailingStateUpdatesLoseTheJobMaster(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	c := newCluster(t, nil, nil, Config{Clock: clk, ReportDeadline: 5 * time.Second})
	c.activeSlot("a1", 0, testJobID)
	c.jm.updateErr.Store(status.Error(codes.Unavailable, "JobMaster overloaded"))
	a := attempt("sleeper", 0, 0)
	if err := c.submit(testJobID, tdd(testJobID, "a1", "sleep", `{"duration":"1 min"}`, a)); err != nil {
		t.Fatal(err)
	}
	// INITIALIZING is retried until its deadline; RUNNING never overtakes it.
	var d *pb.DisconnectTaskManagerRequest
	attempts, deadline := 0, time.After(waitFor)
	for d == nil {
		select {
		case u := <-c.jm.updates:
			if u.State != StateInitializing {
				t.Fatalf("update %s overtook INITIALIZING", u.State)
			}
			attempts++
		case d = <-c.jm.disconnects:
		case <-time.After(10 * time.Millisecond): // retries wait on the fake clock
			clk.Advance(100 * time.Millisecond)
		case <-deadline:
			t.Fatal("the JobMaster was not given up")
		}
	}
	if attempts < 2 || !strings.Contains(d.Cause, "was not delivered within 5s") {
		t.Errorf("%d attempts; disconnect cause = %q", attempts, d.Cause)
	}
	eventually(t, "task cancelled and slot freed", func() bool {
		s := c.snapshot()
		return len(s.Tasks) == 0 && s.Slots[0].AllocationID == "" && len(s.Jobs) == 0
	})

	// NOT_FOUND means the JobMaster forgot the attempt: dropped, not fatal.
	c.jm.updateErr.Store(status.Error(codes.NotFound, "unknown attempt"))
	c.activeSlot("a2", 0, testJobID)
	b := attempt("noop", 0, 0)
	if err := c.submit(testJobID, tdd(testJobID, "a2", "noop", "", b)); err != nil {
		t.Fatal(err)
	}
	if got := stateNames(c.states(b, 3)); !slices.Equal(got, []string{StateInitializing, StateRunning, StateFinished}) {
		t.Fatalf("updates = %v", got)
	}
	if s := c.snapshot(); len(s.Jobs) != 1 || !s.Slots[0].Active {
		t.Errorf("NOT_FOUND lost the JobMaster: %+v", s)
	}

	// FAILED_PRECONDITION is the JobMaster rejecting the update (a RUNNING
	// that raced a cancel): dropped at once, not retried, not fatal.
	c.jm.updateErr.Store(status.Error(codes.FailedPrecondition, "illegal execution state transition"))
	d2 := attempt("noop", 1, 0)
	if err := c.submit(testJobID, tdd(testJobID, "a2", "noop", "", d2)); err != nil {
		t.Fatal(err)
	}
	if got := stateNames(c.states(d2, 3)); !slices.Equal(got, []string{StateInitializing, StateRunning, StateFinished}) {
		t.Fatalf("updates = %v", got)
	}
	if s := c.snapshot(); len(s.Jobs) != 1 || !s.Slots[0].Active {
		t.Errorf("FAILED_PRECONDITION lost the JobMaster: %+v", s)
	}
}

// Without high availability a TaskManager whose ResourceManager went
// silent stops, failing its tasks, instead of registering again.
func TestResourceManagerLossStopsTheTaskManagerWithoutHA(t *testing.T) {
	rm, jm := newFakeRM(), newFakeJM()
	rm.heartbeatTimeoutMs, jm.heartbeatTimeoutMs = 10_000, 3_600_000
	clk := clock.NewFake(time.Unix(1000, 0))
	c := newCluster(t, rm, jm, Config{Clock: clk, ResourceID: "tm-a", ExitOnResourceManagerLoss: true})
	c.activeSlot("a1", 0, testJobID)
	a := attempt("sleeper", 0, 0)
	if err := c.submit(testJobID, tdd(testJobID, "a1", "sleep", `{"duration":"1 min"}`, a)); err != nil {
		t.Fatal(err)
	}
	c.states(a, 2)
	clk.Advance(9 * time.Second)
	c.snapshot() // the timers' turns ran
	none(t, rm.registers, 0, "re-registration before the heartbeat timeout")
	clk.Advance(time.Second)
	err := c.run.wait(t)
	if !errors.Is(err, ErrResourceManagerLost) || !strings.Contains(err.Error(), "without high availability") {
		t.Fatalf("Run = %v, want ErrResourceManagerLost", err)
	}
	if u := c.states(a, 1)[0]; u.State != StateFailed {
		t.Errorf("task update on the loss = %v", u)
	}
	none(t, rm.registers, 0, "re-registration after the loss")
}

// A registration that does not succeed within
// taskmanager.registration.timeout stops the TaskManager (Flink's
// registration timeout), however often it was retried.
func TestRegistrationTimeoutStopsTheTaskManager(t *testing.T) {
	rm := newFakeRM()
	rm.registerErr = func(int) error { return status.Error(codes.Unavailable, "not there") }
	addr, _ := serve(t, "127.0.0.1:0", func(s *grpc.Server) { pb.RegisterResourceManagerServiceServer(s, rm) })
	clk := clock.NewFake(time.Unix(1000, 0))
	te, _, _, r := startTE(t, Config{ResourceManagerAddress: addr, Clock: clk, RegistrationTimeout: 30 * time.Second})
	recv(t, rm.registers, "first registration")
	clk.Advance(29 * time.Second)
	if _, err := te.Snapshot(context.Background()); err != nil { // the timers' turns ran
		t.Fatal(err)
	}
	select {
	case <-r.done:
		t.Fatalf("Run returned %v before the registration timeout", r.err)
	default:
	}
	clk.Advance(time.Second)
	err := r.wait(t)
	if !errors.Is(err, ErrRegistrationTimeout) || !strings.Contains(err.Error(), "taskmanager.registration.timeout") {
		t.Fatalf("Run = %v, want ErrRegistrationTimeout", err)
	}
}

// Without high availability, a TaskManager that was registered and has to
// register again (its ResourceManager no longer knows it) stops once the
// ResourceManager stays unreachable for the heartbeat timeout, as if it
// had gone silent while registered: a registration whose answer was lost
// with its JobManager must not retry for ever.
func TestLostRegistrationWithoutHAStopsAfterTheHeartbeatTimeout(t *testing.T) {
	rm := newFakeRM()
	rm.heartbeatTimeoutMs = 10_000
	rm.registerErr = func(n int) error {
		if n == 1 {
			return nil
		}
		return status.Error(codes.Unavailable, "connection refused")
	}
	rm.reportErr = func(int) error { return status.Error(codes.NotFound, "unknown TaskManager") }
	addr, _ := serve(t, "127.0.0.1:0", func(s *grpc.Server) { pb.RegisterResourceManagerServiceServer(s, rm) })
	clk := clock.NewFake(time.Unix(1000, 0))
	te, _, _, r := startTE(t, Config{ResourceManagerAddress: addr, Clock: clk, ExitOnResourceManagerLoss: true})
	recv(t, rm.registers, "first registration")
	recv(t, rm.reports, "first slot report")
	eventually(t, "the refused report ended the registration", func() bool {
		s, err := te.Snapshot(context.Background())
		return err == nil && !s.Registered
	})
	lost := clk.Now()
	clk.Advance(9 * time.Second)
	if _, err := te.Snapshot(context.Background()); err != nil { // the timers' turns ran
		t.Fatal(err)
	}
	recv(t, rm.registers, "registering again")
	select {
	case <-r.done:
		t.Fatalf("Run returned %v before the heartbeat timeout", r.err)
	default:
	}
	clk.Advance(lost.Add(10 * time.Second).Sub(clk.Now()))
	err := r.wait(t)
	if !errors.Is(err, ErrResourceManagerLost) || !strings.Contains(err.Error(), "without high availability") {
		t.Fatalf("Run = %v, want ErrResourceManagerLost", err)
	}
}

// fakeLeaderHA hands the test the TaskExecutor's ResourceManager leader
// listener; nothing else of ha.Services is used.
type fakeLeaderHA struct {
	ha.Services
	listeners chan ha.LeaderRetrievalListener
}

func (f *fakeLeaderHA) LeaderRetriever(component string, l ha.LeaderRetrievalListener) (ha.LeaderRetriever, error) {
	f.listeners <- l
	return nopCloser{}, nil
}

// haCluster is a TaskExecutor following a fake leader retrieval, with its
// fake RM and JM at the first leader's address; it returns the listener.
func haCluster(t *testing.T, rm *fakeRM, jm *fakeJM, cfg Config) (*cluster, ha.LeaderRetrievalListener) {
	t.Helper()
	f := &fakeLeaderHA{listeners: make(chan ha.LeaderRetrievalListener, 1)}
	cfg.LeaderRetrieval = f
	cfg.DialResourceManager = func(addr string) (pb.ResourceManagerServiceClient, io.Closer, error) {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, nil, err
		}
		return pb.NewResourceManagerServiceClient(cc), cc, nil
	}
	c := newCluster(t, rm, jm, cfg)
	l := recv(t, f.listeners, "leader listener")
	return c, l
}

// A new leader session at the old leader's address (a JobManager restarted
// on its ports) still means the JobMasters connected before lost their
// leadership: the job's tasks are cancelled and the TaskManager registers
// at the new leader. The job's slot is kept (taskmanager.slot.timeout):
// the slot report to the new leader shows it allocated to the job, and it
// is offered to the job's new JobMaster, which takes it: the same
// allocation runs the job's next attempt.
func TestNewLeaderKeepsTheJobsSlotsForItsNextJobMaster(t *testing.T) {
	c, l := haCluster(t, nil, nil, Config{})
	l.NotifyLeaderAddress(ha.LeaderInformation{SessionID: ha.NewSessionID(), Address: c.jmAddr})
	c.activeSlot("a1", 0, testJobID)
	recv(t, c.jm.offers, "offer to the first leader")
	a := attempt("sleeper", 0, 0)
	if err := c.submit(testJobID, tdd(testJobID, "a1", "sleep", `{"duration":"1 min"}`, a)); err != nil {
		t.Fatal(err)
	}
	c.states(a, 2)
	l.NotifyLeaderAddress(ha.LeaderInformation{SessionID: ha.NewSessionID(), Address: c.jmAddr})
	recv(t, c.rm.registers, "registration at the new leader")
	for {
		r := recv(t, c.rm.reports, "slot report to the new leader")
		if sl := r.SlotReport.Slots[0]; sl.AllocationId == "a1" && sl.JobId == testJobID {
			break
		}
	}
	o := recv(t, c.jm.offers, "offer of the kept slot to the new JobMaster")
	if len(o.Slots) != 1 || o.Slots[0].AllocationId != "a1" || o.Slots[0].SlotIndex != 0 {
		t.Fatalf("offer = %v, want the kept allocation a1 in slot 0", o.Slots)
	}
	eventually(t, "the old task is gone and the kept slot active again", func() bool {
		s := c.snapshot()
		return len(s.Tasks) == 0 && s.Slots[0].AllocationID == "a1" && s.Slots[0].Active && !s.Slots[0].Kept && len(s.Jobs) == 1
	})
	b := attempt("sleeper", 0, 1)
	if err := c.submit(testJobID, tdd(testJobID, "a1", "sleep", `{"duration":"1 min"}`, b)); err != nil {
		t.Fatal(err)
	}
	c.states(b, 2)
}

// A kept slot that no JobMaster takes is freed after
// taskmanager.slot.timeout (an injected clock): the new leader's JobMaster
// is not there at first (its registration is refused), then refuses the
// slot; until the timeout the slot stays allocated to the job and is
// offered again, then it is freed and reported free.
func TestKeptSlotNobodyTakesIsFreedAfterTheSlotTimeout(t *testing.T) {
	rm, jm := newFakeRM(), newFakeJM()
	rm.heartbeatTimeoutMs, jm.heartbeatTimeoutMs = 3_600_000, 3_600_000
	var refuse atomic.Bool
	jm.accept = func(*pb.SlotOffer) bool { return !refuse.Load() }
	clk := clock.NewFake(time.Unix(1000, 0))
	const timeout = time.Minute
	c, l := haCluster(t, rm, jm, Config{Clock: clk, SlotTimeout: timeout})
	l.NotifyLeaderAddress(ha.LeaderInformation{SessionID: ha.NewSessionID(), Address: c.jmAddr})
	c.activeSlot("a1", 0, testJobID)
	recv(t, jm.registers, "registration at the first JobMaster")
	recv(t, jm.offers, "offer to the first JobMaster")
	jm.refuseRegistrations.Store(1)
	refuse.Store(true)
	kept := clk.Now()
	l.NotifyLeaderAddress(ha.LeaderInformation{SessionID: ha.NewSessionID(), Address: c.jmAddr})
	recv(t, rm.registers, "registration at the new leader")
	recv(t, jm.registers, "registration at the new JobMaster (refused)")
	if s := c.snapshot().Slots[0]; s.AllocationID != "a1" || !s.Kept || s.Active {
		t.Fatalf("slot after the leader change = %+v, want a1 kept and inactive", s)
	}
	advanceUntil(t, clk, jm.registers, "the registration retried after its pause")
	o := recv(t, jm.offers, "offer of the kept slot (refused)")
	if len(o.Slots) != 1 || o.Slots[0].AllocationId != "a1" {
		t.Fatalf("offer = %v, want a1", o.Slots)
	}
	advanceUntil(t, clk, jm.offers, "the kept slot offered again after the pause")
	// Up to just before the timeout the slot stays the job's.
	clk.Advance(kept.Add(timeout - time.Second).Sub(clk.Now()))
	if s := c.snapshot().Slots[0]; s.AllocationID != "a1" || !s.Kept {
		t.Fatalf("slot %v after the leader change = %+v, want a1 still kept", timeout-time.Second, s)
	}
	clk.Advance(time.Second)
	eventually(t, "the kept slot freed after the slot timeout and its job forgotten", func() bool {
		s := c.snapshot()
		return s.Slots[0].AllocationID == "" && !s.Slots[0].Kept && len(s.Jobs) == 0
	})
	for {
		r := recv(t, rm.reports, "slot report with the slot free")
		if r.SlotReport.Slots[0].AllocationId == "" {
			break
		}
	}
}

// A checkpoint notice carries its JobMaster's leader session: once this
// TaskManager saw that session replaced, the notice is refused, so a
// deposed JobManager never makes a sink commit; the new leader's (and a
// session not heard of yet) are accepted.
func TestCheckpointNoticeFromADeposedLeaderIsRefused(t *testing.T) {
	c, l := haCluster(t, nil, nil, Config{})
	old, next := ha.NewSessionID(), ha.NewSessionID()
	l.NotifyLeaderAddress(ha.LeaderInformation{SessionID: old, Address: c.jmAddr})
	c.activeSlot("a1", 0, testJobID)
	a := attempt("sleeper", 0, 0)
	if err := c.submit(testJobID, tdd(testJobID, "a1", "sleep", `{"duration":"1 min"}`, a)); err != nil {
		t.Fatal(err)
	}
	c.states(a, 2)
	ctx := context.Background()
	notify := func(s ha.SessionID, a *pb.ExecutionAttemptID) error {
		_, err := c.client.NotifyCheckpoint(ctx, &pb.NotifyCheckpointRequest{JobId: testJobID, Attempt: a, CheckpointId: 7, Complete: true,
			LeaderSessionId: s.String()})
		return err
	}
	if err := notify(old, a); err != nil {
		t.Fatalf("the leader's notice: %v", err)
	}
	l.NotifyLeaderAddress(ha.LeaderInformation{SessionID: next, Address: c.jmAddr})
	recv(t, c.rm.registers, "registration at the new leader")
	// The ResourceManager got the registration; its answer arrives after.
	eventually(t, "the old leader's task is gone, the TaskManager registered again and the new JobMaster took the kept slot", func() bool {
		s := c.snapshot()
		return len(s.Tasks) == 0 && s.Registered && s.Slots[0].AllocationID == "a1" && s.Slots[0].Active
	})
	// The new leader's JobMaster deploys the job again on the slot.
	b := attempt("sleeper", 0, 1)
	if err := c.submit(testJobID, tdd(testJobID, "a1", "sleep", `{"duration":"1 min"}`, b)); err != nil {
		t.Fatal(err)
	}
	c.states(b, 2)
	err := notify(old, b)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), ErrDeposedLeader.Error()) || !strings.Contains(err.Error(), next.String()) {
		t.Fatalf("the deposed leader's notice answered %v, want FAILED_PRECONDITION naming %v and the new session", err, ErrDeposedLeader)
	}
	if err := notify(next, b); err != nil {
		t.Fatalf("the new leader's notice: %v", err)
	}
	if err := notify(ha.NewSessionID(), b); err != nil {
		t.Fatalf("a leader session not heard of yet: %v", err)
	}
}
