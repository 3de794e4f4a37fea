package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/backoff"
	"github.com/gofl/gofl/internal/clock"
	"github.com/gofl/gofl/internal/version"
	"github.com/gofl/gofl/logs"
	"github.com/gofl/gofl/rpc/pb"
)

// ErrRunnerExited is wrapped by failures caused by the runner process ending.
var ErrRunnerExited = errors.New("runner: job runner exited")

// ErrUnresponsive is wrapped, besides ErrRunnerExited, by the exit error of
// a runner the TaskManager killed because it stopped heartbeating.
var ErrUnresponsive = errors.New("runner: job runner stopped heartbeating")

// Spec says how to start one job's runner.
type Spec struct {
	JobID       string
	Binary      string
	Args        []string
	Fingerprint string
	// Dir holds the runner's socket and log file.
	Dir string
	// StartTimeout bounds start-up until the handshake (default 30 s).
	StartTimeout time.Duration
	// DataListener, if set, is the job's data port on this TaskManager: the
	// runner inherits it as file descriptor 3 (EnvDataFD) and serves its
	// network data plane on it; DataAddress is its advertised address. The
	// caller keeps its own copy open for the next runner of the job.
	DataListener *net.TCPListener
	DataAddress  string
	// Env is added to the runner's environment.
	Env []string
	// MetricsInterval is how often the runner samples its tasks' I/O
	// metrics (default DefaultMetricsInterval).
	MetricsInterval time.Duration
	// HeartbeatInterval is how often the runner sends a sign of life
	// (default DefaultHeartbeatInterval); HeartbeatTimeout, if positive, is
	// how long it may stay silent before it is killed (SIGKILL to its
	// process group), which ends the Process with ErrUnresponsive.
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
	// Clock times the heartbeat timeout; default clock.Real.
	Clock clock.Clock
	// OnCheckpoint, if set, receives every checkpoint acknowledgement and
	// decline of the runner's tasks, in order, from the Process's
	// WatchCheckpoints stream goroutine. It must not block.
	OnCheckpoint func(*pb.RunnerCheckpointReport)
}

// Process is a running job runner as seen from the TaskManager. It is safe
// for concurrent use.
type Process struct {
	spec    Spec
	log     zerolog.Logger
	cmd     *exec.Cmd
	logPath string
	conn    *grpc.ClientConn
	client  pb.JobRunnerServiceClient
	pid     int

	exited  chan struct{}
	exitErr error

	mu       sync.Mutex
	watchers map[string]chan *pb.RunnerTaskState
	metrics  map[string]*pb.TaskIOMetrics // latest sample per running attempt
	stopOnce sync.Once
	watchWG  sync.WaitGroup
	cancel   context.CancelFunc
	// killCause is why the TaskManager killed the runner, if it did; it
	// becomes part of the exit error.
	killCause error
}

// maxSocketPath is what a Unix socket path may take of sun_path (108
// bytes on Linux, with its terminating NUL).
const maxSocketPath = 104

