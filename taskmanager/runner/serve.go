package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	// EnvReadyFD names the inherited write end of a pipe on which the
	// runner writes a byte once its socket listens, so the TaskManager
	// connects then instead of polling for the socket file.
	EnvReadyFD = "GOFL_RUNNER_READY_FD"
	// EnvParallelism is the job's default parallelism (the JobGraph config's
	// parallelism.default), so an SDK runner re-plans from the same default.
	EnvParallelism = "GOFL_PARALLELISM"
	// EnvLocalStateDir is the job's local state directory on the
	// TaskManager (<work dir>/localState/<job-id>), where tasks keep copies
	// of their checkpointed state when state.backend.local-recovery is on;
	// the TaskManager deletes it when the job is released there.
	EnvLocalStateDir = "GOFL_LOCAL_STATE_DIR"
	// EnvManagedMemory is the managed memory of one slot in bytes
	// (taskmanager.memory.managed.size / slots); EnvTmpDirs the spill
	// directories, comma-separated (io.tmp.dirs, else the job's directory
	// in the TaskManager's work directory).
	EnvManagedMemory = "GOFL_MANAGED_MEMORY_PER_SLOT"
	EnvTmpDirs       = "GOFL_IO_TMP_DIRS"
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

// notifyReady tells the TaskManager that the socket listens (EnvReadyFD),
// once; without the variable (a runner started by hand) nothing.
func notifyReady() {
	v := os.Getenv(EnvReadyFD)
	_ = os.Unsetenv(EnvReadyFD) // user code's children must not write to it
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return
	}
	if f := os.NewFile(uintptr(fd), "gofl-runner-ready"); f != nil {
		_, _ = f.Write([]byte{1})
		f.Close()
	}
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

// ErrTaskNotFound is wrapped by a CheckpointExecutor's answer for an
// attempt that does not run (any more) in the runner.
var ErrTaskNotFound = errors.New("runner: the task does not run here")

// CheckpointExecutor is an Executor whose tasks take checkpoints. A runner
// whose executor is not one answers the checkpoint RPCs with UNIMPLEMENTED,
// which the TaskManager turns into a decline.
type CheckpointExecutor interface {
	Executor
	// SetCheckpointReporter is called by Serve once, before it serves,
	// with the function every acknowledgement and decline of the
	// executor's tasks goes to (the WatchCheckpoints stream). report never
	// blocks and is safe from any goroutine.
	SetCheckpointReporter(report func(*pb.RunnerCheckpointReport))
	// TriggerCheckpoint hands a trigger to the attempt's task and returns
	// at once; the task acknowledges or declines through the reporter. It
	// fails, wrapping ErrTaskNotFound, when the attempt does not run here.
	TriggerCheckpoint(req *pb.TriggerCheckpointRequest) error
	// NotifyCheckpoint hands a completion or abort notice to the
	// attempt's task; non-blocking, idempotent. ErrTaskNotFound as above.
	NotifyCheckpoint(req *pb.NotifyCheckpointRequest) error
}

// OperatorEventExecutor is a CheckpointExecutor whose tasks' operators
// have coordinators in the JobMaster. Their events to the coordinators go
// out through the checkpoint reporter (in order with the checkpoint
// reports).
type OperatorEventExecutor interface {
	CheckpointExecutor
	// SendOperatorEventToTask hands a coordinator's event to the
	// attempt's operator without blocking. ErrTaskNotFound as above.
	SendOperatorEventToTask(req *pb.OperatorEventRequest) error
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

// socketDirPrefix names the temporary directories of runner sockets whose
// work directory's path is too long for one.
const socketDirPrefix = "gofl-runner-"

// removeSocket removes the runner's socket and, when it has one of its
// own, its temporary directory: a TaskManager killed by SIGKILL cannot, and
// its runners outlive it long enough to notice (the orphan check).
func removeSocket(path string) {
	_ = os.Remove(path)
	if dir := filepath.Dir(path); strings.HasPrefix(filepath.Base(dir), socketDirPrefix) {
		_ = os.Remove(dir) // only if empty
	}
}

// Serve runs the JobRunnerService on the Unix socket at socketPath until
// ctx ends or the TaskManager asks it to shut down. It closes ex before it
// returns.
func Serve(ctx context.Context, socketPath string, info Info, ex Executor, log zerolog.Logger) error {
	if info.ProtocolVersion == 0 {
		info.ProtocolVersion = version.ProtocolVersion
	}
	// The secret is for this process only: user code's children need not
	// inherit it.
	secret := os.Getenv(EnvSecret)
	_ = os.Unsetenv(EnvSecret)
	_ = os.Remove(socketPath)
	lis, err := net.Listen("unix", socketPath)
	if err != nil {
		return fmt.Errorf("runner: listening on %s: %w", socketPath, err)
	}
	defer removeSocket(socketPath)
	if err := os.Chmod(socketPath, 0o600); err != nil {
		lis.Close()
		return fmt.Errorf("runner: %w", err)
	}
	notifyReady()
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
	srv := &server{info: info, ex: ex, log: log, shutdown: cancel, states: newBroadcaster[*pb.RunnerTaskState](),
		checkpoints: newBroadcaster[*pb.RunnerCheckpointReport](), stopping: ctx.Done()}
	if cx, ok := ex.(CheckpointExecutor); ok {
		cx.SetCheckpointReporter(srv.checkpoints.publish)
	}
	var opts []grpc.ServerOption
	if secret != "" { // empty: a runner started by hand, not by a TaskManager
		opts = secretInterceptors(secret)
	}
	g := grpc.NewServer(opts...)
	pb.RegisterJobRunnerServiceServer(g, srv)
	done := make(chan error, 1)
	go func() { done <- g.Serve(lis) }()
	<-ctx.Done()
	ex.Close()
	srv.states.close()
	srv.checkpoints.close()
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
	states   *broadcaster[*pb.RunnerTaskState]
	// checkpoints carries the tasks' acknowledgements and declines.
	checkpoints *broadcaster[*pb.RunnerCheckpointReport]
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
	return pumpStream(stream.Context(), s.states, stream.Send)
}

func (s *server) TriggerCheckpoint(_ context.Context, req *pb.TriggerCheckpointRequest) (*pb.Ack, error) {
	cx, ok := s.ex.(CheckpointExecutor)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "runner: this job binary's executor takes no checkpoints")
	}
	if err := cx.TriggerCheckpoint(req); err != nil {
		return nil, checkpointStatus(err)
	}
	return &pb.Ack{}, nil
}

