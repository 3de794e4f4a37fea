package jobmaster

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	"github.com/gofl/gofl/internal/backoff"
	"github.com/gofl/gofl/internal/clock"
	"github.com/gofl/gofl/internal/version"
	"github.com/gofl/gofl/jobgraph"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/jobmanager/failover"
	"github.com/gofl/gofl/jobmanager/scheduler"
	"github.com/gofl/gofl/resourcemanager"
	"github.com/gofl/gofl/rpc/pb"
)

// waitFor polls cond until it holds, failing after a deadline generous
// enough for a loaded machine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// fakeRM is an in-process ResourceManager recording what it was told.
type fakeRM struct {
	mu            sync.Mutex
	registrations int
	declared      []int // in arrival order
	registered    bool
	disconnected  bool
	// registerErr fails the next n RegisterJobMaster calls with err.
	registerErrs []error
	// forget makes the next declaration fail as for an unknown JobMaster.
	forget bool
	// delayFirstDeclare holds the first declaration this long before it is
	// recorded.
	delayFirstDeclare time.Duration
}

func (rm *fakeRM) RegisterJobMaster(ctx context.Context, jobID, addr string, gw resourcemanager.JobMasterGateway) error {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	rm.registrations++
	if len(rm.registerErrs) > 0 {
		err := rm.registerErrs[0]
		rm.registerErrs = rm.registerErrs[1:]
		return err
	}
	rm.registered = true
	return nil
}

func (rm *fakeRM) DeclareResourceRequirements(ctx context.Context, jobID string, slots int) error {
	rm.mu.Lock()
	delay := rm.delayFirstDeclare
	rm.delayFirstDeclare = 0
	rm.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if rm.forget {
		rm.forget, rm.registered = false, false
	}
	if !rm.registered {
		return fmt.Errorf("%w: job %s", resourcemanager.ErrJobMasterNotRegistered, jobID)
	}
	rm.declared = append(rm.declared, slots)
	return nil
}

func (rm *fakeRM) DisconnectJobMaster(ctx context.Context, jobID string, cause error) error {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	rm.disconnected = true
	return nil
}

func (rm *fakeRM) snapshot() (registrations int, declared []int, disconnected bool) {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	return rm.registrations, append([]int(nil), rm.declared...), rm.disconnected
}

// call is one call a fake TaskManager received.
type call struct {
	method  string
	attempt eg.ExecutionAttemptID // SubmitTask, CancelTask, checkpoint calls
	// checkpoint and complete of TriggerCheckpoint and NotifyCheckpoint.
	checkpoint int64
	complete   bool
	tdd        *pb.TaskDeploymentDescriptor // SubmitTask
	options    *pb.CheckpointOptions        // TriggerCheckpoint
	event      *pb.OperatorEventRequest     // SendOperatorEventToTask
}

func (c call) String() string { return fmt.Sprintf("%s %s", c.method, c.attempt) }

// fakeTM is an in-memory TaskExecutorService client (handed to the
// JobMaster through Config.DialTaskManager) recording calls in order.
type fakeTM struct {
	mu    sync.Mutex
	calls []call
	// submitErr, if set, answers SubmitTask.
	submitErr error
	// submitBlocks makes SubmitTask wait for its deadline.
	submitBlocks bool
	// heartbeat answers HeartbeatFromJobManager; nil answers empty.
	heartbeat func() (*pb.TaskManagerHeartbeatResponse, error)
	// hbBlock, if set, holds heartbeats until it is closed.
	hbBlock chan struct{}
	// freeSlotErr, if set, answers FreeSlot.
	freeSlotErr error
	heartbeats  int
	closed      bool
}

func (f *fakeTM) record(method string, a *pb.ExecutionAttemptID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := call{method: method}
	if a != nil {
		c.attempt = attemptID(a)
	}
	f.calls = append(f.calls, c)
}

func (f *fakeTM) recordCall(c call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
}

