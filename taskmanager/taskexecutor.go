package taskmanager

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gofl/gofl/internal/mailbox"
	"github.com/gofl/gofl/rpc/pb"
)

// TaskExecutor is the TaskManager's endpoint: it registers at the
// ResourceManager, holds the slot table, connects to JobMasters and runs
// tasks. Its state lives on one mailbox goroutine (see the package doc).
type TaskExecutor struct {
	cfg        Config
	log        zerolog.Logger
	instanceID string
	addr       string
	lis        net.Listener
	srv        *grpc.Server
	mb         *mailbox.Mailbox
	running    atomic.Bool

	// Everything below is owned by the mailbox goroutine.
	rm         *rmConnection
	slots      []*slot
	jobs       map[string]*jobConnection
	tasks      map[string]*task
	partitions map[string]map[string]*pb.ResultPartitionIDProto // job ID -> partition key -> ID
	seq        uint64
	runners    *runnerPool // safe for concurrent use; not mailbox state
	tempDir    bool
	stopping   bool
	draining   bool // tasks and reports done; disconnects sent
	fatal      error
}

// New validates cfg, listens on cfg.RPCBindAddress and returns a
// TaskExecutor that serves nothing until Run. Call Run exactly once: it
// owns the listener.
func New(cfg Config, log zerolog.Logger) (*TaskExecutor, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", cfg.RPCBindAddress)
	if err != nil {
		return nil, fmt.Errorf("taskmanager: listen on %s: %w", cfg.RPCBindAddress, err)
	}
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	addr := net.JoinHostPort(cfg.Host, port)
	if cfg.ResourceID == "" {
		cfg.ResourceID = addr + "-" + randomHex(3)
	}
	te := &TaskExecutor{
		cfg:        cfg,
		log:        log.With().Str("resource_id", cfg.ResourceID).Logger(),
		instanceID: randomHex(8),
		addr:       addr,
		lis:        lis,
		mb:         mailbox.New(),
		jobs:       map[string]*jobConnection{},
		tasks:      map[string]*task{},
		partitions: map[string]map[string]*pb.ResultPartitionIDProto{},
	}
	for i := range cfg.NumberOfSlots {
		te.slots = append(te.slots, &slot{index: i})
	}
	if cfg.WorkDir == "" {
		if cfg.WorkDir, err = os.MkdirTemp("", "gofl-tm-"); err != nil {
			lis.Close()
			return nil, fmt.Errorf("taskmanager: work directory: %w", err)
		}
		te.tempDir = true
		te.cfg.WorkDir = cfg.WorkDir
	}
	if te.runners, err = newRunnerPool(cfg.WorkDir, te.dial, 5*time.Second, te.log); err != nil {
		lis.Close()
		return nil, fmt.Errorf("taskmanager: work directory %s: %w", cfg.WorkDir, err)
	}
	te.runners.metricsInterval = cfg.MetricsInterval
	te.runners.env = cfg.RunnerEnv
	te.srv = grpc.NewServer()
	pb.RegisterTaskExecutorServiceServer(te.srv, &service{te: te})
	return te, nil
}

// Address is the advertised RPC address, host:port.
func (te *TaskExecutor) Address() string { return te.addr }

// ResourceID is the TaskManager's resource ID.
func (te *TaskExecutor) ResourceID() string { return te.cfg.ResourceID }

// Run serves the TaskExecutor service, registers at the ResourceManager and
// blocks until ctx ends or a fatal error (a registration the
// ResourceManager rejects for good). Then it cancels every task, reports
// their final states, disconnects from the JobMasters and the
// ResourceManager (bounded by the RPC timeout) and returns once every
// goroutine it started has ended. It returns nil after ctx ended and the
// fatal error otherwise.
func (te *TaskExecutor) Run(ctx context.Context) error {
	if !te.running.CompareAndSwap(false, true) {
		return errors.New("taskmanager: Run called twice")
	}
	serveDone := make(chan error, 1)
	go func() { serveDone <- te.srv.Serve(te.lis) }()
	te.mb.Post(te.start)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case <-ctx.Done():
			te.mb.Post(func() { te.shutdown("TaskManager is shutting down") })
		case <-te.mb.Done():
		}
	}()
	te.mb.Run(context.Background()) // ends with te.mb.Close in finishShutdown
	<-watchDone
	te.srv.Stop()
	<-serveDone
	te.runners.stopAll()
	te.runners.close()
	if te.tempDir {
		_ = os.RemoveAll(te.cfg.WorkDir)
	}
	// Past the mailbox's end nothing else touches its state.
	for _, jc := range te.jobs {
		jc.cc.Close()
		if jc.dataLis != nil {
			jc.dataLis.Close()
		}
	}
	if te.rm != nil {
		te.rm.cc.Close()
	}
	if te.fatal != nil {
		te.log.Error().Err(te.fatal).Msg("TaskExecutor stopped")
	} else {
		te.log.Info().Msg("TaskExecutor stopped")
	}
	return te.fatal
}

