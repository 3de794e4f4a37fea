package taskmanager

import (
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"

	"github.com/gofl/gofl/ha"
	"github.com/gofl/gofl/internal/backoff"
	"github.com/gofl/gofl/internal/clock"
	"github.com/gofl/gofl/internal/ids"
	"github.com/gofl/gofl/internal/mailbox"
	"github.com/gofl/gofl/internal/tlsconf"
	"github.com/gofl/gofl/logs"
	"github.com/gofl/gofl/rpc/pb"
)

// TaskExecutor is the TaskManager's endpoint: it registers at the
// ResourceManager, holds the slot table, connects to JobMasters and runs
// tasks. Its state lives on one mailbox goroutine (see the package doc).
type TaskExecutor struct {
	cfg        Config
	creds      credentials.TransportCredentials // of every gRPC client and the server
	log        zerolog.Logger
	clk        clock.Clock
	instanceID string
	addr       string
	lis        net.Listener // nil with Config.NoRPCServer
	srv        *grpc.Server
	// logShip asks the log shipper to archive now (buffered, 1).
	logShip   chan struct{}
	serveDone chan error
	svc       *service
	// tokens holds the HDFS delegation tokens the ResourceManager sends
	// (nil with Config.TaskRunner: no job runners to give them to).
	tokens  *delegationTokens
	mb      *mailbox.Mailbox
	exec    TaskRunner
	started atomic.Bool
	// prestart, if set, starts the job's runner ahead of its first task
	// (runnerPool.prestart); called once, on the mailbox, after the first
	// registration at the ResourceManager.
	prestart func()

	// Everything below is owned by the mailbox goroutine.
	// rmLeader follows the ResourceManager leader (Config.LeaderRetrieval);
	// rmSession is the leader session it last reported.
	rmLeader  ha.LeaderRetriever
	rmSession *ha.SessionID
	// deposedSessions are the leader sessions rmSession replaced: their
	// checkpoint notices are refused (checkLeaderSession).
	deposedSessions map[ha.SessionID]bool
	rnd             *rand.Rand
	rm              *rmConnection
	slots           []*slot
	jobs            map[string]*jobConnection
	// closing are connections taken out of jobs whose DisconnectTaskManager
	// is still on its way; each is closed when it is through.
	closing map[*jobConnection]struct{}
	// cancelled and ran remember, per job, the attempts a JobMaster
	// cancelled here and those that started here, across reconnects, until
	// they expire (CancelTombstoneTTL): a late SubmitTask of either never
	// runs.
	cancelled, ran map[string]*tombstones
	tasks          map[string]*task
	partitions     map[string]map[string]*heldPartition // job ID -> partition key -> partition
	// jobRetry paces registrations and offers at JobMasters that rejected
	// them, across the job's connections (see jobRejected).
	jobRetry map[string]*jobRetry
	seq      uint64
	tempDir  bool
	stopping bool
	draining bool // tasks and reports done; disconnects sent
	fatal    error
	// shutdownTimer bounds the shutdown; stopped when Run returns.
	shutdownTimer clock.Timer
}

