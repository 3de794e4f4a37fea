package jobmaster

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/rpc/pb"
)

// recordingTE is a TaskExecutorService server recording the calls it
// handles in arrival order.
type recordingTE struct {
	pb.UnimplementedTaskExecutorServiceServer
	mu    sync.Mutex
	calls []string
}

func (s *recordingTE) add(c string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
}

func (s *recordingTE) log() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *recordingTE) SubmitTask(_ context.Context, req *pb.SubmitTaskRequest) (*pb.Ack, error) {
	s.add("SubmitTask " + attemptID(req.Tdd.Attempt).String())
	return &pb.Ack{}, nil
}

func (s *recordingTE) CancelTask(_ context.Context, req *pb.CancelTaskRequest) (*pb.CancelTaskResponse, error) {
	s.add("CancelTask " + attemptID(req.Attempt).String())
	return &pb.CancelTaskResponse{Running: true}, nil
}

func (s *recordingTE) HeartbeatFromJobManager(context.Context, *pb.HeartbeatRequest) (*pb.TaskManagerHeartbeatResponse, error) {
	return &pb.TaskManagerHeartbeatResponse{}, nil
}

// delayFirst is a unary interceptor holding the first call of method: the
// network holding a packet. (Not simply the first call: the client
// connects lazily, so the first two calls reach the server together and
// either may come first.)
func delayFirst(method string, d time.Duration) grpc.UnaryServerInterceptor {
	var once sync.Once
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		first := false
		if info.FullMethod == method {
			once.Do(func() { first = true })
		}
		if first {
			time.Sleep(d) // the network holding a packet, not a test waiting
		}
		return handler(ctx, req)
	}
}

// A CancelTask sent in the turn after its SubmitTask never overtakes it,
// even when the network holds the SubmitTask: a real gRPC TaskExecutor
// whose first call is delayed sees them in the order they were made.
func TestCancelNeverOvertakesItsSubmitOverGRPC(t *testing.T) {
	te := &recordingTE{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(delayFirst(pb.TaskExecutorService_SubmitTask_FullMethodName, 200*time.Millisecond)))
	pb.RegisterTaskExecutorServiceServer(srv, te)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	cfg := testConfig(nil, 0) // real clock; the 10 s heartbeat does not fire
	cfg.DialTaskManager = dialGRPC
	h := start(t, cfg, job("order", vertex("a", 1)), &fakeRM{})
	waitFor(t, "registration with the ResourceManager", func() bool { _, d, _ := h.rm.snapshot(); return len(d) > 0 })
	addr := lis.Addr().String()
	h.register(addr, 1) // turn 1: the task is deployed (SubmitTask)
	a := h.attempt("a", 0)
	if err := h.jm.Cancel(context.Background()); err != nil { // turn 2: CancelTask
		t.Fatal(err)
	}
	waitFor(t, "both calls at the TaskExecutor", func() bool { return len(te.log()) == 2 })
	want := []string{"SubmitTask " + a.String(), "CancelTask " + a.String()}
	if got := te.log(); !slices.Equal(got, want) {
		t.Fatalf("the TaskExecutor saw %q, want %q", got, want)
	}
}

// Requirements declared in consecutive turns reach the ResourceManager in
// that order even when the first is held up: it ends with the newest.
func TestResourceManagerEndsWithTheNewestRequirement(t *testing.T) {
	rm := &fakeRM{delayFirstDeclare: 200 * time.Millisecond}
	h := start(t, testConfig(nil, 0), job("declare", vertex("a", 5)), rm)
	waitFor(t, "registration", func() bool { n, _, _ := rm.snapshot(); return n > 0 })
	h.register("tm1", 5) // the job holds 5 slots
	h.idle("tm1")
	// Two tasks finish in two turns: the job needs 4, then 3 slots.
	for i := 0; i < 2; i++ {
		if err := h.report(h.attempt("a", i), eg.Finished); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the requirement of 3", func() bool { _, d, _ := rm.snapshot(); return len(d) > 0 && d[len(d)-1] == 3 })
	h.onMailbox(func() {}) // nothing else queued: the outbox is the JobMaster's
	_, declared, _ := rm.snapshot()
	if declared[0] != 5 || !slices.IsSortedFunc(declared, func(a, b int) int { return b - a }) {
		t.Fatalf("the ResourceManager recorded %v, want 5 first and never an older value after a newer one", declared)
	}
	waitFor(t, "the declarations to be through", func() bool {
		n := -1
		h.onMailbox(func() { n = h.jm.rmOut.Len() })
		return n == 0
	})
	if _, d, _ := rm.snapshot(); d[len(d)-1] != 3 {
		t.Fatalf("the ResourceManager ends with %v, want 3", d)
	}
}