func (te *TaskExecutor) start() {
	te.log.Info().Str("address", te.addr).Str("resource_manager", te.cfg.ResourceManagerAddress).
		Int("slots", len(te.slots)).Msg("TaskExecutor started")
	cc, err := te.dial(te.cfg.ResourceManagerAddress)
	if err != nil {
		te.fail(fmt.Errorf("taskmanager: ResourceManager address %q: %w", te.cfg.ResourceManagerAddress, err))
		return
	}
	te.rm = &rmConnection{cc: cc, client: pb.NewResourceManagerServiceClient(cc)}
	te.connectToResourceManager()
}

// fail stops the TaskExecutor with err, which Run returns.
func (te *TaskExecutor) fail(err error) {
	if te.fatal == nil {
		te.fatal = err
	}
	te.shutdown(err.Error())
}

// shutdown cancels every task; finishShutdown continues once they ended and
// their states are reported. The whole shutdown is bounded by RPCTimeout.
func (te *TaskExecutor) shutdown(cause string) {
	if te.stopping {
		return
	}
	te.stopping = true
	te.log.Info().Str("cause", cause).Int("tasks", len(te.tasks)).Msg("TaskExecutor shutting down")
	for _, t := range te.tasks {
		te.cancelTask(t)
	}
	te.after(te.cfg.RPCTimeout, func() {
		te.log.Warn().Msg("shutdown timed out; stopping without waiting for the remaining tasks and calls")
		te.mb.Close()
	})
	te.maybeFinishShutdown()
}

// maybeFinishShutdown disconnects from the JobMasters and the
// ResourceManager once no task runs and no state report is pending, then
// closes the mailbox when those calls are done.
func (te *TaskExecutor) maybeFinishShutdown() {
	if !te.stopping || te.draining || len(te.tasks) > 0 {
		return
	}
	for _, jc := range te.jobs {
		if jc.connected && len(jc.reports) > 0 {
			return
		}
	}
	te.draining = true
	pending := 1
	done := func() {
		if pending--; pending == 0 {
			te.mb.Close()
		}
	}
	for _, jc := range te.jobs {
		pending++
		te.closeJobConnection(jc, "TaskManager is shutting down", true, done)
	}
	if te.rm != nil && te.rm.registered && te.fatal == nil {
		pending++
		req := &pb.DisconnectTaskExecutorRequest{ResourceId: te.cfg.ResourceID, Cause: "TaskManager is shutting down"}
		client := te.rm.client
		callRPC(te, func(ctx context.Context) (*pb.Ack, error) { return client.DisconnectTaskExecutor(ctx, req) },
			func(_ *pb.Ack, err error) {
				if err != nil {
					te.log.Debug().Err(err).Msg("disconnecting from the ResourceManager failed")
				}
				done()
			})
	}
	done()
}

// after runs fn on the mailbox after d, unless the mailbox stopped first.
func (te *TaskExecutor) after(d time.Duration, fn func()) {
	mailbox.Go(te.mb, func(ctx context.Context) (struct{}, error) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return struct{}{}, nil
		case <-ctx.Done():
			return struct{}{}, ctx.Err()
		}
	}, func(_ struct{}, err error) {
		if err == nil {
			fn()
		}
	})
}

// callRPC runs an outgoing call with the RPC timeout off the mailbox and
// continues with then on the mailbox.
func callRPC[T any](te *TaskExecutor, call func(ctx context.Context) (T, error), then func(T, error)) {
	timeout := te.cfg.RPCTimeout
	mailbox.Go(te.mb, func(ctx context.Context) (T, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return call(ctx)
	}, then)
}

func (te *TaskExecutor) dial(addr string) (*grpc.ClientConn, error) {
	bo := backoff.DefaultConfig
	bo.BaseDelay = min(te.cfg.RegistrationBackoff, time.Second)
	bo.MaxDelay = MaxRegistrationBackoff
	return grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: te.cfg.RPCTimeout}))
}

func (te *TaskExecutor) location() *pb.TaskManagerLocation {
	return &pb.TaskManagerLocation{ResourceId: te.cfg.ResourceID, RpcAddress: te.addr, Host: te.cfg.Host}
}

// listenData opens a data port for a job's runner on the RPC bind host.
func (te *TaskExecutor) listenData() (*net.TCPListener, error) {
	host, _, err := net.SplitHostPort(te.cfg.RPCBindAddress)
	if err != nil {
		host = te.cfg.Host
	}
	lis, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, err
	}
	return lis.(*net.TCPListener), nil
}

func (te *TaskExecutor) nextSeq() uint64 { te.seq++; return te.seq }

// checkPeriod is how often a heartbeat timeout is checked.
func checkPeriod(timeout time.Duration) time.Duration {
	return max(timeout/10, 5*time.Millisecond)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