// New validates cfg, listens on cfg.RPCBindAddress (unless
// cfg.NoRPCServer) and returns a TaskExecutor that serves nothing until
// Start or Run.
func New(cfg Config, log zerolog.Logger) (*TaskExecutor, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	rnd := cfg.Rand
	if rnd == nil {
		var seed [16]byte
		_, _ = crand.Read(seed[:])
		rnd = rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:])))
	}
	var lis net.Listener
	addr := cfg.RPCBindAddress
	if !cfg.NoRPCServer {
		if lis, err = net.Listen("tcp", cfg.RPCBindAddress); err != nil {
			return nil, fmt.Errorf("taskmanager: listen on %s: %w", cfg.RPCBindAddress, err)
		}
		_, port, _ := net.SplitHostPort(lis.Addr().String())
		addr = net.JoinHostPort(cfg.Host, port)
	}
	if cfg.ResourceID == "" {
		cfg.ResourceID = addr + "-" + randomHex(rnd, 3)
	}
	var tlsCfg *tls.Config
	if cfg.InternalTLS != nil {
		if tlsCfg, err = cfg.InternalTLS.Config(); err != nil {
			if lis != nil {
				lis.Close()
			}
			return nil, fmt.Errorf("taskmanager: internal TLS: %w", err)
		}
	}
	te := &TaskExecutor{
		cfg:             cfg,
		creds:           tlsconf.ClientCredentialsLog(tlsCfg, log.With().Str("resource_id", cfg.ResourceID).Logger()),
		log:             log.With().Str("resource_id", cfg.ResourceID).Logger(),
		clk:             clock.Or(cfg.Clock),
		instanceID:      randomHex(rnd, 8),
		addr:            addr,
		lis:             lis,
		rnd:             rnd,
		deposedSessions: map[ha.SessionID]bool{},
		jobs:            map[string]*jobConnection{},
		tasks:           map[string]*task{},
		partitions:      map[string]map[string]*heldPartition{},
		cancelled:       map[string]*tombstones{},
		closing:         map[*jobConnection]struct{}{},
		ran:             map[string]*tombstones{},
		jobRetry:        map[string]*jobRetry{},
	}
	if cfg.Executor != nil {
		te.mb = mailbox.NewWithExecutor(cfg.Executor)
	} else {
		te.mb = mailbox.New()
	}
	for i := range cfg.NumberOfSlots {
		te.slots = append(te.slots, &slot{index: i})
	}
	closeLis := func() { // on a failed New: undo what it made
		if lis != nil {
			lis.Close()
		}
		if te.tempDir {
			_ = os.RemoveAll(te.cfg.WorkDir)
		}
	}
	te.logShip = make(chan struct{}, 1)
	host := TaskRunnerHost{Log: te.log, Clock: te.clk, RunnerLost: func(jobID string, runner uint64, cause error) {
		te.shipLogsSoon() // a crashed runner's output, before anything else can lose it
		te.mb.Post(func() { te.runnerLost(jobID, runner, cause) })
	}, CheckpointReport: func(jobID string, r *pb.RunnerCheckpointReport) {
		te.mb.Post(func() { te.relayCheckpointReport(jobID, r) })
	}}
	if cfg.TaskRunner != nil {
		te.exec = cfg.TaskRunner(host)
	} else {
		if cfg.WorkDir == "" {
			if cfg.WorkDir, err = os.MkdirTemp("", "gofl-tm-"); err != nil {
				closeLis()
				return nil, fmt.Errorf("taskmanager: work directory: %w", err)
			}
			te.tempDir = true
			te.cfg.WorkDir = cfg.WorkDir
		}
		pool, err := newRunnerPool(cfg.WorkDir, te.log)
		if err != nil {
			closeLis()
			return nil, fmt.Errorf("taskmanager: work directory %s: %w", cfg.WorkDir, err)
		}
		env := cfg.RunnerEnv
		if cfg.InternalTLS != nil {
			// The runners' data plane presents the same certificate; they
			// read it from private files in the work directory.
			tlsEnv, err := cfg.InternalTLS.WriteFiles(filepath.Join(cfg.WorkDir, "tls"))
			if err != nil {
				closeLis()
				return nil, fmt.Errorf("taskmanager: internal TLS: %w", err)
			}
			env = append(append([]string{}, env...), tlsEnv...)
		}
		pool.dial, pool.listen, pool.clk, pool.onLost = te.dialGRPC, te.listenData, te.clk, host.RunnerLost
		pool.rpcTimeout, pool.env, pool.onCheckpoint, pool.storage = cfg.RPCTimeout, env, host.CheckpointReport, cfg.Storage
		pool.stagingDir = cfg.StagingDir
		te.tokens = newDelegationTokens(cfg.WorkDir)
		pool.tokens = te.tokens
		pool.metricsInterval, pool.heartbeatInterval, pool.heartbeatTimeout = cfg.MetricsInterval, cfg.HeartbeatInterval, cfg.HeartbeatTimeout
		te.exec = newProcessTaskRunner(pool)
		if cfg.JobBinary != "" {
			pool.prelink(cfg.JobBinary)
			if cfg.JobGraph != "" {
				te.prestart = func() { pool.prestart(cfg.JobGraph, cfg.JobBinary) }
			}
		}
	}
	te.svc = &service{te: te}
	if lis != nil {
		te.srv = grpc.NewServer(grpc.Creds(tlsconf.ServerCredentials(tlsCfg, te.log)), grpc.ChainUnaryInterceptor(ids.UnaryServerInterceptor()))
		pb.RegisterTaskExecutorServiceServer(te.srv, te.svc)
		pb.RegisterLogServiceServer(te.srv, logs.NewService(te.LogSource()))
	}
	return te, nil
}

