package taskmanager

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/blob"
	"github.com/gofl/gofl/internal/clock"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/taskmanager/invokable"
)

// testRelease lets test-ignore-cancel tasks, cancelled, end.
var testRelease = make(chan struct{}, 10)

// testRunner is a job binary serving the built-in invokables in runner
// role (runner/internal/testrunner), built once for the package's tests.
var testRunner string

func TestMain(m *testing.M) {
	invokable.Register("test-panic", func(invokable.Env) (invokable.Task, error) {
		return invokable.TaskFunc(func(context.Context) error { panic("boom") }), nil
	})
	invokable.Register("test-ignore-cancel", func(invokable.Env) (invokable.Task, error) {
		return invokable.TaskFunc(func(ctx context.Context) error {
			<-ctx.Done()
			<-testRelease
			return ctx.Err()
		}), nil
	})
	dir, err := os.MkdirTemp("", "gofl-tm-test")
	if err != nil {
		panic(err)
	}
	testRunner = filepath.Join(dir, "testrunner")
	build := exec.Command("go", "build", "-o", testRunner, "./runner/internal/testrunner")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the test runner:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

const waitFor = 5 * time.Second

// recv waits for the next value on ch.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitFor):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

// none checks that nothing arrives on ch for d.
func none[T any](t *testing.T, ch <-chan T, d time.Duration, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("unexpected %s: %v", what, v)
	case <-time.After(d):
	}
}

func send[T any](ch chan T, v T) {
	select {
	case ch <- v:
	default:
		panic("test channel full")
	}
}

// eventually polls cond until it holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// serve runs a gRPC server on addr ("127.0.0.1:0" for any port) until the
// test ends and returns its address and a stop function.
func serve(t *testing.T, addr string, register func(*grpc.Server)) (string, func()) {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	var once sync.Once
	stop := func() { once.Do(func() { srv.Stop(); <-done }) }
	t.Cleanup(stop)
	return lis.Addr().String(), stop
}

// freeAddr returns a loopback address nobody listens on (yet).
func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// fakeRM is an in-test ResourceManager that records calls.
type fakeRM struct {
	pb.UnimplementedResourceManagerServiceServer
	id                 string
	heartbeatTimeoutMs int64
	registerErr        func(n int) error // nil: accept
	reportErr          func(n int) error // nil: accept
	mu                 sync.Mutex
	registrations      int
	slotReports        int
	registers          chan *pb.RegisterTaskExecutorRequest
	reports            chan *pb.SendSlotReportRequest
	disconnects        chan *pb.DisconnectTaskExecutorRequest
}

func newFakeRM() *fakeRM {
	return &fakeRM{id: "rm-1", heartbeatTimeoutMs: 60_000,
		registers: make(chan *pb.RegisterTaskExecutorRequest, 100), reports: make(chan *pb.SendSlotReportRequest, 100),
		disconnects: make(chan *pb.DisconnectTaskExecutorRequest, 100)}
}

func (r *fakeRM) RegisterTaskExecutor(_ context.Context, req *pb.RegisterTaskExecutorRequest) (*pb.RegisterTaskExecutorResponse, error) {
	r.mu.Lock()
	r.registrations++
	n := r.registrations
	r.mu.Unlock()
	send(r.registers, req)
	if r.registerErr != nil {
		if err := r.registerErr(n); err != nil {
			return nil, err
		}
	}
	return &pb.RegisterTaskExecutorResponse{ResourceManagerId: r.id, HeartbeatIntervalMs: r.heartbeatTimeoutMs / 5, HeartbeatTimeoutMs: r.heartbeatTimeoutMs}, nil
}

func (r *fakeRM) SendSlotReport(_ context.Context, req *pb.SendSlotReportRequest) (*pb.Ack, error) {
	r.mu.Lock()
	r.slotReports++
	n := r.slotReports
	r.mu.Unlock()
	send(r.reports, req)
	if r.reportErr != nil {
		if err := r.reportErr(n); err != nil {
			return nil, err
		}
	}
	return &pb.Ack{}, nil
}

func (r *fakeRM) DisconnectTaskExecutor(_ context.Context, req *pb.DisconnectTaskExecutorRequest) (*pb.Ack, error) {
	send(r.disconnects, req)
	return &pb.Ack{}, nil
}

// fakeJM is an in-test JobMaster (serving any job) that records calls.
type fakeJM struct {
	pb.UnimplementedJobMasterServiceServer
	id                  string
	heartbeatTimeoutMs  int64
	accept              func(*pb.SlotOffer) bool // nil: accept all
	offerGate           chan struct{}            // if set, OfferSlots waits for it
	updateErr           atomic.Value             // error for UpdateTaskExecutionState, if set
	registerErr         atomic.Value             // error for RegisterTaskManager, if set
	refuseRegistrations atomic.Int32             // refuse this many RegisterTaskManager calls (NOT_FOUND)
	registers           chan *pb.RegisterTaskManagerRequest
	offers              chan *pb.OfferSlotsRequest
	updates             chan *pb.UpdateTaskExecutionStateRequest
	disconnects         chan *pb.DisconnectTaskManagerRequest
	lost                chan *pb.ReportPartitionsLostRequest
	acks                chan *pb.AcknowledgeCheckpointRequest
	declines            chan *pb.DeclineCheckpointRequest
	blobs               *blob.Store // job binaries, served by the JobMaster's BlobService
}

