package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/version"
	"github.com/gofl/gofl/rpc/pb"
)

// Environment variables a TaskManager sets for the runner it starts.
const (
	EnvRole   = "GOFL_ROLE"
	EnvSocket = "GOFL_RUNNER_SOCKET"
	EnvJobID  = "GOFL_JOB_ID"
	// RoleRunner is the value of EnvRole for a runner.
	RoleRunner = "runner"
	// EnvDataFD names the inherited file descriptor of the job's data port
	// (a listening TCP socket the TaskManager opened and advertised to the
	// JobMaster); EnvDataAddress is its advertised host:port.
	EnvDataFD      = "GOFL_RUNNER_DATA_FD"
	EnvDataAddress = "GOFL_RUNNER_DATA_ADDRESS"
	// EnvParallelism is the job's default parallelism (the JobGraph config's
	// parallelism.default), so an SDK runner re-plans from the same default.
	EnvParallelism = "GOFL_PARALLELISM"
)

// DataListener returns the data port the TaskManager handed to this runner
// and its advertised address, or a nil listener when there is none (a
// TaskManager that opens no data port, or a runner started by hand).
func DataListener() (net.Listener, string, error) {
	v := os.Getenv(EnvDataFD)
	if v == "" {
		return nil, "", nil
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, "", fmt.Errorf("runner: %s=%q is not an inherited file descriptor", EnvDataFD, v)
	}
	f := os.NewFile(uintptr(fd), "gofl-data-port")
	if f == nil {
		return nil, "", fmt.Errorf("runner: %s=%d is not open", EnvDataFD, fd)
	}
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, "", fmt.Errorf("runner: data port (fd %d): %w", fd, err)
	}
	addr := os.Getenv(EnvDataAddress)
	if addr == "" {
		addr = ln.Addr().String()
	}
	return ln, addr, nil
}

// Executor runs tasks inside a runner. Its methods are called from gRPC
// handlers, concurrently; they must not block for long.
type Executor interface {
	// Submit starts a task and returns once it started (not finished). The
	// task's state transitions must be passed to report, in order, ending
	// with FINISHED, FAILED or CANCELED.
	Submit(ctx context.Context, req *pb.SubmitTaskRequest, report func(*pb.RunnerTaskState)) error
	// Cancel asks a task to stop; unknown or ended tasks are ignored.
	Cancel(attempt *pb.ExecutionAttemptID)
	// ReleasePartitions drops produced partitions.
	ReleasePartitions(req *pb.ReleasePartitionsRequest)
	// Close cancels every task and waits for them.
	Close()
}

// Info describes the runner to the TaskManager in the handshake.
type Info struct {
	JobID string
	// Fingerprint of the JobGraph the runner's builder produces; empty
	// skips the check (a runner of built-in tasks).
	Fingerprint string
	SDKVersion  string
	// ProtocolVersion defaults to version.ProtocolVersion.
	ProtocolVersion int32
}

// DefaultHeartbeatInterval is how often a runner heartbeats unless the
// TaskManager asks for another interval.
const DefaultHeartbeatInterval = time.Second

const minHeartbeatInterval = 10 * time.Millisecond

// ErrFingerprintMismatch means the job's builder produced a different graph
// in the runner than on the client: a non-deterministic builder.
var ErrFingerprintMismatch = errors.New("runner: JobGraph fingerprint mismatch")

// Serve runs the JobRunnerService on the Unix socket at socketPath until
// ctx ends or the TaskManager asks it to shut down. It closes ex before it
// returns.
func Serve(ctx context.Context, socketPath string, info Info, ex Executor, log zerolog.Logger) error {
	if info.ProtocolVersion == 0 {
		info.ProtocolVersion = version.ProtocolVersion
	}
	_ = os.Remove(socketPath)
	lis, err := net.Listen("unix", socketPath)
	if err != nil {
		return fmt.Errorf("runner: listening on %s: %w", socketPath, err)
	}
	defer os.Remove(socketPath)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A runner must not outlive its TaskManager: if the TaskManager dies
	// (even by SIGKILL, which it cannot pass on), the runner is reparented;
	// notice that and shut down.
	parent := os.Getppid()
	orphanDone := make(chan struct{})
	go func() {
		defer close(orphanDone)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if os.Getppid() != parent {
					log.Warn().Int("parent", parent).Msg("the TaskManager that started this runner is gone; shutting down")
					cancel()
					return
				}
			}
		}
	}()
	defer func() { <-orphanDone }()
	srv := &server{info: info, ex: ex, log: log, shutdown: cancel, states: newBroadcaster(), stopping: ctx.Done()}
	g := grpc.NewServer()
	pb.RegisterJobRunnerServiceServer(g, srv)
	done := make(chan error, 1)
	go func() { done <- g.Serve(lis) }()
	<-ctx.Done()
	ex.Close()
	srv.states.close()
	g.GracefulStop()
	if err := <-done; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("runner: %w", err)
	}
	return nil
}

type server struct {
	pb.UnimplementedJobRunnerServiceServer
	info     Info
	ex       Executor
	log      zerolog.Logger
	shutdown context.CancelFunc
	states   *broadcaster
	// stopping is closed when the runner shuts down; streams end then so
	// the graceful stop need not wait for their clients.
	stopping <-chan struct{}
}

