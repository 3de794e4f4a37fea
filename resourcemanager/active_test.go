package resourcemanager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gofl/gofl/providers"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/taskmanager"
)

// teDriver is an in-test WorkerDriver whose workers are real TaskExecutors
// (taskmanager.New) running in this process.
type teDriver struct {
	t      *testing.T
	logs   *logBuffer
	mu     sync.Mutex
	rmAddr string
	h      providers.EventHandler
	next   int
	fail   int // reject this many more requests
	live   map[string]context.CancelFunc
	asked  []providers.WorkerSpec
	closed bool
	wg     sync.WaitGroup
}

func newTEDriver(t *testing.T, logs *logBuffer) *teDriver {
	return &teDriver{t: t, logs: logs, live: map[string]context.CancelFunc{}}
}

func (d *teDriver) Start(h providers.EventHandler) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.h = h
	return nil
}

func (d *teDriver) RequestWorker(ctx context.Context, spec providers.WorkerSpec) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked = append(d.asked, spec)
	if d.closed {
		return "", providers.ErrClosed
	}
	if d.fail > 0 {
		d.fail--
		return "", errors.New("injected start failure")
	}
	d.next++
	id := fmt.Sprintf("worker-%d", d.next)
	te, err := taskmanager.New(taskmanager.Config{
		ResourceID: id, NumberOfSlots: spec.Slots, ResourceManagerAddress: d.rmAddr,
		RegistrationBackoff: 10 * time.Millisecond, WorkDir: d.t.TempDir(),
	}, zerolog.New(d.logs).With().Str("worker", id).Logger())
	if err != nil {
		return "", err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	d.live[id] = cancel
	d.h(providers.WorkerStarted{WorkerID: id, Address: te.Address()})
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		err := te.Run(runCtx)
		d.mu.Lock()
		defer d.mu.Unlock()
		_, stillLive := d.live[id]
		delete(d.live, id)
		if !d.closed {
			d.h(providers.WorkerTerminated{WorkerID: id, Cause: fmt.Errorf("TaskExecutor stopped: %v", err), Released: !stillLive})
		}
	}()
	return id, nil
}

func (d *teDriver) ReleaseWorker(_ context.Context, id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	cancel, ok := d.live[id]
	if !ok {
		return fmt.Errorf("%w: %s", providers.ErrWorkerNotFound, id)
	}
	delete(d.live, id)
	cancel()
	return nil
}

// crash stops a worker as if its process died.
func (d *teDriver) crash(id string) {
	d.mu.Lock()
	cancel := d.live[id]
	d.mu.Unlock()
	cancel()
}

func (d *teDriver) Close(context.Context) error {
	d.mu.Lock()
	d.closed = true
	for _, cancel := range d.live {
		cancel()
	}
	d.mu.Unlock()
	d.wg.Wait()
	return nil
}

func (d *teDriver) requests() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.asked)
}

// fakeJobMaster serves the JobMasterService for one job and accepts every
// slot offer, as a JobMaster with enough queued requests does.
type fakeJobMaster struct {
	pb.UnimplementedJobMasterServiceServer
	mu      sync.Mutex
	offered map[string]string // allocation ID → resource ID
	tmAddr  map[string]string // resource ID → TaskExecutor address
}

func (f *fakeJobMaster) RegisterTaskManager(_ context.Context, req *pb.RegisterTaskManagerRequest) (*pb.RegisterTaskManagerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tmAddr[req.GetLocation().GetResourceId()] = req.GetLocation().GetRpcAddress()
	return &pb.RegisterTaskManagerResponse{JobMasterId: "jm", HeartbeatIntervalMs: 100, HeartbeatTimeoutMs: 60000}, nil
}

func (f *fakeJobMaster) OfferSlots(_ context.Context, req *pb.OfferSlotsRequest) (*pb.OfferSlotsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &pb.OfferSlotsResponse{}
	for _, s := range req.GetSlots() {
		f.offered[s.GetAllocationId()] = req.GetResourceId()
		resp.Accepted = append(resp.Accepted, s.GetAllocationId())
	}
	return resp, nil
}