// Start launches the runner and returns once it answered the handshake. On
// any failure nothing is left running.
func Start(ctx context.Context, spec Spec, log zerolog.Logger) (*Process, error) {
	if spec.StartTimeout <= 0 {
		spec.StartTimeout = 30 * time.Second
	}
	// 0700: the runner's socket is inside (see secret.go).
	if err := os.MkdirAll(spec.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	if err := os.Chmod(spec.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	secret := newSecret()
	socket := filepath.Join(spec.Dir, "runner.sock")
	sockDir := ""
	if len(socket) >= maxSocketPath {
		// A deep work dir (the local provider keeps it in the cluster's
		// directory) would overflow sun_path: the socket goes to a short
		// temporary directory, removed when the runner exits.
		d, err := os.MkdirTemp("", socketDirPrefix)
		if err != nil {
			return nil, fmt.Errorf("runner: %w", err)
		}
		sockDir = d
		socket = filepath.Join(sockDir, "runner.sock")
	}
	removeSockDir := func() {
		if sockDir != "" {
			_ = os.RemoveAll(sockDir)
		}
	}
	_ = os.Remove(socket)
	logPath := filepath.Join(spec.Dir, logs.RunnerLogFile)
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		removeSockDir()
		return nil, fmt.Errorf("runner: %w", err)
	}
	// stdout and stderr also each have a file of their own, so the job's
	// Print() output can be read without the runner's log lines.
	outFile, err := os.OpenFile(filepath.Join(spec.Dir, logs.RunnerOutFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		logFile.Close()
		removeSockDir()
		return nil, fmt.Errorf("runner: %w", err)
	}
	errFile, err := os.OpenFile(filepath.Join(spec.Dir, logs.RunnerErrFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		logFile.Close()
		outFile.Close()
		removeSockDir()
		return nil, fmt.Errorf("runner: %w", err)
	}
	closeLogs := func() {
		logFile.Close()
		outFile.Close()
		errFile.Close()
		removeSockDir()
	}
	var dataFile *os.File
	if spec.DataListener != nil {
		f, err := spec.DataListener.File() // a duplicate, closed once the child has it
		if err != nil {
			closeLogs()
			return nil, fmt.Errorf("runner: data port: %w", err)
		}
		defer f.Close()
		dataFile = f
	}
	// The runner says on this pipe when its socket listens (EnvReadyFD).
	readyR, readyW, err := os.Pipe()
	if err != nil {
		closeLogs()
		return nil, fmt.Errorf("runner: %w", err)
	}
	newCmd := func() *exec.Cmd {
		cmd := exec.Command(spec.Binary, spec.Args...)
		cmd.Env = append(os.Environ(), EnvRole+"="+RoleRunner, EnvSocket+"="+socket, EnvJobID+"="+spec.JobID)
		cmd.Env = append(cmd.Env, spec.Env...)
		cmd.Env = append(cmd.Env, EnvSecret+"="+secret)
		// Inherited descriptors are numbered from 3 in ExtraFiles' order.
		if dataFile != nil {
			cmd.ExtraFiles = []*os.File{dataFile}
			cmd.Env = append(cmd.Env, EnvDataFD+"=3", EnvDataAddress+"="+spec.DataAddress)
		}
		cmd.ExtraFiles = append(cmd.ExtraFiles, readyW)
		cmd.Env = append(cmd.Env, EnvReadyFD+"="+strconv.Itoa(2+len(cmd.ExtraFiles)))
		// stdout (the job's Print()) also goes to the TaskManager's own
		// stdout, which its provider keeps (the local provider's gofl.log,
		// Nomad's task logs); the runner's files are archived (package logs).
		cmd.Stdout = io.MultiWriter(bestEffort{logFile}, bestEffort{outFile}, bestEffort{os.Stdout})
		cmd.Stderr = io.MultiWriter(bestEffort{logFile}, bestEffort{errFile})
		cmd.Dir = spec.Dir
		// Its own process group, so a signal to the TaskManager's group does
		// not reach it and Stop can take down anything it started.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return cmd
	}
	cmd, err := startRetryingBusy(ctx, newCmd)
	readyW.Close() // the runner has its own
	if err != nil {
		readyR.Close()
		closeLogs()
		return nil, fmt.Errorf("runner: starting %s: %w", spec.Binary, err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	p := &Process{spec: spec, log: log.With().Str("job_id", spec.JobID).Int("pid", cmd.Process.Pid).Logger(),
		cmd: cmd, logPath: logPath, pid: cmd.Process.Pid, exited: make(chan struct{}), watchers: map[string]chan *pb.RunnerTaskState{}, cancel: cancel}
	go func() {
		err := cmd.Wait()
		closeLogs()
		ev := p.log.Info()
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			// What the job's code cost this TaskManager's host, for
			// sizing slots and spotting a runaway runner.
			ev = ev.Dur("cpu_user", time.Duration(ru.Utime.Nano())).Dur("cpu_system", time.Duration(ru.Stime.Nano())).
				Int64("max_rss_kib", ru.Maxrss)
		}
		ev.Str("exit", cmd.ProcessState.String()).Msg("job runner exited")
		if err == nil {
			err = errors.New("exit status 0")
		}
		p.mu.Lock()
		cause := p.killCause
		p.mu.Unlock()
		// The log goes away with the TaskManager's directory: its end (a
		// panic's message and stack) travels in the error instead.
		tail := crashReport(logPath)
		if cause != nil {
			p.exitErr = fmt.Errorf("%w: %w: %v%s", ErrRunnerExited, cause, err, tail)
		} else {
			p.exitErr = fmt.Errorf("%w: %v%s", ErrRunnerExited, err, tail)
		}
		close(p.exited)
	}()
	if err := p.connect(ctx, socket, secret, readyR); err != nil {
		cancel()
		p.kill()
		return nil, err
	}
	if spec.MetricsInterval <= 0 {
		spec.MetricsInterval = DefaultMetricsInterval
	}
	if spec.HeartbeatInterval <= 0 {
		spec.HeartbeatInterval = DefaultHeartbeatInterval
	}
	p.watchWG.Add(2)
	go p.watch(wctx)
	go p.watchMetrics(wctx, spec.MetricsInterval)
	if spec.OnCheckpoint != nil {
		p.watchWG.Add(1)
		go p.watchCheckpoints(wctx, spec.OnCheckpoint)
	}
	if spec.HeartbeatTimeout > 0 {
		p.watchWG.Add(1)
		go p.watchHeartbeats(wctx, spec.HeartbeatInterval, spec.HeartbeatTimeout, clock.Or(spec.Clock))
	}
	p.log.Info().Str("binary", spec.Binary).Str("log", logPath).Msg("job runner started")
	return p, nil
}

// connect waits for the runner's socket, then makes the handshake. ready
// is the read end of the runner's readiness pipe, which connect closes: a
// runner of this SDK writes to it once its socket listens (or it ends at
// the runner's exit); an older one does not, and its socket file is looked
// for every 20 ms.
func (p *Process) connect(ctx context.Context, socket, secret string, ready *os.File) error {
	ctx, cancel := context.WithTimeout(ctx, p.spec.StartTimeout)
	defer cancel()
	read := make(chan struct{})
	go func() {
		defer close(read)
		var b [1]byte
		_, _ = ready.Read(b[:])
	}()
	defer func() { ready.Close(); <-read }() // Close ends the read
	signalled := (<-chan struct{})(read)
	for {
		if _, err := os.Stat(socket); err == nil {
			break
		}
		select {
		case <-p.exited:
			return fmt.Errorf("runner: the job binary exited before serving: %w%s", p.exitErr, p.logTail())
		case <-ctx.Done():
			return fmt.Errorf("runner: the job binary did not open its socket within %v%s", p.spec.StartTimeout, p.logTail())
		case <-signalled:
			signalled = nil // looked at once more now
		case <-time.After(20 * time.Millisecond):
		}
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(secretCreds(secret)))
	if err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	p.conn, p.client = conn, pb.NewJobRunnerServiceClient(conn)
	// The socket file appears at bind, a moment before the runner listens:
	// wait for the server to be ready rather than fail on the first refusal,
	// but stop waiting if the process dies.
	hctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-p.exited:
			stop()
		case <-hctx.Done():
		}
	}()
	resp, err := p.client.Handshake(hctx, &pb.RunnerHandshakeRequest{ProtocolVersion: version.ProtocolVersion, JobId: p.spec.JobID, Fingerprint: p.spec.Fingerprint},
		grpc.WaitForReady(true))
	if err != nil {
		conn.Close()
		select {
		case <-p.exited:
			return fmt.Errorf("runner: the job binary exited during the handshake: %w%s", p.exitErr, p.logTail())
		default:
		}
		return fmt.Errorf("runner: handshake with the job binary failed: %w", err)
	}
	if resp.ProtocolVersion != version.ProtocolVersion {
		conn.Close()
		return fmt.Errorf("runner: the job binary speaks runner protocol %d, this TaskManager speaks %d", resp.ProtocolVersion, version.ProtocolVersion)
	}
	return nil
}

// logTail is the end of the runner's log, to explain a failed start.
// bestEffort ignores its writer's errors, so a TaskManager stdout that
// went away never blocks a runner's Print().
type bestEffort struct{ w io.Writer }

func (b bestEffort) Write(p []byte) (int, error) {
	_, _ = b.w.Write(p)
	return len(p), nil
}

// crashReport is the end of an exited runner's output for its exit error:
// from the last "panic: " line when it panicked, else its last lines;
// at most 2 KiB either way.
func crashReport(logPath string) string {
	const limit = 2048
	b, err := os.ReadFile(logPath)
	if err != nil {
		return ""
	}
	if i := bytes.LastIndex(b, []byte("\npanic: ")); i >= 0 {
		b = b[i+1:]
	} else if bytes.HasPrefix(b, []byte("panic: ")) {
		// the whole output is the panic
	} else if len(b) > limit {
		b = b[len(b)-limit:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	if len(b) > limit {
		b = b[:limit]
	}
	if b = bytes.TrimSpace(b); len(b) == 0 {
		return ""
	}
	return "; its output ends with:\n" + string(b)
}

func (p *Process) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 2048 {
		b = b[len(b)-2048:]
	}
	return "; its log ends with:\n" + string(bytes.TrimSpace(b))
}

// watch keeps the state stream open and routes each state to its watcher.
func (p *Process) watch(ctx context.Context) {
	defer p.watchWG.Done()
	stream, err := p.client.WatchTaskStates(ctx, &pb.WatchTaskStatesRequest{})
	if err != nil {
		return
	}
	for {
		st, err := stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil {
				p.log.Debug().Err(err).Msg("task state stream ended")
			}
			return
		}
		p.mu.Lock()
		ch := p.watchers[attemptKey(st.Attempt)]
		p.mu.Unlock()
		if ch != nil {
			ch <- st
		}
	}
}

// watchCheckpoints keeps the checkpoint report stream open and hands each
// report on. A runner of an older SDK answers UNIMPLEMENTED: its tasks
// take no checkpoints, and the triggers sent to it are declined.
func (p *Process) watchCheckpoints(ctx context.Context, report func(*pb.RunnerCheckpointReport)) {
	defer p.watchWG.Done()
	stream, err := p.client.WatchCheckpoints(ctx, &pb.WatchCheckpointsRequest{})
	for err == nil {
		var r *pb.RunnerCheckpointReport
		if r, err = stream.Recv(); err == nil {
			report(r)
		}
	}
	switch {
	case status.Code(err) == codes.Unimplemented:
		p.log.Info().Msg("the job runner takes no checkpoints")
	case !errors.Is(err, io.EOF) && ctx.Err() == nil:
		p.log.Debug().Err(err).Msg("checkpoint report stream ended")
	}
}

// watchHeartbeats keeps the runner's heartbeat stream open and kills the
// runner once it stayed silent for timeout: a stopped or frozen runner
// would otherwise hold its tasks and partitions forever.
func (p *Process) watchHeartbeats(ctx context.Context, interval, timeout time.Duration, clk clock.Clock) {
	defer p.watchWG.Done()
	timer := clk.AfterFunc(timeout, func() { p.unresponsive(timeout) })
	defer timer.Stop()
	stream, err := p.client.Heartbeats(ctx, &pb.RunnerHeartbeatRequest{IntervalMs: interval.Milliseconds()})
	for err == nil {
		if _, err = stream.Recv(); err == nil {
			timer.Reset(timeout)
		}
	}
	if status.Code(err) == codes.Unimplemented {
		p.log.Info().Msg("the job runner sends no heartbeats; its liveness is not watched")
		return
	}
	// The stream broke: the runner is exiting, or Stop ends the watch. A
	// runner that hangs on its way out is still killed at the timeout.
	select {
	case <-p.exited:
	case <-ctx.Done():
	}
}

// unresponsive kills the runner for not heartbeating within timeout.
func (p *Process) unresponsive(timeout time.Duration) {
	select {
	case <-p.exited:
		return
	default:
	}
	p.mu.Lock()
	if p.killCause == nil {
		p.killCause = fmt.Errorf("%w for %v; killed by the TaskManager", ErrUnresponsive, timeout)
	}
	p.mu.Unlock()
	p.log.Warn().Dur("heartbeat_timeout", timeout).Msg("job runner stopped heartbeating; killing it")
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
}

func attemptKey(a *pb.ExecutionAttemptID) string {
	return fmt.Sprintf("%016x/%s/%d/%d", a.GetGraph(), a.GetJobVertexId(), a.GetSubtaskIndex(), a.GetAttemptNumber())
}

// Watch returns the channel that receives the attempt's states; call it
// before SubmitTask so no state is missed, and Unwatch when done.
func (p *Process) Watch(attempt *pb.ExecutionAttemptID) <-chan *pb.RunnerTaskState {
	ch := make(chan *pb.RunnerTaskState, 8)
	p.mu.Lock()
	p.watchers[attemptKey(attempt)] = ch
	p.mu.Unlock()
	return ch
}

// Unwatch stops delivering the attempt's states.
func (p *Process) Unwatch(attempt *pb.ExecutionAttemptID) {
	p.mu.Lock()
	delete(p.watchers, attemptKey(attempt))
	p.mu.Unlock()
}

// Submit forwards a deployment.
func (p *Process) Submit(ctx context.Context, req *pb.SubmitTaskRequest) error {
	_, err := p.client.SubmitTask(ctx, req)
	return p.wrap(err)
}

// Cancel forwards a cancellation; idempotent.
func (p *Process) Cancel(ctx context.Context, jobID string, attempt *pb.ExecutionAttemptID) error {
	_, err := p.client.CancelTask(ctx, &pb.CancelTaskRequest{JobId: jobID, Attempt: attempt})
	return p.wrap(err)
}

// TriggerCheckpoint forwards a checkpoint trigger. A runner that takes no
// checkpoints fails with codes.Unimplemented, an attempt it does not run
// with codes.NotFound (both inside the wrapped status).
func (p *Process) TriggerCheckpoint(ctx context.Context, req *pb.TriggerCheckpointRequest) error {
	_, err := p.client.TriggerCheckpoint(ctx, req)
	return p.wrap(err)
}

// NotifyCheckpoint forwards a checkpoint's completion or abort.
func (p *Process) NotifyCheckpoint(ctx context.Context, req *pb.NotifyCheckpointRequest) error {
	_, err := p.client.NotifyCheckpoint(ctx, req)
	return p.wrap(err)
}

// SendOperatorEventToTask forwards a coordinator's event to a task.
func (p *Process) SendOperatorEventToTask(ctx context.Context, req *pb.OperatorEventRequest) error {
	_, err := p.client.SendOperatorEventToTask(ctx, req)
	return p.wrap(err)
}

// ReleasePartitions forwards a partition release.
func (p *Process) ReleasePartitions(ctx context.Context, req *pb.ReleasePartitionsRequest) error {
	_, err := p.client.ReleasePartitions(ctx, req)
	return p.wrap(err)
}

// exitWait bounds how long a call that failed on the transport waits for
// the runner's exit, whose error says why it died.
const exitWait = 5 * time.Second

func (p *Process) wrap(err error) error {
	if err == nil {
		return nil
	}
	// A call in flight when the runner dies fails with the transport's
	// error ("connection reset by peer", "error reading from server: EOF")
	// a moment before Wait reaps the process: its exit error, which
	// carries the panic or the last lines of its stderr, is the reason to
	// report, so wait a little for it.
	if status.Code(err) == codes.Unavailable {
		t := time.NewTimer(exitWait)
		defer t.Stop()
		select {
		case <-p.exited:
			return p.exitErr
		case <-t.C:
		}
	}
	select {
	case <-p.exited:
		return p.exitErr
	default:
		return fmt.Errorf("runner: %w", err)
	}
}

// Exited is closed when the process ended; Err says why.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err is why the process exited; valid after Exited is closed.
func (p *Process) Err() error { return p.exitErr }

// Pid is the runner's process ID.
func (p *Process) Pid() int { return p.pid }

// Stop asks the runner to shut down, then terminates it: SIGTERM to its
// process group, SIGKILL after grace. It blocks until the process is gone.
func (p *Process) Stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), grace)
		_, _ = p.client.Shutdown(ctx, &pb.RunnerShutdownRequest{Cause: "the TaskManager no longer runs this job"})
		select {
		case <-p.exited:
		case <-ctx.Done():
			_ = syscall.Kill(-p.pid, syscall.SIGTERM)
			select {
			case <-p.exited:
			case <-time.After(grace):
				p.kill()
			}
		}
		cancel()
		p.cancel()
		p.conn.Close()
		p.watchWG.Wait()
	})
}

func (p *Process) kill() {
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	<-p.exited
}

// startRetryingBusy starts the command, retrying while exec fails with
// ETXTBSY: a binary just written (a job binary fetched into the blob cache)
// can stay open for writing a moment longer in a child that another
// goroutine forked meanwhile (golang.org/issue/22315); cmd/go retries the
// same way.
func startRetryingBusy(ctx context.Context, newCmd func() *exec.Cmd) (*exec.Cmd, error) {
	retry := backoff.New(backoff.Config{Initial: 5 * time.Millisecond, Max: 100 * time.Millisecond}, nil)
	for attempt := 1; ; attempt++ {
		cmd := newCmd()
		err := cmd.Start()
		if err == nil || !errors.Is(err, syscall.ETXTBSY) || attempt == 20 {
			return cmd, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(retry.Next()):
		}
	}
}