func (s *server) Handshake(_ context.Context, req *pb.RunnerHandshakeRequest) (*pb.RunnerHandshakeResponse, error) {
	if req.ProtocolVersion != s.info.ProtocolVersion {
		return nil, status.Errorf(codes.FailedPrecondition, "runner: the TaskManager speaks runner protocol %d, this job binary speaks %d (rebuild the job with a matching gofl SDK)",
			req.ProtocolVersion, s.info.ProtocolVersion)
	}
	if s.info.JobID != "" && req.JobId != s.info.JobID {
		return nil, status.Errorf(codes.FailedPrecondition, "runner: started for job %s, asked to run job %s", s.info.JobID, req.JobId)
	}
	if s.info.Fingerprint != "" && req.Fingerprint != "" && req.Fingerprint != s.info.Fingerprint {
		return nil, status.Errorf(codes.FailedPrecondition, "%v: the client planned %s, the runner's builder produced %s; the job's builder must build the same graph from the same arguments",
			ErrFingerprintMismatch, req.Fingerprint, s.info.Fingerprint)
	}
	return &pb.RunnerHandshakeResponse{ProtocolVersion: s.info.ProtocolVersion, SdkVersion: s.info.SDKVersion, Pid: int32(os.Getpid())}, nil
}

func (s *server) SubmitTask(ctx context.Context, req *pb.SubmitTaskRequest) (*pb.Ack, error) {
	if req.GetTdd().GetAttempt() == nil {
		return nil, status.Error(codes.InvalidArgument, "runner: a task needs an attempt ID")
	}
	if err := s.ex.Submit(ctx, req, s.states.publish); err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "runner: %v", err)
	}
	return &pb.Ack{}, nil
}

func (s *server) CancelTask(_ context.Context, req *pb.CancelTaskRequest) (*pb.Ack, error) {
	s.ex.Cancel(req.Attempt)
	return &pb.Ack{}, nil
}

func (s *server) ReleasePartitions(_ context.Context, req *pb.ReleasePartitionsRequest) (*pb.Ack, error) {
	s.ex.ReleasePartitions(req)
	return &pb.Ack{}, nil
}

func (s *server) WatchTaskStates(_ *pb.WatchTaskStatesRequest, stream pb.JobRunnerService_WatchTaskStatesServer) error {
	ch, stop := s.states.subscribe()
	defer stop()
	for {
		select {
		case st, ok := <-ch:
			if !ok {
				return nil
			}
			if err := stream.Send(st); err != nil {
				return err
			}
		case <-stream.Context().Done():
			return nil
		}
	}
}

// Heartbeats sends a sign of life every interval: from its own goroutine,
// so only a runner that cannot run at all (stopped, frozen) falls silent.
func (s *server) Heartbeats(req *pb.RunnerHeartbeatRequest, stream pb.JobRunnerService_HeartbeatsServer) error {
	interval := time.Duration(req.IntervalMs) * time.Millisecond
	if interval <= 0 {
		interval = DefaultHeartbeatInterval
	}
	interval = max(interval, minHeartbeatInterval)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	pid := int32(os.Getpid())
	for seq := int64(1); ; seq++ {
		if err := stream.Send(&pb.RunnerHeartbeat{Sequence: seq, Pid: pid}); err != nil {
			return err
		}
		select {
		case <-tick.C:
		case <-stream.Context().Done():
			return nil
		case <-s.stopping:
			return nil
		}
	}
}

func (s *server) Shutdown(_ context.Context, req *pb.RunnerShutdownRequest) (*pb.Ack, error) {
	s.log.Info().Str("cause", req.Cause).Msg("runner shutting down")
	s.shutdown()
	return &pb.Ack{}, nil
}

// broadcaster hands task states to the watching TaskManager, buffering
// what happens while no one watches so nothing is lost.
type broadcaster struct {
	mu      sync.Mutex
	pending []*pb.RunnerTaskState
	subs    map[int]chan *pb.RunnerTaskState
	next    int
	closed  bool
}

func newBroadcaster() *broadcaster {
	return &broadcaster{subs: map[int]chan *pb.RunnerTaskState{}}
}

// publish queues a state; it never blocks the task that reports.
func (b *broadcaster) publish(st *pb.RunnerTaskState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.pending = append(b.pending, st)
	for _, ch := range b.subs {
		b.drainLocked(ch)
	}
}

// drainLocked moves pending states into a subscriber's channel as far as it
// has room; the subscriber's pump goroutine asks for more.
func (b *broadcaster) drainLocked(ch chan *pb.RunnerTaskState) {
	for len(b.pending) > 0 {
		select {
		case ch <- b.pending[0]:
			b.pending = b.pending[1:]
		default:
			return
		}
	}
}

func (b *broadcaster) subscribe() (<-chan *pb.RunnerTaskState, func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	id := b.next
	b.next++
	ch := make(chan *pb.RunnerTaskState, 1024)
	b.subs[id] = ch
	b.drainLocked(ch)
	out := make(chan *pb.RunnerTaskState)
	stop := make(chan struct{})
	go func() {
		defer close(out)
		for {
			select {
			case st, ok := <-ch:
				if !ok {
					return
				}
				select {
				case out <- st:
				case <-stop:
					return
				}
				b.mu.Lock()
				b.drainLocked(ch)
				b.mu.Unlock()
			case <-stop:
				return
			}
		}
	}()
	var once sync.Once
	return out, func() {
		once.Do(func() {
			close(stop)
			b.mu.Lock()
			delete(b.subs, id)
			b.mu.Unlock()
		})
	}
}

func (b *broadcaster) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	for id, ch := range b.subs {
		close(ch)
		delete(b.subs, id)
	}
}