func (s *server) NotifyCheckpoint(_ context.Context, req *pb.NotifyCheckpointRequest) (*pb.Ack, error) {
	cx, ok := s.ex.(CheckpointExecutor)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "runner: this job binary's executor takes no checkpoints")
	}
	if err := cx.NotifyCheckpoint(req); err != nil {
		return nil, checkpointStatus(err)
	}
	return &pb.Ack{}, nil
}

func (s *server) SendOperatorEventToTask(_ context.Context, req *pb.OperatorEventRequest) (*pb.Ack, error) {
	ox, ok := s.ex.(OperatorEventExecutor)
	if !ok {
		return nil, status.Error(codes.Unimplemented, "runner: this job binary's executor has no operator coordinators")
	}
	if err := ox.SendOperatorEventToTask(req); err != nil {
		return nil, checkpointStatus(err)
	}
	return &pb.Ack{}, nil
}

func checkpointStatus(err error) error {
	if errors.Is(err, ErrTaskNotFound) {
		return status.Error(codes.NotFound, err.Error())
	}
	return status.Errorf(codes.FailedPrecondition, "runner: %v", err)
}

// WatchCheckpoints streams every acknowledgement and decline, in order.
func (s *server) WatchCheckpoints(_ *pb.WatchCheckpointsRequest, stream pb.JobRunnerService_WatchCheckpointsServer) error {
	if _, ok := s.ex.(CheckpointExecutor); !ok {
		return status.Error(codes.Unimplemented, "runner: this job binary's executor takes no checkpoints")
	}
	return pumpStream(stream.Context(), s.checkpoints, stream.Send)
}

// pumpStream sends what b publishes until b closes or the stream ends.
func pumpStream[T any](ctx context.Context, b *broadcaster[T], send func(T) error) error {
	ch, stop := b.subscribe()
	defer stop()
	for {
		select {
		case v, ok := <-ch:
			if !ok {
				return nil
			}
			if err := send(v); err != nil {
				return err
			}
		case <-ctx.Done():
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

// broadcaster hands task states (or checkpoint reports) to the watching
// TaskManager, buffering what happens while no one watches so nothing is
// lost.
type broadcaster[T any] struct {
	mu      sync.Mutex
	pending []T
	subs    map[int]chan T
	next    int
	closed  bool
}

func newBroadcaster[T any]() *broadcaster[T] {
	return &broadcaster[T]{subs: map[int]chan T{}}
}

// publish queues a state; it never blocks the task that reports.
func (b *broadcaster[T]) publish(st T) {
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
func (b *broadcaster[T]) drainLocked(ch chan T) {
	for len(b.pending) > 0 {
		select {
		case ch <- b.pending[0]:
			b.pending = b.pending[1:]
		default:
			return
		}
	}
}

func (b *broadcaster[T]) subscribe() (<-chan T, func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	id := b.next
	b.next++
	ch := make(chan T, 1024)
	b.subs[id] = ch
	b.drainLocked(ch)
	out := make(chan T)
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

func (b *broadcaster[T]) close() {
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