// Address is the advertised RPC address, host:port.
func (te *TaskExecutor) Address() string { return te.addr }

// ResourceID is the TaskManager's resource ID.
func (te *TaskExecutor) ResourceID() string { return te.cfg.ResourceID }

// Service is the TaskExecutor's RPC service, which its gRPC server serves;
// the fault simulator calls it directly. Its methods block until the
// mailbox ran them.
func (te *TaskExecutor) Service() pb.TaskExecutorServiceServer { return te.svc }

// Start serves the TaskExecutor service (unless Config.NoRPCServer) and
// starts registering at the ResourceManager. Non-blocking; call it once,
// or call Run instead. With a Config.Executor that is all a simulation
// calls: it then drives the turns itself, and a TaskExecutor it never
// drives again has crashed.
func (te *TaskExecutor) Start() error {
	if !te.started.CompareAndSwap(false, true) {
		return errors.New("taskmanager: Start or Run called twice")
	}
	if te.srv != nil {
		te.serveDone = make(chan error, 1)
		go func() { te.serveDone <- te.srv.Serve(te.lis) }()
	}
	te.mb.Post(te.start)
	return nil
}

// Shutdown begins an orderly shutdown (see Run). Non-blocking, idempotent;
// Done is closed once it is over.
func (te *TaskExecutor) Shutdown() {
	te.mb.Post(func() { te.shutdown(fmt.Sprintf("TaskManager %s is shutting down", te.cfg.ResourceID)) })
}

// Done is closed when the TaskExecutor's mailbox stopped.
func (te *TaskExecutor) Done() <-chan struct{} { return te.mb.Done() }

// Run is Start, then blocks until ctx ends or a fatal error (a
// registration the ResourceManager rejects for good). Then it fails every
// task (an environment failure, so the JobMasters restart them elsewhere),
// reports their final states, disconnects from the JobMasters and the
// ResourceManager (bounded by the RPC timeout) and returns once every
// goroutine it started has ended. It returns nil after ctx ended and the
// fatal error otherwise.
func (te *TaskExecutor) Run(ctx context.Context) error {
	if err := te.Start(); err != nil {
		return err
	}
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case <-ctx.Done():
			te.Shutdown()
		case <-te.mb.Done():
		}
	}()
	shipperDone := te.startLogShipper()
	te.mb.Run(context.Background()) // ends with te.mb.Close in finishShutdown
	<-watchDone
	if te.shutdownTimer != nil {
		te.shutdownTimer.Stop()
	}
	if te.srv != nil {
		te.srv.Stop()
		<-te.serveDone
	}
	te.exec.Close()
	shipperDone() // the runners are gone: their logs are complete
	if te.tempDir {
		_ = os.RemoveAll(te.cfg.WorkDir)
	}
	// Past the mailbox's end nothing else touches its state.
	for _, jc := range te.jobs {
		jc.closer.Close()
	}
	for jc := range te.closing {
		jc.closer.Close()
	}
	if te.rmLeader != nil {
		_ = te.rmLeader.Close()
	}
	if te.rm != nil && te.rm.closer != nil {
		te.rm.closer.Close()
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
	client, closer, err := te.dialResourceManager(te.cfg.ResourceManagerAddress)
	if err != nil {
		te.fail(fmt.Errorf("taskmanager: ResourceManager address %q: %w", te.cfg.ResourceManagerAddress, err))
		return
	}
	te.rm = &rmConnection{client: client, closer: closer, retry: te.newBackoff()}
	te.connectToResourceManager("starting", false)
	if s := te.cfg.LeaderRetrieval; s != nil {
		r, err := s.LeaderRetriever(ha.ResourceManagerComponent, rmLeaderListener{te})
		if err != nil {
			te.fail(fmt.Errorf("taskmanager: following the ResourceManager leader: %w", err))
			return
		}
		te.rmLeader = r
	}
}