func (f *fakeTM) TriggerCheckpoint(_ context.Context, in *pb.TriggerCheckpointRequest, _ ...grpc.CallOption) (*pb.Ack, error) {
	f.recordCall(call{method: "TriggerCheckpoint", attempt: attemptID(in.GetAttempt()), checkpoint: in.CheckpointId, options: in.Options})
	return &pb.Ack{}, nil
}

func (f *fakeTM) NotifyCheckpoint(_ context.Context, in *pb.NotifyCheckpointRequest, _ ...grpc.CallOption) (*pb.Ack, error) {
	f.recordCall(call{method: "NotifyCheckpoint", attempt: attemptID(in.GetAttempt()), checkpoint: in.CheckpointId, complete: in.Complete})
	return &pb.Ack{}, nil
}

func (f *fakeTM) SendOperatorEventToTask(_ context.Context, in *pb.OperatorEventRequest, _ ...grpc.CallOption) (*pb.Ack, error) {
	f.recordCall(call{method: "SendOperatorEventToTask", attempt: attemptID(in.GetAttempt()), event: in})
	return &pb.Ack{}, nil
}

// log returns the calls of the given methods, in order.
func (f *fakeTM) log(methods ...string) []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []call
	for _, c := range f.calls {
		for _, m := range methods {
			if c.method == m {
				out = append(out, c)
			}
		}
	}
	return out
}

func (f *fakeTM) RequestSlot(context.Context, *pb.RequestSlotRequest, ...grpc.CallOption) (*pb.Ack, error) {
	return &pb.Ack{}, nil
}

func (f *fakeTM) SubmitTask(ctx context.Context, in *pb.SubmitTaskRequest, _ ...grpc.CallOption) (*pb.Ack, error) {
	f.recordCall(call{method: "SubmitTask", attempt: attemptID(in.GetTdd().GetAttempt()), tdd: in.GetTdd()})
	f.mu.Lock()
	err, blocks := f.submitErr, f.submitBlocks
	f.mu.Unlock()
	if blocks {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	return &pb.Ack{}, nil
}

func (f *fakeTM) CancelTask(_ context.Context, in *pb.CancelTaskRequest, _ ...grpc.CallOption) (*pb.CancelTaskResponse, error) {
	f.record("CancelTask", in.GetAttempt())
	// Tasks here only run in the test's reports: none is running.
	return &pb.CancelTaskResponse{}, nil
}

// UpdateDelegationTokens: the ResourceManager's call, never a JobMaster's.
func (f *fakeTM) UpdateDelegationTokens(context.Context, *pb.UpdateDelegationTokensRequest, ...grpc.CallOption) (*pb.Ack, error) {
	panic("UpdateDelegationTokens is the ResourceManager's call, never a JobMaster's")
}

func (f *fakeTM) FreeSlot(context.Context, *pb.FreeSlotRequest, ...grpc.CallOption) (*pb.Ack, error) {
	f.record("FreeSlot", nil)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.freeSlotErr != nil {
		return nil, f.freeSlotErr
	}
	return &pb.Ack{}, nil
}

func (f *fakeTM) ReleasePartitions(context.Context, *pb.ReleasePartitionsRequest, ...grpc.CallOption) (*pb.Ack, error) {
	f.record("ReleasePartitions", nil)
	return &pb.Ack{}, nil
}

func (f *fakeTM) HeartbeatFromResourceManager(context.Context, *pb.HeartbeatRequest, ...grpc.CallOption) (*pb.TaskManagerHeartbeatResponse, error) {
	return &pb.TaskManagerHeartbeatResponse{}, nil
}

func (f *fakeTM) HeartbeatFromJobManager(ctx context.Context, _ *pb.HeartbeatRequest, _ ...grpc.CallOption) (*pb.TaskManagerHeartbeatResponse, error) {
	f.mu.Lock()
	f.heartbeats++
	hb, block := f.heartbeat, f.hbBlock
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if hb == nil {
		return &pb.TaskManagerHeartbeatResponse{Running: f.running()}, nil
	}
	return hb()
}

func (f *fakeTM) DisconnectJobManager(context.Context, *pb.DisconnectJobManagerRequest, ...grpc.CallOption) (*pb.Ack, error) {
	f.record("DisconnectJobManager", nil)
	return &pb.Ack{}, nil
}

// running are the attempts submitted and not cancelled, as a TaskManager
// reports them by default.
func (f *fakeTM) running() []*pb.ExecutionAttemptID {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*pb.ExecutionAttemptID
	for _, c := range f.calls {
		switch c.method {
		case "SubmitTask":
			out = append(out, attemptProto(c.attempt))
		case "CancelTask":
			out = slices.DeleteFunc(out, func(a *pb.ExecutionAttemptID) bool { return attemptID(a) == c.attempt })
		}
	}
	return out
}

func (f *fakeTM) heartbeatCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.heartbeats
}

