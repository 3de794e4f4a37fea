package resourcemanager

import (
	"bytes"
	"context"
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

	"github.com/gofl/gofl/internal/version"
	"github.com/gofl/gofl/rpc/pb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fastConfig heartbeats every 100 ms and times out after 300 ms.
func fastConfig() Config {
	return Config{
		HeartbeatInterval:  100 * time.Millisecond,
		HeartbeatTimeout:   300 * time.Millisecond,
		SlotRequestTimeout: time.Minute,
		RPCTimeout:         time.Second,
	}
}

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

// cluster is a running ResourceManager served over gRPC on loopback.
type cluster struct {
	t      *testing.T
	rm     *ResourceManager
	client pb.ResourceManagerServiceClient
	logs   *logBuffer
	stop   func()
}

func startRM(t *testing.T, cfg Config) *cluster {
	t.Helper()
	return startRMWithLogs(t, cfg, &logBuffer{}, nil)
}

// startRMWithLogs is startRM logging to logs; listening, if not nil, learns
// the RM's address before it runs.
func startRMWithLogs(t *testing.T, cfg Config, logs *logBuffer, listening func(addr string)) *cluster {
	t.Helper()
	rm := New(cfg, zerolog.New(logs).Level(zerolog.DebugLevel))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if listening != nil {
		listening(lis.Addr().String())
	}
	srv := grpc.NewServer()
	pb.RegisterResourceManagerServiceServer(srv, rm.Service())
	served := make(chan struct{})
	go func() { _ = srv.Serve(lis); close(served) }()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { rm.Run(ctx); close(ran) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	c := &cluster{t: t, rm: rm, client: pb.NewResourceManagerServiceClient(conn), logs: logs}
	c.stop = func() {
		once.Do(func() {
			conn.Close()
			cancel()
			<-ran
			srv.Stop()
			<-served
		})
	}
	t.Cleanup(func() {
		c.stop()
		if t.Failed() {
			t.Logf("ResourceManager log:\n%s", logs.String())
		}
	})
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds or 5 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fakeTE is an in-test TaskExecutorService: it keeps a slot table, records
// RequestSlot calls and answers heartbeats with its slot report.
type fakeTE struct {
	pb.UnimplementedTaskExecutorServiceServer
	id, instance, addr string

	mu           sync.Mutex
	slots        []*pb.SlotStatus
	requests     []*pb.RequestSlotRequest // successful ones
	attempts     int                      // every RequestSlot call
	failRequests int                      // fail this many more RequestSlot calls
	silent       bool                     // heartbeats hang until the caller gives up
	heartbeats   int
}

func startTE(t *testing.T, id string, slots int) *fakeTE {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	te := &fakeTE{id: id, instance: id + "-" + randomID()[:8], addr: lis.Addr().String()}
	for i := 0; i < slots; i++ {
		te.slots = append(te.slots, &pb.SlotStatus{SlotIndex: int32(i)})
	}
	srv := grpc.NewServer()
	pb.RegisterTaskExecutorServiceServer(srv, te)
	served := make(chan struct{})
	go func() { _ = srv.Serve(lis); close(served) }()
	t.Cleanup(func() { srv.Stop(); <-served })
	return te
}

func (te *fakeTE) RequestSlot(_ context.Context, req *pb.RequestSlotRequest) (*pb.Ack, error) {
	te.mu.Lock()
	defer te.mu.Unlock()
	te.attempts++
	if te.failRequests > 0 {
		te.failRequests--
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
	return &pb.Ack{}, nil
}

func (te *fakeTE) HeartbeatFromResourceManager(ctx context.Context, _ *pb.HeartbeatRequest) (*pb.TaskManagerHeartbeatResponse, error) {
	te.mu.Lock()
	silent := te.silent
	te.heartbeats++
	report := te.reportLocked()
	te.mu.Unlock()
	if silent {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &pb.TaskManagerHeartbeatResponse{SlotReport: report}, nil
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
// report, as a TaskExecutor does.
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
}

func (te *fakeTE) setSlot(i int, allocationID, jobID string) {
	te.mu.Lock()
	defer te.mu.Unlock()
	te.slots[i].AllocationId, te.slots[i].JobId = allocationID, jobID
}

func (te *fakeTE) setSilent(v bool) {
	te.mu.Lock()
	defer te.mu.Unlock()
	te.silent = v
}

func (te *fakeTE) failNext(n int) {
	te.mu.Lock()
	defer te.mu.Unlock()
	te.failRequests = n
}

// granted is the successful RequestSlot calls so far.
func (te *fakeTE) granted() []*pb.RequestSlotRequest {
	te.mu.Lock()
	defer te.mu.Unlock()
	return append([]*pb.RequestSlotRequest(nil), te.requests...)
}

func (te *fakeTE) attemptCount() int {
	te.mu.Lock()
	defer te.mu.Unlock()
	return te.attempts
}

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
	dead       bool  // heartbeats hang until the caller gives up
	fail       error // heartbeats fail with this error
	heartbeats int
	lost       []string // TaskManagers the ResourceManager said were lost
}

func (jm *fakeJM) NotifyTaskManagerLost(resourceID string, _ error) {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	jm.lost = append(jm.lost, resourceID)
}

func (jm *fakeJM) NotifyNotEnoughResources(acquired int) {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	jm.notices = append(jm.notices, acquired)
}

func (jm *fakeJM) HeartbeatFromResourceManager(ctx context.Context) error {
	jm.mu.Lock()
	dead, fail := jm.dead, jm.fail
	jm.heartbeats++
	jm.mu.Unlock()
	if dead {
		<-ctx.Done()
		return ctx.Err()
	}
	return fail
}

func (jm *fakeJM) noticeList() []int {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	return append([]int(nil), jm.notices...)
}

func (jm *fakeJM) setDead() {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	jm.dead = true
}

func (jm *fakeJM) setFail(err error) {
	jm.mu.Lock()
	defer jm.mu.Unlock()
	jm.fail = err
}

// job registers a JobMaster for jobID and declares slots.
func (c *cluster) job(jobID string, slots int) *fakeJM {
	c.t.Helper()
	jm := &fakeJM{}
	if err := c.rm.RegisterJobMaster(ctxT(c.t), jobID, "jm-"+jobID+":6123", jm); err != nil {
		c.t.Fatalf("RegisterJobMaster: %v", err)
	}
	if err := c.rm.DeclareResourceRequirements(ctxT(c.t), jobID, slots); err != nil {
		c.t.Fatalf("DeclareResourceRequirements: %v", err)
	}
	return jm
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