// rmLeaderListener hands ResourceManager leader changes to the mailbox.
type rmLeaderListener struct{ te *TaskExecutor }

func (l rmLeaderListener) NotifyLeaderAddress(info ha.LeaderInformation) {
	l.te.mb.Post(func() { l.te.resourceManagerLeader(info) })
}

func (l rmLeaderListener) HandleError(err error) {
	l.te.mb.Post(func() { l.te.fail(fmt.Errorf("taskmanager: ResourceManager leader retrieval: %w", err)) })
}

// resourceManagerLeader registers at a new ResourceManager leader at once
// rather than after the old one's heartbeat timeout (the gRPC connection
// already follows the leader; see Config.LeaderRetrieval).
func (te *TaskExecutor) resourceManagerLeader(info ha.LeaderInformation) {
	if info.IsEmpty() || te.stopping {
		return
	}
	first := te.rmSession == nil
	if !first && *te.rmSession == info.SessionID {
		return
	}
	if !first {
		te.deposedSessions[*te.rmSession] = true
	}
	te.rmSession = &info.SessionID
	if first {
		return
	}
	te.log.Info().Str("address", info.Address).Stringer("leader_session", info.SessionID).Msg("a new ResourceManager leader; registering there")
	// The JobMasters lead with the ResourceManager, in one process: the
	// jobs connected under an older leader session, or at another address,
	// lost theirs, even when the new leader has the old one's address (a
	// JobManager restarted on its ports). Their tasks are cancelled, but
	// their slots are kept for the new leader, which recovers the jobs:
	// the slot report shows them allocated, and they are offered to the
	// job's new JobMaster (the leader's address) first.
	var kept []string
	for _, jc := range te.sortedJobs() {
		if jc.address != info.Address || jc.leaderSession == nil || *jc.leaderSession != info.SessionID {
			te.jobMasterLeaderLost(jc, "the JobManager lost its leadership to "+info.Address+" (leader session "+info.SessionID.String()+")")
			if te.jobHasKeptSlots(jc.jobID) {
				kept = append(kept, jc.jobID)
			}
		}
	}
	te.connectToResourceManager("a new ResourceManager leader", false)
	for _, job := range kept {
		if err := te.connectJob(job, info.Address); err != nil {
			te.log.Warn().Err(err).Str("job_id", job).Msg("cannot connect to the new leader's JobMaster; the kept slots time out")
		}
	}
}

// fail stops the TaskExecutor with err, which Run returns.
func (te *TaskExecutor) fail(err error) {
	if te.fatal == nil {
		te.fatal = err
	}
	te.shutdown(err.Error())
}