func newFakeJM() *fakeJM {
	return &fakeJM{id: "jm-1", heartbeatTimeoutMs: 60_000,
		registers: make(chan *pb.RegisterTaskManagerRequest, 1000), offers: make(chan *pb.OfferSlotsRequest, 1000),
		updates: make(chan *pb.UpdateTaskExecutionStateRequest, 1000), disconnects: make(chan *pb.DisconnectTaskManagerRequest, 1000),
		lost: make(chan *pb.ReportPartitionsLostRequest, 100),
		acks: make(chan *pb.AcknowledgeCheckpointRequest, 100), declines: make(chan *pb.DeclineCheckpointRequest, 100)}
}

func (j *fakeJM) RegisterTaskManager(_ context.Context, req *pb.RegisterTaskManagerRequest) (*pb.RegisterTaskManagerResponse, error) {
	send(j.registers, req)
	if j.refuseRegistrations.Add(-1) >= 0 {
		return nil, status.Error(codes.NotFound, "dispatcher: no JobMaster for the job yet")
	}
	if err, ok := j.registerErr.Load().(error); ok {
		return nil, err
	}
	return &pb.RegisterTaskManagerResponse{JobMasterId: j.id, HeartbeatIntervalMs: j.heartbeatTimeoutMs / 2, HeartbeatTimeoutMs: j.heartbeatTimeoutMs}, nil
}

func (j *fakeJM) AcknowledgeCheckpoint(_ context.Context, req *pb.AcknowledgeCheckpointRequest) (*pb.Ack, error) {
	send(j.acks, req)
	return &pb.Ack{}, nil
}

func (j *fakeJM) DeclineCheckpoint(_ context.Context, req *pb.DeclineCheckpointRequest) (*pb.Ack, error) {
	send(j.declines, req)
	return &pb.Ack{}, nil
}

func (j *fakeJM) ReportPartitionsLost(_ context.Context, req *pb.ReportPartitionsLostRequest) (*pb.Ack, error) {
	send(j.lost, req)
	return &pb.Ack{}, nil
}

func (j *fakeJM) OfferSlots(ctx context.Context, req *pb.OfferSlotsRequest) (*pb.OfferSlotsResponse, error) {
	send(j.offers, req)
	if j.offerGate != nil {
		select {
		case <-j.offerGate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	resp := &pb.OfferSlotsResponse{}
	for _, o := range req.Slots {
		if j.accept == nil || j.accept(o) {
			resp.Accepted = append(resp.Accepted, o.AllocationId)
		}
	}
	return resp, nil
}

func (j *fakeJM) UpdateTaskExecutionState(_ context.Context, req *pb.UpdateTaskExecutionStateRequest) (*pb.Ack, error) {
	send(j.updates, req)
	if err, ok := j.updateErr.Load().(error); ok {
		return nil, err
	}
	return &pb.Ack{}, nil
}

func (j *fakeJM) DisconnectTaskManager(_ context.Context, req *pb.DisconnectTaskManagerRequest) (*pb.Ack, error) {
	send(j.disconnects, req)
	return &pb.Ack{}, nil
}

// cluster is a TaskExecutor under test with its fake RM and JM.
type cluster struct {
	t      *testing.T
	rm     *fakeRM
	jm     *fakeJM
	rmAddr string
	jmAddr string
	te     *TaskExecutor
	client pb.TaskExecutorServiceClient
	cancel context.CancelFunc
	run    *run
}

func testLogger(t *testing.T) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel).With().Timestamp().Logger()
}

// run is a running TaskExecutor's Run: done closes when it returned err.
type run struct {
	done chan struct{}
	err  error
}

// jobBinary stores the test runner as a job binary at the fake JobMaster
// and returns its blob key.
func (c *cluster) jobBinary() string {
	c.t.Helper()
	f, err := os.Open(testRunner)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	key, _, err := c.jm.blobs.Put(f, "", 1<<30)
	if err != nil {
		c.t.Fatal(err)
	}
	return key
}

// wait waits for Run to return and gives its error.
func (r *run) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(waitFor):
		t.Fatal("Run did not return")
		return nil
	}
}

// startTE starts a TaskExecutor for cfg (slots, bind address, backoff and
// timeout filled in if unset) and stops it when the test ends.
func startTE(t *testing.T, cfg Config) (*TaskExecutor, pb.TaskExecutorServiceClient, context.CancelFunc, *run) {
	t.Helper()
	if cfg.NumberOfSlots == 0 {
		cfg.NumberOfSlots = 2
	}
	if cfg.RPCBindAddress == "" {
		cfg.RPCBindAddress = "127.0.0.1:0"
	}
	if cfg.RegistrationBackoff == 0 {
		cfg.RegistrationBackoff = 20 * time.Millisecond
	}
	if cfg.RPCTimeout == 0 {
		cfg.RPCTimeout = 2 * time.Second
	}
	te, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{done: make(chan struct{})}
	go func() { r.err = te.Run(ctx); close(r.done) }()
	cc, err := grpc.NewClient(te.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		cancel()
		if !r.stop(t, cfg.Clock) {
			t.Error("Run did not return after cancel")
		}
	})
	return te, pb.NewTaskExecutorServiceClient(cc), cancel, r
}