// freeAll returns every accepted slot to its TaskExecutor (the job ended).
func (f *fakeJobMaster) freeAll(t *testing.T) {
	f.mu.Lock()
	offered := f.offered
	f.offered = map[string]string{}
	addrs := f.tmAddr
	f.mu.Unlock()
	for alloc, rid := range offered {
		conn, err := grpc.NewClient(addrs[rid], grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		_, err = pb.NewTaskExecutorServiceClient(conn).FreeSlot(ctxT(t), &pb.FreeSlotRequest{AllocationId: alloc, Cause: "job finished"})
		conn.Close()
		if err != nil {
			t.Fatalf("FreeSlot %s on %s: %v", alloc, rid, err)
		}
	}
}

// lost forgets the slots of a TaskManager that died.
func (f *fakeJobMaster) lost(resourceID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for alloc, rid := range f.offered {
		if rid == resourceID {
			delete(f.offered, alloc)
		}
	}
}

func (f *fakeJobMaster) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.offered)
}

func startFakeJobMaster(t *testing.T) (*fakeJobMaster, string) {
	f := &fakeJobMaster{offered: map[string]string{}, tmAddr: map[string]string{}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterJobMasterServiceServer(srv, f)
	served := make(chan struct{})
	go func() { _ = srv.Serve(lis); close(served) }()
	t.Cleanup(func() { srv.Stop(); <-served })
	return f, lis.Addr().String()
}

// startActiveRM is startRM with a teDriver as the provider.
func startActiveRM(t *testing.T, active ActiveConfig) (*cluster, *teDriver) {
	logs := &logBuffer{}
	drv := newTEDriver(t, logs)
	cfg := testConfig()
	// Only provider events explain prompt removals; the real TaskExecutors
	// (on the wall clock) learn this timeout too and must not time out the
	// RM, whose heartbeats follow the fake clock.
	cfg.HeartbeatTimeout = time.Minute
	cfg.Workers = drv
	cfg.Active = active
	c := startRMWithLogs(t, cfg, logs, func(addr string) {
		drv.mu.Lock()
		drv.rmAddr = addr
		drv.mu.Unlock()
	})
	return c, drv
}

// TestActiveStartsAndReleasesTaskManagers: a job's requirement starts
// exactly the TaskManagers it needs, a crashed one is removed at once and
// replaced, and idle ones are released after resourcemanager.taskmanager-timeout.
func TestActiveStartsAndReleasesTaskManagers(t *testing.T) {
	c, drv := startActiveRM(t, ActiveConfig{Worker: providers.WorkerSpec{Slots: 2}, IdleTimeout: 30 * time.Second})
	fjm, jmAddr := startFakeJobMaster(t)
	gw := &fakeJM{}
	if err := c.rm.RegisterJobMaster(ctxT(t), activeJobID, jmAddr, gw); err != nil {
		t.Fatal(err)
	}
	if err := c.rm.DeclareResourceRequirements(ctxT(t), activeJobID, 5); err != nil {
		t.Fatal(err)
	}
	eventually(t, "5 slots allocated to the job", func() bool { return fjm.count() == 5 })
	if ids := slices.Sorted(slices.Values(c.taskManagerIDs())); !slices.Equal(ids, []string{"worker-1", "worker-2", "worker-3"}) {
		t.Fatalf("TaskManagers = %v, want 3 workers of 2 slots for 5 slots", ids)
	}
	if n := drv.requests(); n != 3 {
		t.Fatalf("%d workers requested, want 3", n)
	}
	if n := gw.noticeList(); len(n) != 0 {
		t.Fatalf("not-enough-resources notices in active mode: %v", n)
	}

	// A worker dies: removed at once (the heartbeat timeout is a minute),
	// and a replacement starts for the two slots the job lost.
	drv.crash("worker-2")
	eventually(t, "worker-2 is removed", func() bool { return !slices.Contains(c.taskManagerIDs(), "worker-2") })
	if lost := gw.lostList(); !slices.Equal(lost, []string{"worker-2"}) {
		t.Fatalf("the JobMaster was told %v were lost, want [worker-2]", lost)
	}
	fjm.lost("worker-2") // as the JobMaster does when told
	eventually(t, "the job has 5 slots again", func() bool { return fjm.count() == 5 })
	if n := drv.requests(); n != 4 {
		t.Fatalf("%d workers requested, want 4 (one replacement)", n)
	}

	// The job ends: its slots are freed and the workers go idle.
	if err := c.rm.DisconnectJobMaster(ctxT(t), activeJobID, errors.New("finished")); err != nil {
		t.Fatal(err)
	}
	fjm.freeAll(t)
	eventually(t, "the freed slots are reported", func() bool { return c.freeSlots() == 6 })
	c.advance(29 * time.Second)
	if n := len(c.taskManagerIDs()); n != 3 {
		t.Fatalf("%d TaskManagers before the idle timeout, want 3", n)
	}
	c.advance(time.Second)
	eventually(t, "idle workers are released", func() bool { return len(c.taskManagerIDs()) == 0 })
	if n := drv.requests(); n != 4 {
		t.Fatalf("%d workers requested in all, want 4", n)
	}
	if log := c.logs.String(); !strings.Contains(log, "idle for 30s") || !strings.Contains(log, "worker terminated") {
		t.Errorf("the log does not say why workers went:\n%s", log)
	}
}

// TestActiveGivesUpAfterFailedStarts: starts that keep failing back off
// and, after max attempts, the waiting job is told.
func TestActiveGivesUpAfterFailedStarts(t *testing.T) {
	c, drv := startActiveRM(t, ActiveConfig{Worker: providers.WorkerSpec{Slots: 1}, MaxFailedStarts: 3,
		RetryInterval: time.Second, MaxRetryInterval: 2 * time.Second})
	drv.mu.Lock()
	drv.fail = 4 // the first two fail together (one attempt), then two probes
	drv.mu.Unlock()
	gw := &failureRecordingJM{}
	if err := c.rm.RegisterJobMaster(ctxT(t), activeJobID, "nowhere:1", gw); err != nil {
		t.Fatal(err)
	}
	if err := c.rm.DeclareResourceRequirements(ctxT(t), activeJobID, 2); err != nil {
		t.Fatal(err)
	}
	// Failures 1 (the first two together), 2 and 3, paused ~1 s and ~2 s.
	for i := 0; i < 10 && gw.failure() == nil; i++ {
		c.advance(time.Second)
	}
	if drv.requests() != 4 {
		t.Fatalf("%d workers requested, want 4 (two at first, then one probe per pause)", drv.requests())
	}
	if err := gw.failure(); !errors.Is(err, ErrWorkerStartFailed) || !strings.Contains(err.Error(), "injected start failure") {
		t.Fatalf("failure = %v", err)
	}
	if len(gw.noticeList()) == 0 {
		t.Fatal("no NotifyNotEnoughResources")
	}
	// It keeps probing and recovers once starts work again.
	// The next probe (after the maximum pause) starts a worker; once it
	// registered, the rest is requested without a pause.
	for i := 0; i < 10 && drv.requests() < 5; i++ {
		c.advance(time.Second)
	}
	eventually(t, "workers start after all", func() bool { return len(c.taskManagerIDs()) == 2 })
}

type failureRecordingJM struct {
	fakeJM
	mu  sync.Mutex
	err error
}

func (f *failureRecordingJM) NotifyResourceAllocationFailed(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *failureRecordingJM) failure() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// activeJobID is a job ID real TaskExecutors accept (32 hex digits).
const activeJobID = "0a1b2c3d4e5f60718293a4b5c6d7e8f9"