// shutdown fails every task; maybeFinishShutdown continues once they ended
// and their states are reported. The whole shutdown is bounded by
// RPCTimeout.
func (te *TaskExecutor) shutdown(cause string) {
	if te.stopping {
		return
	}
	te.stopping = true
	te.log.Info().Str("cause", cause).Int("tasks", len(te.tasks)).Msg("TaskExecutor shutting down")
	// Not CANCELED: the JobMaster did not ask for it and would never
	// restart a task it did not cancel.
	failure := fmt.Errorf("TaskManager %s is shutting down", te.cfg.ResourceID)
	for _, t := range te.sortedTasks() {
		te.cancelTask(t, failure)
	}
	te.shutdownTimer = te.after(te.cfg.RPCTimeout, func() {
		te.log.Warn().Dur("timeout", te.cfg.RPCTimeout).Int("tasks", len(te.tasks)).
			Msg("shutdown timed out; stopping without waiting for the remaining tasks and calls")
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
		if jc.connected && jc.pendingReports > 0 {
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
	for _, jc := range te.sortedJobs() {
		pending++
		te.closeJobConnection(jc, fmt.Sprintf("TaskManager %s is shutting down", te.cfg.ResourceID), true, false, done)
	}
	if te.rm != nil && te.rm.registered && te.fatal == nil {
		pending++
		te.disconnectFromResourceManager(done)
	}
	done()
}

// after runs fn on the mailbox after d on the injected clock, unless the
// mailbox stopped first.
func (te *TaskExecutor) after(d time.Duration, fn func()) clock.Timer {
	return te.clk.AfterFunc(d, func() { te.mb.Post(fn) })
}

// newBackoff is the pacing of retries at a peer that answered with a
// final error, drawn from the TaskExecutor's random source.
func (te *TaskExecutor) newBackoff() *backoff.Backoff {
	return backoff.New(te.backoffConfig(), te.rnd.Float64)
}

func (te *TaskExecutor) backoffConfig() backoff.Config {
	return backoff.Config{Initial: te.cfg.RegistrationBackoff, Max: MaxRegistrationBackoff}
}

func (te *TaskExecutor) dialGRPC(addr string) (*grpc.ClientConn, error) { return te.dialGRPCWith(addr) }

func (te *TaskExecutor) dialGRPCWith(addr string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	bo := grpcbackoff.DefaultConfig
	bo.BaseDelay = min(te.cfg.RegistrationBackoff, time.Second)
	bo.MaxDelay = MaxRegistrationBackoff
	return grpc.NewClient(addr, append([]grpc.DialOption{
		grpc.WithTransportCredentials(te.creds),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bo, MinConnectTimeout: te.cfg.RPCTimeout})}, opts...)...)
}

func (te *TaskExecutor) dialJobMaster(addr string) (pb.JobMasterServiceClient, io.Closer, error) {
	if te.cfg.DialJobMaster != nil {
		return te.cfg.DialJobMaster(addr)
	}
	cc, err := te.dialGRPC(addr)
	if err != nil {
		return nil, nil, err
	}
	return pb.NewJobMasterServiceClient(cc), cc, nil
}

func (te *TaskExecutor) dialResourceManager(addr string) (pb.ResourceManagerServiceClient, io.Closer, error) {
	if te.cfg.DialResourceManager != nil {
		return te.cfg.DialResourceManager(addr)
	}
	var opts []grpc.DialOption
	if s := te.cfg.LeaderRetrieval; s != nil {
		addr = ha.ResolverTarget(ha.ResourceManagerComponent)
		opts = append(opts, grpc.WithResolvers(ha.NewResolver(s)))
	}
	cc, err := te.dialGRPCWith(addr, opts...)
	if err != nil {
		return nil, nil, err
	}
	return pb.NewResourceManagerServiceClient(cc), cc, nil
}

func (te *TaskExecutor) location() *pb.TaskManagerLocation {
	return &pb.TaskManagerLocation{ResourceId: te.cfg.ResourceID, RpcAddress: te.addr, Host: te.cfg.Host}
}

// listenData opens a data port for a job's runners on the RPC bind host.
func (te *TaskExecutor) listenData() (*net.TCPListener, string, error) {
	host, _, err := net.SplitHostPort(te.cfg.RPCBindAddress)
	if err != nil {
		host = te.cfg.Host
	}
	lis, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, "", err
	}
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	return lis.(*net.TCPListener), net.JoinHostPort(te.cfg.Host, port), nil
}

func (te *TaskExecutor) nextSeq() uint64 { te.seq++; return te.seq }

func randomHex(rnd *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rnd.Uint32())
	}
	return hex.EncodeToString(b)
}

// nopCloser closes nothing.
type nopCloser struct{}

func (nopCloser) Close() error { return nil }