func (f *fakeTM) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// harness runs one JobMaster against fakes.
type harness struct {
	t   *testing.T
	jm  *JobMaster
	rm  *fakeRM
	clk *clock.Fake // nil with the real clock
	tms map[string]*fakeTM
	mu  sync.Mutex
}

const (
	hbInterval = 10 * time.Second
	hbTimeout  = 50 * time.Second
)

// testConfig has a fake clock (if clk is set), strict transitions and the
// given restart strategy.
func testConfig(clk clock.Clock, restarts int) Config {
	sc := scheduler.DefaultConfig()
	sc.StrictTransitions = true
	sc.Restart.Type = failover.RestartTypeNone
	if restarts > 0 {
		sc.Restart.Type = failover.RestartTypeFixedDelay
		sc.Restart.FixedDelayAttempts = restarts
		sc.Restart.FixedDelay = 0
	}
	return Config{Scheduler: sc, HeartbeatInterval: hbInterval, HeartbeatTimeout: hbTimeout, RPCTimeout: 5 * time.Second,
		RetryBackoff: backoff.Config{Initial: 100 * time.Millisecond, Max: time.Second, Jitter: -1},
		Address:      "jm:1", Clock: clk, Rand: rand.New(rand.NewPCG(1, 2))}
}

// start runs a JobMaster for jg; fakes TaskManagers are created on dial.
func start(t *testing.T, cfg Config, jg *jobgraph.JobGraph, rm *fakeRM) *harness {
	t.Helper()
	h := &harness{t: t, rm: rm, tms: map[string]*fakeTM{}}
	if f, ok := cfg.Clock.(*clock.Fake); ok {
		h.clk = f
	}
	if cfg.DialTaskManager == nil {
		cfg.DialTaskManager = func(addr string) (pb.TaskExecutorServiceClient, io.Closer, error) {
			return h.tm(addr), h.tm(addr), nil
		}
	}
	jm, err := New(cfg, jg, rm, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel))
	if err != nil {
		t.Fatal(err)
	}
	h.jm = jm
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { jm.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

// tm is the fake TaskManager at addr.
func (h *harness) tm(addr string) *fakeTM {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.tms[addr]
	if f == nil {
		f = &fakeTM{}
		h.tms[addr] = f
	}
	return f
}

// register connects TaskManager id (address id) and offers n slots
// "id/0"...; it returns the accepted allocations.
func (h *harness) register(id string, n int) []string {
	h.t.Helper()
	ctx := context.Background()
	waitFor(h.t, "the job to be scheduled", func() bool { return h.status() != scheduler.JobCreated })
	_, err := h.jm.RegisterTaskManager(ctx, &pb.RegisterTaskManagerRequest{ProtocolVersion: version.ProtocolVersion,
		Location: &pb.TaskManagerLocation{ResourceId: id, RpcAddress: id, Host: "localhost", DataAddress: id + ":1"}})
	if err != nil {
		h.t.Fatal(err)
	}
	req := &pb.OfferSlotsRequest{JobId: h.jm.JobID(), ResourceId: id}
	for i := 0; i < n; i++ {
		req.Slots = append(req.Slots, &pb.SlotOffer{AllocationId: fmt.Sprintf("%s/%d", id, i), SlotIndex: int32(i)})
	}
	resp, err := h.jm.OfferSlots(ctx, req)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.Accepted
}

// report sends a task state update.
func (h *harness) report(a eg.ExecutionAttemptID, state eg.ExecutionState) error {
	_, err := h.jm.UpdateTaskExecutionState(context.Background(), &pb.UpdateTaskExecutionStateRequest{
		JobId: h.jm.JobID(), Attempt: attemptProto(a), State: state.String()})
	return err
}

// attempt is the current attempt of vertex#subtask, read on the mailbox.
func (h *harness) attempt(vertex string, subtask int) eg.ExecutionAttemptID {
	h.t.Helper()
	var id eg.ExecutionAttemptID
	h.onMailbox(func() {
		g := h.jm.sched.Graph()
		id = g.AttemptID(g.JobVertex(jobgraph.VertexID(vertex)).VertexAt(subtask))
	})
	return id
}

// state is the execution state of vertex#subtask's current attempt.
func (h *harness) state(vertex string, subtask int) (int32, eg.ExecutionState) {
	h.t.Helper()
	var ex eg.Execution
	h.onMailbox(func() {
		g := h.jm.sched.Graph()
		ex = g.Vertices[g.JobVertex(jobgraph.VertexID(vertex)).VertexAt(subtask)].Current
	})
	return ex.Attempt, ex.State
}

// onMailbox runs fn on the JobMaster's mailbox, or, once the JobMaster
// stopped, on the caller's goroutine (nothing changes its state then).
func (h *harness) onMailbox(fn func()) {
	h.t.Helper()
	done := make(chan struct{})
	if !h.jm.mb.Post(func() { fn(); close(done) }) {
		h.stopped(fn)
		return
	}
	select {
	case <-done:
	case <-h.jm.Done():
		select {
		case <-done:
		default:
			h.stopped(fn)
		}
	case <-time.After(20 * time.Second):
		h.t.Fatal("mailbox stuck")
	}
}

func (h *harness) stopped(fn func()) {
	h.t.Helper()
	select {
	case <-h.jm.Done():
		fn()
	case <-time.After(20 * time.Second):
		h.t.Fatal("mailbox closed but the JobMaster did not stop")
	}
}

// idle waits until every call queued for TaskManager id is through (its
// outcome handled).
func (h *harness) idle(id string) {
	h.t.Helper()
	waitFor(h.t, "the outbox of "+id+" to drain", func() bool {
		n := -1
		h.onMailbox(func() {
			if tm := h.jm.tms[id]; tm != nil {
				n = tm.out.Len()
			}
		})
		return n == 0
	})
}

// heartbeatHandled waits until no heartbeat to TaskManager id is in flight.
func (h *harness) heartbeatHandled(id string) {
	h.t.Helper()
	waitFor(h.t, "the heartbeat of "+id, func() bool {
		busy := true
		h.onMailbox(func() {
			tm := h.jm.tms[id]
			busy = tm != nil && tm.heartbeating
		})
		return !busy
	})
}

func (h *harness) status() scheduler.JobStatus {
	var st scheduler.JobStatus
	select {
	case <-h.jm.Done():
		return h.jm.Result().Status
	default:
	}
	done := make(chan struct{})
	if !h.jm.mb.Post(func() { st = h.jm.sched.Status(); close(done) }) {
		<-h.jm.Done()
		return h.jm.Result().Status
	}
	select {
	case <-done:
	case <-h.jm.Done():
		return h.jm.Result().Status
	}
	return st
}

// advance moves the fake clock and lets the mailbox handle what fired.
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	h.clk.Advance(d)
	h.onMailbox(func() {})
}

func job(name string, vertices ...*jobgraph.Vertex) *jobgraph.JobGraph {
	return &jobgraph.JobGraph{JobID: name, Name: name, Type: jobgraph.Streaming, Vertices: vertices}
}

func vertex(id string, parallelism int) *jobgraph.Vertex {
	return &jobgraph.Vertex{ID: jobgraph.VertexID(id), Name: id, Parallelism: parallelism, Invokable: "noop", SlotSharingGroup: "default"}
}
