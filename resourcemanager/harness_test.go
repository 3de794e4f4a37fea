package resourcemanager

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/clock"
	"github.com/gofl/gofl/internal/mailbox"
	"github.com/gofl/gofl/internal/version"
	"github.com/gofl/gofl/rpc/pb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testConfig heartbeats every second and times out after three, on the
// test's fake clock. RPCs are in memory and answer at once unless a test
// makes them hang, so the (wall-clock) RPC timeout rarely matters.
func testConfig() Config {
	return Config{
		HeartbeatInterval:  time.Second,
		HeartbeatTimeout:   3 * time.Second,
		SlotRequestTimeout: time.Minute,
		RPCTimeout:         10 * time.Second,
	}
}

// waitFor is how long tests wait for an event before failing: generous, for
// a loaded 2-core machine under -race.
const waitFor = 30 * time.Second

// logBuffer collects the ResourceManager's log; a failed test prints it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// testExec is the ResourceManager's mailbox.Executor in tests: it runs the
// turns on one goroutine, like the default mailbox, but counts the work
// outstanding (queued turns and calls in flight), so a test can wait until
// the ResourceManager has nothing left to do (settle) instead of sleeping.
type testExec struct {
	mu          sync.Mutex
	queue       []func()
	outstanding int
	halted      bool
	signal      chan struct{}
	halt        chan struct{}
	loopDone    chan struct{}
	calls       sync.WaitGroup
}

func newTestExec() *testExec {
	e := &testExec{signal: make(chan struct{}, 1), halt: make(chan struct{}), loopDone: make(chan struct{})}
	go e.loop()
	return e
}

func (e *testExec) loop() {
	defer close(e.loopDone)
	for {
		select {
		case <-e.halt:
			return
		case <-e.signal:
		}
		for {
			e.mu.Lock()
			if e.halted || len(e.queue) == 0 {
				e.mu.Unlock()
				break
			}
			fn := e.queue[0]
			e.queue = e.queue[1:]
			e.mu.Unlock()
			fn()
			e.mu.Lock()
			e.outstanding--
			e.mu.Unlock()
		}
	}
}

func (e *testExec) Post(_ *mailbox.Mailbox, fn func()) {
	e.mu.Lock()
	if e.halted {
		e.mu.Unlock()
		return
	}
	e.queue = append(e.queue, fn)
	e.outstanding++
	e.mu.Unlock()
	select {
	case e.signal <- struct{}{}:
	default:
	}
}

func (e *testExec) Call(m *mailbox.Mailbox, fn func()) {
	done := make(chan struct{})
	e.Post(m, func() { fn(); close(done) })
	select {
	case <-done:
	case <-e.halt:
		<-e.loopDone // fn ran to its end, or never will
	}
}

func (e *testExec) Go(m *mailbox.Mailbox, call func(ctx context.Context), then func()) {
	e.mu.Lock()
	e.outstanding++
	e.mu.Unlock()
	e.calls.Add(1)
	go func() {
		defer e.calls.Done()
		call(m.Context())
		if m.Context().Err() == nil {
			e.Post(m, then)
		}
		e.mu.Lock()
		e.outstanding--
		e.mu.Unlock()
	}()
}

func (e *testExec) idle() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.outstanding == 0
}

// stop runs no more turns; the turn running finishes first.
func (e *testExec) stop() {
	e.mu.Lock()
	if !e.halted {
		e.halted = true
		close(e.halt)
	}
	e.mu.Unlock()
	<-e.loopDone
}

// cluster is a ResourceManager on a fake clock, its service on gRPC over
// loopback, and the fake TaskExecutors it reaches in memory.
type cluster struct {
	t      *testing.T
	rm     *ResourceManager
	clk    *clock.Fake
	exec   *testExec
	client pb.ResourceManagerServiceClient
	logs   *logBuffer
	stop   func()

	mu    sync.Mutex
	fakes map[string]*fakeTE // by RPC address
	n     int
}