// stop waits for Run to return; with a fake clock it moves time on, so
// that retries and the shutdown timeout happen.
func (r *run) stop(t *testing.T, clk clock.Clock) bool {
	fake, _ := clk.(*clock.Fake)
	deadline := time.After(waitFor)
	for {
		select {
		case <-r.done:
			return true
		case <-deadline:
			return false
		case <-time.After(10 * time.Millisecond):
			if fake != nil {
				fake.Advance(time.Second)
			}
		}
	}
}

// newCluster starts a fake RM and JM and a registered TaskExecutor.
func newCluster(t *testing.T, rm *fakeRM, jm *fakeJM, cfg Config) *cluster {
	t.Helper()
	if rm == nil {
		rm = newFakeRM()
	}
	if jm == nil {
		jm = newFakeJM()
	}
	c := &cluster{t: t, rm: rm, jm: jm}
	c.rmAddr, _ = serve(t, "127.0.0.1:0", func(s *grpc.Server) { pb.RegisterResourceManagerServiceServer(s, rm) })
	store, err := blob.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	jm.blobs = store
	c.jmAddr, _ = serve(t, "127.0.0.1:0", func(s *grpc.Server) {
		pb.RegisterJobMasterServiceServer(s, jm)
		pb.RegisterBlobServiceServer(s, blob.NewService(store))
	})
	cfg.ResourceManagerAddress = c.rmAddr
	c.te, c.client, c.cancel, c.run = startTE(t, cfg)
	recv(t, rm.registers, "registration")
	recv(t, rm.reports, "first slot report")
	return c
}

func (c *cluster) snapshot() Snapshot {
	c.t.Helper()
	s, err := c.te.Snapshot(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	return s
}

func (c *cluster) requestSlot(alloc string, index int, job string) error {
	_, err := c.client.RequestSlot(context.Background(), &pb.RequestSlotRequest{
		AllocationId: alloc, SlotIndex: int32(index), JobId: job, JobMasterAddress: c.jmAddr, ResourceManagerId: c.rm.id})
	return err
}

// activeSlot requests a slot and waits until the JobMaster accepted it.
func (c *cluster) activeSlot(alloc string, index int, job string) {
	c.t.Helper()
	if err := c.requestSlot(alloc, index, job); err != nil {
		c.t.Fatal(err)
	}
	eventually(c.t, "slot "+alloc+" is active", func() bool {
		s := c.snapshot()
		return s.Slots[index].AllocationID == alloc && s.Slots[index].Active
	})
}

func attempt(vertex string, subtask, n int) *pb.ExecutionAttemptID {
	return &pb.ExecutionAttemptID{Graph: 42, JobVertexId: vertex, SubtaskIndex: int32(subtask), AttemptNumber: int32(n)}
}

func tdd(job, alloc, inv, config string, a *pb.ExecutionAttemptID) *pb.TaskDeploymentDescriptor {
	return &pb.TaskDeploymentDescriptor{
		Attempt: a, AllocationId: alloc,
		JobInformation:  &pb.JobInformation{JobId: job, JobName: "test"},
		TaskInformation: &pb.TaskInformation{JobVertexId: a.JobVertexId, TaskName: a.JobVertexId, NumberOfSubtasks: 1, MaxParallelism: 1, Invokable: inv, Config: []byte(config)},
	}
}

func (c *cluster) submit(job string, d *pb.TaskDeploymentDescriptor) error {
	_, err := c.client.SubmitTask(context.Background(), &pb.SubmitTaskRequest{JobId: job, JobMasterId: c.jm.id, Tdd: d})
	return err
}

// states collects the next n task state updates for attempt a.
func (c *cluster) states(a *pb.ExecutionAttemptID, n int) []*pb.UpdateTaskExecutionStateRequest {
	c.t.Helper()
	var out []*pb.UpdateTaskExecutionStateRequest
	for len(out) < n {
		u := recv(c.t, c.jm.updates, "task state update")
		if attemptKey(u.Attempt) == attemptKey(a) {
			out = append(out, u)
		}
	}
	return out
}

func stateNames(us []*pb.UpdateTaskExecutionStateRequest) []string {
	var out []string
	for _, u := range us {
		out = append(out, u.State)
	}
	return out
}

// advanceUntil moves the fake clock on, a second at a time, until a value
// arrives on ch.
func advanceUntil[T any](t *testing.T, clk *clock.Fake, ch <-chan T, what string) T {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case v := <-ch:
			return v
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(10 * time.Millisecond):
			clk.Advance(time.Second)
		}
	}
}