func startRM(t *testing.T, cfg Config) *cluster {
	t.Helper()
	return startRMWithLogs(t, cfg, &logBuffer{}, nil)
}

// startRMWithLogs is startRM logging to logs; listening, if not nil, learns
// the RM's address before it runs.
func startRMWithLogs(t *testing.T, cfg Config, logs *logBuffer, listening func(addr string)) *cluster {
	t.Helper()
	c := &cluster{t: t, clk: clock.NewFake(t0) /* workers_test.go */, exec: newTestExec(), logs: logs, fakes: map[string]*fakeTE{}}
	cfg.Clock, cfg.Executor, cfg.DialTaskExecutor = c.clk, c.exec, c.dial
	cfg.Rand = rand.New(rand.NewPCG(1, 2))
	c.rm = New(cfg, zerolog.New(logs).Level(zerolog.DebugLevel))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if listening != nil {
		listening(lis.Addr().String())
	}
	srv := grpc.NewServer()
	pb.RegisterResourceManagerServiceServer(srv, c.rm.Service())
	served := make(chan struct{})
	go func() { _ = srv.Serve(lis); close(served) }()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { c.rm.Run(ctx); close(ran) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	c.client = pb.NewResourceManagerServiceClient(conn)
	var once sync.Once
	c.stop = func() {
		once.Do(func() {
			conn.Close()
			c.exec.stop() // no turn runs while Run cleans up
			cancel()
			<-ran
			c.exec.calls.Wait()
			srv.Stop()
			<-served
			c.mu.Lock()
			fakes := c.fakes
			c.mu.Unlock()
			for _, te := range fakes {
				te.pushes.Wait()
			}
		})
	}
	t.Cleanup(func() {
		c.stop()
		if t.Failed() {
			t.Logf("ResourceManager log:\n%s", logs.String())
		}
	})
	// Run's first turn arms the heartbeat timer: wait for it, so that the
	// test's clock starts with the RM running.
	eventually(t, "the ResourceManager started", func() bool { return c.clk.Pending() > 0 })
	c.settle()
	return c
}

// dial is the RM's DialTaskExecutor: fake TaskExecutors in memory, real
// ones (active mode) over gRPC.
func (c *cluster) dial(addr string) (pb.TaskExecutorServiceClient, io.Closer, error) {
	c.mu.Lock()
	te := c.fakes[addr]
	c.mu.Unlock()
	if te == nil {
		return dialGRPC(addr)
	}
	return teClient{te: te}, io.NopCloser(nil), nil
}

// settle waits until the ResourceManager has no turn queued and no call in
// flight, and no fake TaskExecutor is sending a report: nothing more
// happens until the test acts or advances the clock.
func (c *cluster) settle() {
	c.t.Helper()
	c.settleOr(func() error { return nil })
}

// settleOr is settle that fails early with the error check returns while
// it waits.
func (c *cluster) settleOr(check func() error) {
	c.t.Helper()
	deadline := time.Now().Add(waitFor)
	for !c.idle() {
		if err := check(); err != nil {
			c.t.Fatal(err)
		}
		if time.Now().After(deadline) {
			c.t.Fatal("the ResourceManager did not settle")
		}
		time.Sleep(time.Millisecond)
	}
}

// idle reports whether the RM and the fakes were idle at one instant.
func (c *cluster) idle() bool {
	idle1, started1 := c.fakesIdle()
	if !idle1 || !c.exec.idle() {
		return false
	}
	idle2, started2 := c.fakesIdle()
	return idle2 && started1 == started2
}

func (c *cluster) fakesIdle() (idle bool, started int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	idle = true
	for _, te := range c.fakes {
		te.mu.Lock()
		started += te.pushesStarted
		idle = idle && te.pushesActive == 0
		te.mu.Unlock()
	}
	return idle, started
}

// advance moves the fake clock forward by d, firing its timers in order
// and letting the ResourceManager settle after each, as real time would.
func (c *cluster) advance(d time.Duration) {
	c.t.Helper()
	end := c.clk.Now().Add(d)
	for {
		c.settle()
		next, ok := c.clk.Next()
		if !ok || next.After(end) {
			break
		}
		c.clk.Advance(next.Sub(c.clk.Now()))
	}
	c.clk.Advance(end.Sub(c.clk.Now()))
	c.settle()
}

// onRM runs fn on the ResourceManager's mailbox.
func (c *cluster) onRM(fn func()) {
	c.t.Helper()
	if _, err := mailbox.Call(ctxT(c.t), c.rm.mb, func() (struct{}, error) { fn(); return struct{}{}, nil }); err != nil {
		c.t.Fatal(err)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds or waitFor passes; for events that
// come from outside the ResourceManager (real TaskExecutors).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fakeTE is an in-test TaskExecutor: it keeps a slot table, records
// RequestSlot calls and answers heartbeats with its slot report.
type fakeTE struct {
	c                  *cluster
	id, instance, addr string

	mu           sync.Mutex
	slots        []*pb.SlotStatus
	requests     []*pb.RequestSlotRequest // successful ones
	attempts     int                      // every RequestSlot call
	inFlight     int                      // RequestSlot calls running now
	maxInFlight  int
	failRequests int   // fail this many more RequestSlot calls
	failWith     error // with this error (default UNAVAILABLE)
	reject       bool  // free every slot at once after granting it, as after a rejected offer
	unreachable  bool  // heartbeats fail
	heartbeats   int
	tokenUpdates []*pb.UpdateDelegationTokensRequest
	// Reports pushed after a rejection, tracked for settle.
	pushesStarted, pushesActive int
	pushes                      sync.WaitGroup
}

// startTE makes a fake TaskExecutor the RM can reach; it registers with
// register.
func (c *cluster) startTE(id string, slots int) *fakeTE {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	te := &fakeTE{c: c, id: id, instance: fmt.Sprintf("%s-instance-%d", id, c.n), addr: fmt.Sprintf("fake-%s-%d:6122", id, c.n)}
	for i := 0; i < slots; i++ {
		te.slots = append(te.slots, &pb.SlotStatus{SlotIndex: int32(i)})
	}
	c.fakes[te.addr] = te
	return te
}

func (te *fakeTE) RequestSlot(_ context.Context, req *pb.RequestSlotRequest) (*pb.Ack, error) {
	te.mu.Lock()
	defer te.mu.Unlock()
	te.attempts++
	if te.inFlight++; te.inFlight > te.maxInFlight {
		te.maxInFlight = te.inFlight
	}
	te.mu.Unlock()
	time.Sleep(time.Millisecond) // let a concurrent call overlap, if the RM made one
	te.mu.Lock()
	te.inFlight--
	if te.failRequests > 0 {
		te.failRequests--
		if te.failWith != nil {
			return nil, te.failWith
		}
		return nil, status.Error(codes.Unavailable, "injected failure")
	}
	if int(req.SlotIndex) >= len(te.slots) {
		return nil, status.Errorf(codes.InvalidArgument, "no slot %d", req.SlotIndex)
	}
	s := te.slots[req.SlotIndex]
	if s.AllocationId != "" && s.AllocationId != req.AllocationId {
		return nil, status.Errorf(codes.ResourceExhausted, "slot %d is allocated to %s", req.SlotIndex, s.AllocationId)
	}
	s.AllocationId, s.JobId = req.AllocationId, req.JobId
	te.requests = append(te.requests, req)
	if te.reject {
		// The offer to the JobMaster is rejected: the slot is freed and
		// reported, after the RequestSlot was acknowledged.
		te.pushesStarted++
		te.pushesActive++
		te.pushes.Add(1)
		go func() {
			defer te.pushes.Done()
			te.mu.Lock()
			if s.AllocationId == req.AllocationId {
				s.AllocationId, s.JobId = "", ""
			}
			r := &pb.SendSlotReportRequest{ResourceId: te.id, InstanceId: te.instance, SlotReport: te.reportLocked()}
			te.mu.Unlock()
			_, _ = te.c.rm.Service().SendSlotReport(context.Background(), r)
			te.mu.Lock()
			te.pushesActive--
			te.mu.Unlock()
		}()
	}
	return &pb.Ack{}, nil
}

func (te *fakeTE) HeartbeatFromResourceManager(_ context.Context, _ *pb.HeartbeatRequest) (*pb.TaskManagerHeartbeatResponse, error) {
	te.mu.Lock()
	defer te.mu.Unlock()
	te.heartbeats++
	if te.unreachable {
		return nil, status.Error(codes.Unavailable, "injected: unreachable")
	}
	return &pb.TaskManagerHeartbeatResponse{SlotReport: te.reportLocked()}, nil
}

// teClient is the RM's in-memory connection to a fake TaskExecutor; the
// RM makes no other calls (the embedded nil interface would panic).
type teClient struct {
	pb.TaskExecutorServiceClient
	te *fakeTE
}

func (c teClient) RequestSlot(ctx context.Context, req *pb.RequestSlotRequest, _ ...grpc.CallOption) (*pb.Ack, error) {
	return c.te.RequestSlot(ctx, req)
}

func (c teClient) UpdateDelegationTokens(_ context.Context, req *pb.UpdateDelegationTokensRequest, _ ...grpc.CallOption) (*pb.Ack, error) {
	c.te.mu.Lock()
	defer c.te.mu.Unlock()
	c.te.tokenUpdates = append(c.te.tokenUpdates, req)
	return &pb.Ack{}, nil
}

func (c teClient) HeartbeatFromResourceManager(ctx context.Context, req *pb.HeartbeatRequest, _ ...grpc.CallOption) (*pb.TaskManagerHeartbeatResponse, error) {
	return c.te.HeartbeatFromResourceManager(ctx, req)
}

func (te *fakeTE) reportLocked() *pb.SlotReport {
	r := &pb.SlotReport{}
	for _, s := range te.slots {
		r.Slots = append(r.Slots, &pb.SlotStatus{SlotIndex: s.SlotIndex, AllocationId: s.AllocationId, JobId: s.JobId})
	}
	return r
}

func (te *fakeTE) location() *pb.TaskManagerLocation {
	return &pb.TaskManagerLocation{ResourceId: te.id, RpcAddress: te.addr, DataAddress: "127.0.0.1:6121", Host: "127.0.0.1"}
}

func (te *fakeTE) registration() *pb.RegisterTaskExecutorRequest {
	te.mu.Lock()
	defer te.mu.Unlock()
	return &pb.RegisterTaskExecutorRequest{
		ProtocolVersion: version.ProtocolVersion,
		Location:        te.location(),
		NumberOfSlots:   int32(len(te.slots)),
		InstanceId:      te.instance,
	}
}

// register registers with the ResourceManager and sends the first slot
// report, as a TaskExecutor does, then lets the RM settle.
func (te *fakeTE) register(t *testing.T, c *cluster) *pb.RegisterTaskExecutorResponse {
	t.Helper()
	resp, err := c.client.RegisterTaskExecutor(ctxT(t), te.registration())
	if err != nil {
		t.Fatalf("register %s: %v", te.id, err)
	}
	te.sendReport(t, c)
	return resp
}

func (te *fakeTE) sendReport(t *testing.T, c *cluster) {
	t.Helper()
	te.mu.Lock()
	req := &pb.SendSlotReportRequest{ResourceId: te.id, InstanceId: te.instance, SlotReport: te.reportLocked()}
	te.mu.Unlock()
	if _, err := c.client.SendSlotReport(ctxT(t), req); err != nil {
		t.Fatalf("slot report of %s: %v", te.id, err)
	}
	c.settle()
}

func (te *fakeTE) setSlot(i int, allocationID, jobID string) {
	te.mu.Lock()
	defer te.mu.Unlock()
	te.slots[i].AllocationId, te.slots[i].JobId = allocationID, jobID
}

func (te *fakeTE) set(fn func(te *fakeTE)) {
	te.mu.Lock()
	defer te.mu.Unlock()
	fn(te)
}

func (te *fakeTE) get(fn func(te *fakeTE) int) int {
	te.mu.Lock()
	defer te.mu.Unlock()
	return fn(te)
}

// granted is the successful RequestSlot calls so far.
func (te *fakeTE) granted() []*pb.RequestSlotRequest {
	te.mu.Lock()
	defer te.mu.Unlock()
	return append([]*pb.RequestSlotRequest(nil), te.requests...)
}

func (te *fakeTE) attemptCount() int { return te.get(func(te *fakeTE) int { return te.attempts }) }

func (te *fakeTE) heartbeatCount() int { return te.get(func(te *fakeTE) int { return te.heartbeats }) }

// grantedTo counts successful RequestSlot calls for job.
func (te *fakeTE) grantedTo(job string) int {
	n := 0
	for _, r := range te.granted() {
		if r.JobId == job {
			n++
		}
	}
	return n
}

// fakeJM is an in-test JobMasterGateway.
type fakeJM struct {
	mu         sync.Mutex
	notices    []int
	hang       bool  // heartbeats hang until the caller gives up
	unanswered bool  // heartbeats time out at once
	fail       error // heartbeats fail with this error
	heartbeats int
	lost       []string // TaskManagers the ResourceManager said were lost
	causes     []error
}

func (jm *fakeJM) NotifyTaskManagerLost(resourceID string, cause error) {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	jm.lost = append(jm.lost, resourceID)
	jm.causes = append(jm.causes, cause)
}

func (jm *fakeJM) NotifyNotEnoughResources(acquired int) {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	jm.notices = append(jm.notices, acquired)
}

func (jm *fakeJM) HeartbeatFromResourceManager(ctx context.Context) error {
	jm.mu.Lock()
	hang, unanswered, fail := jm.hang, jm.unanswered, jm.fail
	jm.heartbeats++
	jm.mu.Unlock()
	switch {
	case hang:
		<-ctx.Done()
		return ctx.Err()
	case unanswered:
		return context.DeadlineExceeded
	}
	return fail
}

func (jm *fakeJM) noticeList() []int {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	return append([]int(nil), jm.notices...)
}

func (jm *fakeJM) lostList() []string {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	return append([]string(nil), jm.lost...)
}

func (jm *fakeJM) heartbeatCount() int {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	return jm.heartbeats
}

func (jm *fakeJM) set(fn func(jm *fakeJM)) {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	fn(jm)
}

// job registers a JobMaster for jobID and declares slots.
func (c *cluster) job(jobID string, slots int) *fakeJM {
	c.t.Helper()
	jm := &fakeJM{}
	if err := c.rm.RegisterJobMaster(ctxT(c.t), jobID, "jm-"+jobID+":6123", jm); err != nil {
		c.t.Fatalf("RegisterJobMaster: %v", err)
	}
	c.declare(jobID, slots)
	return jm
}

func (c *cluster) declare(jobID string, slots int) {
	c.t.Helper()
	if err := c.rm.DeclareResourceRequirements(ctxT(c.t), jobID, slots); err != nil {
		c.t.Fatalf("DeclareResourceRequirements: %v", err)
	}
	c.settle()
}

func (c *cluster) freeSlots() int {
	c.t.Helper()
	_, _, free, err := c.rm.Overview(ctxT(c.t))
	if err != nil {
		c.t.Fatal(err)
	}
	return free
}

func (c *cluster) taskManagerIDs() []string {
	c.t.Helper()
	tms, err := c.rm.TaskManagers(ctxT(c.t))
	if err != nil {
		c.t.Fatal(err)
	}
	var ids []string
	for _, tm := range tms {
		ids = append(ids, tm.ID)
	}
	return ids
}
