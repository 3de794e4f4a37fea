package resourcemanager

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/backoff"
	"github.com/gofl/gofl/internal/clock"
	"github.com/gofl/gofl/internal/heartbeat"
	"github.com/gofl/gofl/internal/mailbox"
	"github.com/gofl/gofl/internal/outbox"
	"github.com/gofl/gofl/metrics"
	"github.com/gofl/gofl/providers"
	"github.com/gofl/gofl/resourcemanager/gateway"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/rpc/restapi"
)

// Sentinel errors.
var (
	// ErrStopped: the ResourceManager is not running (any more).
	ErrStopped = gateway.ErrStopped
	// ErrInvalidArgument: a caller passed an empty ID, a nil gateway or a
	// negative requirement.
	ErrInvalidArgument = gateway.ErrInvalidArgument
	// ErrJobMasterNotRegistered: a requirement was declared for a job whose
	// JobMaster is not registered (or was disconnected).
	ErrJobMasterNotRegistered = gateway.ErrJobMasterNotRegistered
	// ErrTaskManagerLost is the cause given to JobMasters through
	// NotifyTaskManagerLost; it wraps why.
	ErrTaskManagerLost = errors.New("resourcemanager: TaskManager lost")
)

// DefaultRPCTimeout is the per-call timeout of outgoing RPCs when
// Config.RPCTimeout is zero.
const DefaultRPCTimeout = 10 * time.Second

// JobMasterGateway is what the ResourceManager needs from a job's JobMaster
// (implemented by jobmaster); see gateway.JobMasterGateway for the contract.
// It lives in package gateway so jobmaster need not import this package.
type JobMasterGateway = gateway.JobMasterGateway

// DialTaskExecutor connects to a TaskExecutor's RPC address. It must not
// block on the network (gRPC connects lazily); the Closer ends the
// connection when the TaskExecutor is unregistered or the ResourceManager
// stops.
type DialTaskExecutor func(addr string) (pb.TaskExecutorServiceClient, io.Closer, error)

// Config holds the ResourceManager's settings.
type Config struct {
	HeartbeatInterval, HeartbeatTimeout time.Duration // heartbeat.interval / heartbeat.timeout
	SlotRequestTimeout                  time.Duration // slot.request.timeout
	EvenlySpreadOut                     bool          // cluster.evenly-spread-out-slots
	// RPCTimeout bounds each outgoing call, and a RequestSlot with its
	// retries; default 10 s.
	RPCTimeout time.Duration

	// Clock is the source of time and timers; nil: clock.Real.
	Clock clock.Clock
	// Executor, if set, runs the mailbox's turns and outgoing calls (the
	// fault simulator); nil: the ResourceManager's own goroutine.
	Executor mailbox.Executor
	// DialTaskExecutor connects to TaskExecutors; nil: gRPC with insecure
	// credentials.
	DialTaskExecutor DialTaskExecutor
	// Rand draws IDs and jitter; nil: seeded from crypto/rand. Used only on
	// the mailbox.
	Rand *rand.Rand

	// Workers is the provider's worker half. Nil: standalone, the
	// ResourceManager is passive and never starts or stops TaskManagers.
	// With a driver it is active (see ActiveConfig); Run starts the driver
	// and closes it (stopping every worker) when it returns.
	Workers providers.WorkerDriver
	Active  ActiveConfig

	// DelegationTokens, if set, returns the cluster's current HDFS
	// delegation tokens (nil: none), which every TaskExecutor gets in its
	// registration response (Flink's DelegationTokenManager feeding
	// ResourceManager.registerTaskExecutor). Called on the mailbox; must
	// not block. Renewed tokens reach the registered TaskExecutors through
	// UpdateDelegationTokens.
	DelegationTokens func() []*pb.DelegationToken
}

// ActiveConfig holds the settings of an active ResourceManager (one with a
// WorkerDriver). Zero fields take the defaults of their options.
type ActiveConfig struct {
	// Worker is the spec of every TaskManager requested; Worker.Slots is
	// taskmanager.numberOfTaskSlots (default 1).
	Worker providers.WorkerSpec
	// MinSlots: slotmanager.number-of-slots.min (default 0).
	MinSlots int
	// InitialSlots are started at once, before any job declared what it
	// needs, and not kept as a minimum: a per-job cluster knows its job's
	// slots from the JobGraph, so its TaskManagers start while the
	// JobManager still checks the job binary.
	InitialSlots int
	// IdleTimeout: resourcemanager.taskmanager-timeout (default 30 s).
	IdleTimeout time.Duration
	// RegistrationTimeout: resourcemanager.taskmanager-registration.timeout
	// (default 5 min).
	RegistrationTimeout time.Duration
	// MaxFailedStarts: resourcemanager.start-worker.max-attempts (default 5).
	MaxFailedStarts int
	// RetryInterval and MaxRetryInterval: resourcemanager.start-worker.retry-interval
	// and .max-retry-interval (default 1 s and 1 min).
	RetryInterval, MaxRetryInterval time.Duration
}

func (a ActiveConfig) withDefaults() ActiveConfig {
	if a.Worker.Slots < 1 {
		a.Worker.Slots = 1
	}
	if a.IdleTimeout <= 0 {
		a.IdleTimeout = 30 * time.Second
	}
	if a.RegistrationTimeout <= 0 {
		a.RegistrationTimeout = 5 * time.Minute
	}
	if a.MaxFailedStarts <= 0 {
		a.MaxFailedStarts = 5
	}
	if a.RetryInterval <= 0 {
		a.RetryInterval = time.Second
	}
	if a.MaxRetryInterval <= 0 {
		a.MaxRetryInterval = time.Minute
	}
	return a
}

func (c Config) withDefaults() Config {
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 10 * time.Second
	}
	if c.HeartbeatTimeout <= 0 {
		c.HeartbeatTimeout = 50 * time.Second
	}
	if c.SlotRequestTimeout <= 0 {
		c.SlotRequestTimeout = 5 * time.Minute
	}
	if c.RPCTimeout <= 0 {
		c.RPCTimeout = DefaultRPCTimeout
	}
	c.Active = c.Active.withDefaults()
	return c
}

// ResourceManager is the JobManager process's ResourceManager. Its state
// lives on one mailbox goroutine; every exported method is safe from any
// goroutine.
type ResourceManager struct {
	cfg  Config
	log  zerolog.Logger
	id   string
	mb   *mailbox.Mailbox
	svc  *service
	clk  clock.Clock
	dial DialTaskExecutor

	// Owned by the mailbox.
	rnd     *rand.Rand
	sm      *slotManager
	tes     map[string]*taskExecutor // by resource ID
	teOrder []string                 // registration order, for the REST view
	teHB    *heartbeat.Monitor[string]
	jms     map[string]*jobMaster // by job ID
	jmHB    *heartbeat.Monitor[string]
	// told: TaskManagers the JobMasters were told are lost since they last
	// registered; a WorkerTerminated for them tells no one again.
	told    map[string]bool
	hbTimer clock.Timer // the heartbeat interval's timer
	stopped bool        // Run is cleaning up: callbacks do nothing
	wake    clock.Timer // the next hold or planner deadline
	wakeAt  time.Time
	// Active mode only (nil planner: passive).
	planner   *workerPlanner
	releasing map[string]bool // workers with a ReleaseWorker call decided
}

type taskExecutor struct {
	resourceID, instanceID        string
	rpcAddress, dataAddress, host string
	numberOfSlots                 int
	registeredAt, lastHeartbeat   time.Time
	closer                        io.Closer
	client                        pb.TaskExecutorServiceClient
	// out carries every call to the TaskExecutor but heartbeats, in order.
	out          *outbox.Outbox
	heartbeating bool // a heartbeat call is in flight
	// hbFailed: the last heartbeat failed; reports are not asked for
	// again before the next tick, so an unreachable TaskExecutor is not
	// called in a loop until its heartbeat timeout.
	hbFailed bool
	// hardware is what it registered with (nil: nothing); status its Go
	// runtime status from the latest heartbeat.
	hardware *pb.TaskManagerHardware
	status   map[string]float64
}

type jobMaster struct {
	jobID, address string
	gw             JobMasterGateway
	heartbeating   bool
}

// New returns a ResourceManager; it serves once Start or Run ran. Zero
// durations take Flink's defaults (heartbeat 10 s / 50 s, slot request
// 5 min, RPC 10 s).
func New(cfg Config, log zerolog.Logger) *ResourceManager {
	cfg = cfg.withDefaults()
	rnd := cfg.Rand
	if rnd == nil {
		var seed [16]byte
		_, _ = crand.Read(seed[:])
		rnd = rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:])))
	}
	id := newID(rnd)
	rm := &ResourceManager{
		cfg:  cfg,
		log:  log.With().Str("resource_manager_id", id).Logger(),
		id:   id,
		clk:  clock.Or(cfg.Clock),
		dial: cfg.DialTaskExecutor,
		rnd:  rnd,
		tes:  map[string]*taskExecutor{},
		told: map[string]bool{},
		teHB: heartbeat.New[string](cfg.HeartbeatTimeout),
		jms:  map[string]*jobMaster{},
		jmHB: heartbeat.New[string](cfg.HeartbeatTimeout),
	}
	if cfg.Executor != nil {
		rm.mb = mailbox.NewWithExecutor(cfg.Executor)
	} else {
		rm.mb = mailbox.New()
	}
	if rm.dial == nil {
		rm.dial = dialGRPC
	}
	rm.sm = newSlotManager(slotManagerConfig{
		EvenlySpreadOut: cfg.EvenlySpreadOut,
		NewID:           func() string { return newID(rm.rnd) },
		RejectWindow:    2 * cfg.HeartbeatInterval,
		RejectBackoff:   rejectBackoff(cfg.HeartbeatInterval),
		Rand:            rnd.Float64,
	})
	if cfg.Workers != nil {
		rm.planner = newWorkerPlanner(workerPlannerConfig{
			SlotsPerWorker:      cfg.Active.Worker.Slots,
			MinSlots:            cfg.Active.MinSlots,
			InitialSlots:        cfg.Active.InitialSlots,
			IdleTimeout:         cfg.Active.IdleTimeout,
			RegistrationTimeout: cfg.Active.RegistrationTimeout,
			MaxFailedStarts:     cfg.Active.MaxFailedStarts,
			RetryInterval:       cfg.Active.RetryInterval,
			MaxRetryInterval:    cfg.Active.MaxRetryInterval,
			Rand:                rnd.Float64,
		})
		rm.releasing = map[string]bool{}
	}
	rm.svc = &service{rm: rm}
	return rm
}

// rejectBackoff is the pause in requesting slots for a job that refused the
// slots just allocated to it (see slotManagerConfig.RejectWindow). The
// first pause is short: the usual cause is a JobMaster that has not yet
// dropped a lost TaskManager (NotifyTaskManagerLost is on its way through
// its mailbox), which takes a turn or two. It doubles per rejection in a row
// and is capped at the heartbeat interval: a job that does need the slots
// then waits at most one interval longer, the latency at which the RM
// learns slot state anyway, while a JobMaster that keeps refusing costs one
// offer per interval instead of one per round trip.
func rejectBackoff(heartbeatInterval time.Duration) backoff.Config {
	return backoff.Config{Initial: min(100*time.Millisecond, heartbeatInterval), Max: heartbeatInterval, Multiplier: 2, Jitter: 0.2}
}

// newID is 32 hex digits, like Flink's IDs.
func newID(r *rand.Rand) string {
	return fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64())
}

func dialGRPC(addr string) (pb.TaskExecutorServiceClient, io.Closer, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	return pb.NewTaskExecutorServiceClient(conn), conn, nil
}

// ID is this instance's resource_manager_id; TaskExecutors see it in
// registration responses, heartbeats and RequestSlot calls.
func (rm *ResourceManager) ID() string { return rm.id }

// Service is the gRPC ResourceManagerService to register on the
// JobManager's gRPC server.
func (rm *ResourceManager) Service() pb.ResourceManagerServiceServer { return rm.svc }

// Start starts serving without blocking: it starts the provider's worker
// driver (active mode) and posts the first turn, which arms the heartbeat
// timer and, in active mode, starts the minimum number of workers. Call
// Start once, or Run, which calls it. With a Config.Executor the caller
// then drives the turns; otherwise Run runs them.
func (rm *ResourceManager) Start() {
	rm.log.Info().Dur("heartbeat_interval", rm.cfg.HeartbeatInterval).Dur("heartbeat_timeout", rm.cfg.HeartbeatTimeout).
		Dur("slot_request_timeout", rm.cfg.SlotRequestTimeout).Bool("evenly_spread_out", rm.cfg.EvenlySpreadOut).
		Bool("active", rm.planner != nil).Msg("ResourceManager started")
	if rm.planner != nil {
		if err := rm.cfg.Workers.Start(rm.onWorkerEvent); err != nil {
			rm.log.Error().Err(err).Msg("the provider's worker driver did not start; no TaskManagers will be started")
		}
	}
	rm.mb.Post(func() {
		rm.hbTimer = rm.clk.AfterFunc(rm.cfg.HeartbeatInterval, func() { rm.mb.Post(rm.heartbeatTick) })
		if rm.planner != nil {
			// Reach the minimum number of slots without waiting for a job.
			rm.reconcile()
		}
	})
}

// Run is Start, then serves until ctx ends. It blocks; call it once. When
// it returns, every goroutine it started has ended (with a Config.Executor:
// the calls handed to it are cancelled), every connection to a
// TaskExecutor is closed and, in active mode, the driver is closed
// (stopping every worker); later calls fail with ErrStopped.
func (rm *ResourceManager) Run(ctx context.Context) {
	rm.Start()
	rm.mb.Run(ctx)
	// The mailbox stopped: its state is ours alone now.
	rm.stopped = true
	if rm.hbTimer != nil {
		rm.hbTimer.Stop()
	}
	if rm.wake != nil {
		rm.wake.Stop()
	}
	for _, id := range rm.teOrder {
		te := rm.tes[id]
		te.out.Close(ErrStopped)
		if err := te.closer.Close(); err != nil {
			rm.log.Debug().Err(err).Str("resource_id", id).Msg("closing the connection to a TaskExecutor")
		}
	}
	if rm.planner != nil {
		closeCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := rm.cfg.Workers.Close(closeCtx); err != nil {
			rm.log.Warn().Err(err).Msg("stopping the workers")
		}
		cancel()
	}
	rm.log.Info().Msg("ResourceManager stopped")
}

// call runs fn on the mailbox and maps a stopped mailbox to ErrStopped.
func call[T any](ctx context.Context, rm *ResourceManager, fn func() (T, error)) (T, error) {
	v, err := mailbox.Call(ctx, rm.mb, fn)
	if errors.Is(err, mailbox.ErrClosed) {
		err = fmt.Errorf("%w: %w", ErrStopped, err)
	}
	return v, err
}

// RegisterJobMaster connects a job's JobMaster: the ResourceManager starts
// heartbeating it and accepts its requirements. Called by the JobMaster.
// Blocks until recorded or ctx ends. Idempotent; a new gateway or address
// for the same job replaces the old one and keeps the declared requirement.
func (rm *ResourceManager) RegisterJobMaster(ctx context.Context, jobID, jobMasterAddress string, gw JobMasterGateway) error {
	if jobID == "" || gw == nil {
		return fmt.Errorf("%w: RegisterJobMaster needs a job ID and a gateway", ErrInvalidArgument)
	}
	_, err := call(ctx, rm, func() (struct{}, error) {
		jm, ok := rm.jms[jobID]
		switch {
		case !ok:
			rm.jms[jobID] = &jobMaster{jobID: jobID, address: jobMasterAddress, gw: gw}
			rm.log.Info().Str("job_id", jobID).Str("address", jobMasterAddress).Msg("JobMaster registered")
		case jm.gw != gw || jm.address != jobMasterAddress:
			jm.gw, jm.address = gw, jobMasterAddress
			rm.log.Info().Str("job_id", jobID).Str("address", jobMasterAddress).Msg("JobMaster re-registered")
		}
		rm.jmHB.Seen(jobID, rm.clk.Now())
		return struct{}{}, nil
	})
	return err
}

// DeclareResourceRequirements sets how many slots the job needs in total.
// Called by the JobMaster whenever its requirement changes. Blocks until
// recorded or ctx ends. Idempotent, except that any declaration ends a
// pause in requesting slots for the job after it refused some. Fails with
// ErrJobMasterNotRegistered if the job's JobMaster is not registered.
// Lowering the requirement never reclaims slots: the JobMaster frees them
// through the TaskExecutors.
func (rm *ResourceManager) DeclareResourceRequirements(ctx context.Context, jobID string, slots int) error {
	if jobID == "" || slots < 0 {
		return fmt.Errorf("%w: job %q declared %d slots", ErrInvalidArgument, jobID, slots)
	}
	_, err := call(ctx, rm, func() (struct{}, error) {
		if _, ok := rm.jms[jobID]; !ok {
			return struct{}{}, fmt.Errorf("%w: job %s", ErrJobMasterNotRegistered, jobID)
		}
		if old := rm.sm.requirement(jobID); old != slots {
			rm.log.Info().Str("job_id", jobID).Int("slots", slots).Int("previous", old).Msg("resource requirements declared")
		}
		rm.sm.setRequirement(jobID, slots)
		rm.reconcile()
		return struct{}{}, nil
	})
	return err
}

// DisconnectJobMaster drops the job's requirement and stops heartbeating its
// JobMaster. Called by the JobMaster when the job ends or it loses
// leadership. Blocks until recorded or ctx ends. Idempotent. Slots stay
// allocated until their TaskExecutors report them free.
func (rm *ResourceManager) DisconnectJobMaster(ctx context.Context, jobID string, cause error) error {
	_, err := call(ctx, rm, func() (struct{}, error) {
		rm.disconnectJobMaster(jobID, cause)
		return struct{}{}, nil
	})
	return err
}

func (rm *ResourceManager) disconnectJobMaster(jobID string, cause error) {
	if _, ok := rm.jms[jobID]; !ok {
		return
	}
	delete(rm.jms, jobID)
	rm.jmHB.Remove(jobID)
	rm.sm.removeJob(jobID)
	ev := rm.log.Info()
	if cause != nil {
		ev = ev.AnErr("cause", cause)
	}
	ev.Str("job_id", jobID).Msg("JobMaster disconnected; its resource requirements are dropped")
	rm.reconcile()
}

// TaskManagers lists the registered TaskManagers in registration order,
// for GET /taskmanagers. Blocks until answered or ctx ends.
func (rm *ResourceManager) TaskManagers(ctx context.Context) ([]restapi.TaskManagerInfo, error) {
	return call(ctx, rm, func() ([]restapi.TaskManagerInfo, error) {
		out := make([]restapi.TaskManagerInfo, 0, len(rm.teOrder))
		for _, id := range rm.teOrder {
			out = append(out, rm.info(rm.tes[id]))
		}
		return out, nil
	})
}

// TaskManager describes one TaskManager, for GET /taskmanagers/{id}; an
// unknown ID fails with an error wrapping restapi.ErrTaskManagerNotFound.
// Blocks until answered or ctx ends.
func (rm *ResourceManager) TaskManager(ctx context.Context, id string) (restapi.TaskManagerInfo, error) {
	return call(ctx, rm, func() (restapi.TaskManagerInfo, error) {
		te, ok := rm.tes[id]
		if !ok {
			return restapi.TaskManagerInfo{}, fmt.Errorf("%w: %s", restapi.ErrTaskManagerNotFound, id)
		}
		return rm.info(te), nil
	})
}

// Overview counts TaskManagers and slots, for GET /overview. Blocks until
// answered or ctx ends.
func (rm *ResourceManager) Overview(ctx context.Context) (taskManagers, slotsTotal, slotsFree int, err error) {
	type counts struct{ tms, total, free int }
	c, err := call(ctx, rm, func() (counts, error) {
		var c counts
		for _, te := range rm.tes {
			i := rm.info(te)
			c.tms++
			c.total += i.SlotsNumber
			c.free += i.FreeSlots
		}
		return c, nil
	})
	return c.tms, c.total, c.free, err
}

func (rm *ResourceManager) info(te *taskExecutor) restapi.TaskManagerInfo {
	total, free, reported := rm.sm.slotsOf(te.resourceID)
	if !reported {
		total = te.numberOfSlots
	}
	info := restapi.TaskManagerInfo{
		ID:                     te.resourceID,
		Path:                   te.rpcAddress,
		DataPort:               dataPort(te.dataAddress),
		TimeSinceLastHeartbeat: te.lastHeartbeat.UnixMilli(),
		SlotsNumber:            total,
		FreeSlots:              free,
		StatusMetrics:          metrics.FlinkStatus(te.status),
	}
	if h := te.hardware; h != nil {
		info.Hardware = &restapi.HardwareDescription{CPUCores: int(h.CpuCores), PhysicalMemory: h.PhysicalMemory,
			FreeMemory: h.FreeMemory, ManagedMemory: h.ManagedMemory}
		info.MemoryConfiguration = &restapi.MemoryConfiguration{TotalProcessMemory: h.MemoryLimit, ManagedMemory: h.ManagedMemory}
	}
	return info
}

func dataPort(addr string) int {
	if addr == "" {
		return 0
	}
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return 0
	}
	return n
}

// registerTaskExecutor runs on the mailbox. It returns a gRPC status error.
func (rm *ResourceManager) registerTaskExecutor(req *pb.RegisterTaskExecutorRequest) (*pb.RegisterTaskExecutorResponse, error) {
	now := rm.clk.Now()
	loc := req.GetLocation()
	// Registrations not heard from within the timeout are gone: replace them.
	rm.expireTaskExecutors(now)
	if te, ok := rm.tes[loc.GetResourceId()]; ok && te.instanceID != req.GetInstanceId() && te.rpcAddress == loc.GetRpcAddress() {
		// A new process on the old one's address: the old one is gone (it
		// cannot hold the port any more), though the new one may have been
		// answering the old registration's heartbeats. Replace it.
		rm.removeTaskExecutor(te.resourceID, fmt.Sprintf("restarted as instance %s", req.GetInstanceId()), true)
	}
	if te, ok := rm.tes[loc.GetResourceId()]; ok {
		if te.instanceID != req.GetInstanceId() {
			return nil, status.Errorf(codes.AlreadyExists, "resource ID %s is already registered by a live TaskManager at %s (instance %s); registration of instance %s from %s rejected",
				te.resourceID, te.rpcAddress, te.instanceID, req.GetInstanceId(), loc.GetRpcAddress())
		}
		// The same process again (a retry): idempotent.
		rm.teHB.Seen(te.resourceID, now)
		te.lastHeartbeat = now
		return rm.registrationResponse(), nil
	}
	client, closer, err := rm.dial(loc.GetRpcAddress())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "rpc_address %q: %v", loc.GetRpcAddress(), err)
	}
	te := &taskExecutor{
		resourceID:    loc.GetResourceId(),
		instanceID:    req.GetInstanceId(),
		rpcAddress:    loc.GetRpcAddress(),
		dataAddress:   loc.GetDataAddress(),
		host:          loc.GetHost(),
		numberOfSlots: int(req.GetNumberOfSlots()),
		registeredAt:  now,
		lastHeartbeat: now,
		closer:        closer,
		client:        client,
		hardware:      req.GetHardware(),
	}
	te.out = outbox.New("TaskExecutor "+te.resourceID, rm.mb, outbox.Config{
		CallTimeout: rm.cfg.RPCTimeout,
		Deadline:    rm.cfg.RPCTimeout,
		Backoff:     backoff.Config{Initial: 50 * time.Millisecond, Max: time.Second},
		Retryable:   retryableToTaskExecutor,
		Clock:       rm.clk,
		Rand:        rm.rnd.Float64,
	}, rm.log.With().Str("resource_id", te.resourceID).Str("instance_id", te.instanceID).Logger())
	rm.tes[te.resourceID] = te
	delete(rm.told, te.resourceID)
	rm.teOrder = append(rm.teOrder, te.resourceID)
	rm.teHB.Seen(te.resourceID, now)
	rm.sm.addTaskManager(te.resourceID)
	rm.log.Info().Str("resource_id", te.resourceID).Str("instance_id", te.instanceID).Str("address", te.rpcAddress).
		Int("slots", te.numberOfSlots).Msg("TaskExecutor registered")
	return rm.registrationResponse(), nil
}

func (rm *ResourceManager) registrationResponse() *pb.RegisterTaskExecutorResponse {
	resp := &pb.RegisterTaskExecutorResponse{
		ResourceManagerId:   rm.id,
		HeartbeatIntervalMs: rm.cfg.HeartbeatInterval.Milliseconds(),
		HeartbeatTimeoutMs:  rm.cfg.HeartbeatTimeout.Milliseconds(),
	}
	if rm.cfg.DelegationTokens != nil {
		resp.DelegationTokens = rm.cfg.DelegationTokens()
	}
	return resp
}

// UpdateDelegationTokens sends renewed or replaced HDFS delegation tokens
// to every registered TaskExecutor (Flink's
// ResourceManager.onNewTokensObtained), fenced by this ResourceManager's
// ID; TaskExecutors registering later get Config.DelegationTokens.
// Non-blocking: the calls go through each TaskExecutor's outbox, and a
// failure is logged. A stopped ResourceManager drops them.
func (rm *ResourceManager) UpdateDelegationTokens(tokens []*pb.DelegationToken) {
	rm.mb.Post(func() {
		if rm.stopped {
			return
		}
		req := &pb.UpdateDelegationTokensRequest{ResourceManagerId: rm.id, Tokens: tokens}
		for _, id := range rm.teOrder {
			te := rm.tes[id]
			if te == nil {
				continue
			}
			client := te.client
			te.out.Send(outbox.Message{
				What: "UpdateDelegationTokens",
				Call: func(ctx context.Context) error {
					_, err := client.UpdateDelegationTokens(ctx, req)
					return err
				},
				Done: func(err error) {
					if err != nil && !rm.stopped {
						rm.log.Warn().Err(err).Str("resource_id", id).Msg("sending the renewed HDFS delegation tokens to a TaskExecutor failed")
					}
				},
			})
		}
		rm.log.Info().Int("tokens", len(tokens)).Int("task_executors", len(rm.tes)).Msg("sending the renewed HDFS delegation tokens to the TaskExecutors")
	})
}

// retryableToTaskExecutor tells the transient failures of a call to a
// TaskExecutor (retried by its outbox) from answers: RESOURCE_EXHAUSTED
// from RequestSlot means the slot is taken, which retrying will not change.
func retryableToTaskExecutor(err error) bool {
	return status.Code(err) != codes.ResourceExhausted && outbox.Retryable(err)
}

// sendSlotReport runs on the mailbox. It returns a gRPC status error.
func (rm *ResourceManager) sendSlotReport(req *pb.SendSlotReportRequest) error {
	te, ok := rm.tes[req.GetResourceId()]
	if !ok {
		return status.Errorf(codes.NotFound, "TaskExecutor %s is not registered", req.GetResourceId())
	}
	if te.instanceID != req.GetInstanceId() {
		return status.Errorf(codes.NotFound, "TaskExecutor %s is registered with instance %s, not %s", te.resourceID, te.instanceID, req.GetInstanceId())
	}
	out, _ := rm.sm.applyPushedReport(te.resourceID, fromReport(req.GetSlotReport()), te.heartbeating, rm.clk.Now())
	rm.logReport(te, "slot report", out)
	rm.reconcile()
	return nil
}

// logReport logs what a slot report changed in the RM's view.
func (rm *ResourceManager) logReport(te *taskExecutor, source string, out reportOutcome) {
	for _, a := range out.Adopted {
		rm.log.Info().Str("resource_id", te.resourceID).Int32("slot_index", a.Index).Str("allocation_id", a.AllocationID).
			Str("job_id", a.JobID).Str("source", source).Msg("TaskExecutor holds an allocation the ResourceManager did not know; adopted")
	}
	for _, f := range out.Freed {
		rm.log.Debug().Str("resource_id", te.resourceID).Int32("slot_index", f.Index).Str("allocation_id", f.AllocationID).
			Str("job_id", f.JobID).Str("source", source).Msg("slot freed on the TaskExecutor")
	}
	for _, r := range out.Rejected {
		rm.log.Info().Str("job_id", r.JobID).Str("resource_id", te.resourceID).Int32("slot_index", r.Index).
			Str("allocation_id", r.AllocationID).Dur("hold", r.Hold).Int("rejections_in_a_row", r.InARow).
			Msg("the job refused a slot just allocated to it; pausing slot requests for it until it declares again or the pause ends")
	}
}

func fromReport(r *pb.SlotReport) []reportedSlot {
	out := make([]reportedSlot, 0, len(r.GetSlots()))
	for _, s := range r.GetSlots() {
		out = append(out, reportedSlot{Index: s.GetSlotIndex(), AllocationID: s.GetAllocationId(), JobID: s.GetJobId()})
	}
	return out
}

// removeTaskExecutor unregisters a TaskExecutor at once, forgets its slots
// and, in active mode, releases its worker if it still runs. confirmed
// says the TaskManager is known to be gone (it said so, or a new instance
// took its place), not merely silent. Runs on the mailbox; a no-op for an
// unknown one.
func (rm *ResourceManager) removeTaskExecutor(resourceID, why string, confirmed bool) {
	if rm.dropTaskExecutor(resourceID, why, confirmed) {
		rm.releaseWorker(resourceID, why)
		rm.reconcile()
	}
}

// dropTaskExecutor is removeTaskExecutor without releasing the worker or
// reconciling; it reports whether the TaskExecutor was registered. If the
// loss is confirmed every JobMaster is told. A TaskManager that only went
// silent is not: the JobMasters judge its liveness by their own heartbeats,
// which a TaskManager that is merely cut off from the JobManager answers
// the same way, and it stops its tasks (heartbeat-timeout fencing) before
// a JobMaster gives up on it and runs them elsewhere.
func (rm *ResourceManager) dropTaskExecutor(resourceID, why string, confirmed bool) bool {
	te, ok := rm.tes[resourceID]
	if !ok {
		return false
	}
	delete(rm.tes, resourceID)
	for i, id := range rm.teOrder {
		if id == resourceID {
			rm.teOrder = append(rm.teOrder[:i:i], rm.teOrder[i+1:]...)
			break
		}
	}
	rm.teHB.Remove(resourceID)
	// Forget its calls in flight first: their Done then finds nothing.
	rm.sm.removeTaskManager(resourceID)
	cause := fmt.Errorf("%w: %s: %s", ErrTaskManagerLost, resourceID, why)
	te.out.Close(cause)
	if err := te.closer.Close(); err != nil {
		rm.log.Debug().Err(err).Str("resource_id", resourceID).Msg("closing the connection to a TaskExecutor")
	}
	rm.log.Warn().Str("resource_id", resourceID).Str("instance_id", te.instanceID).Str("address", te.rpcAddress).
		Str("reason", why).Msg("TaskExecutor unregistered; its slots are removed")
	if confirmed {
		rm.notifyTaskManagerLost(resourceID, cause)
	}
	return true
}

// notifyTaskManagerLost tells every registered JobMaster, in job ID order,
// that the TaskManager is gone, so they drop it now rather than at their
// heartbeat timeout. JobMasters ignore TaskManagers they do not know.
func (rm *ResourceManager) notifyTaskManagerLost(resourceID string, cause error) {
	rm.told[resourceID] = true
	for _, id := range slices.Sorted(maps.Keys(rm.jms)) {
		rm.jms[id].gw.NotifyTaskManagerLost(resourceID, cause)
	}
}

func (rm *ResourceManager) expireTaskExecutors(now time.Time) {
	expired := rm.teHB.Expired(now)
	slices.Sort(expired) // deterministic, for the simulator
	for _, id := range expired {
		rm.removeTaskExecutor(id, fmt.Sprintf("heartbeat timeout: no heartbeat response within %s", rm.cfg.HeartbeatTimeout), false)
	}
}

// reconcile matches free slots to requirements and sends the resulting
// RequestSlot calls, asks TaskExecutors whose reports disagreed with the
// RM's recent changes for a fresh one, notifies jobs that cannot be
// satisfied and, in active mode, plans workers. Runs on the mailbox after
// every change.
func (rm *ResourceManager) reconcile() {
	now := rm.clk.Now()
	for _, r := range rm.sm.allocate(now) {
		rm.requestSlot(r)
	}
	for _, id := range rm.sm.wantReports() {
		if te := rm.tes[id]; te != nil && !te.hbFailed {
			rm.heartbeatTaskExecutor(te)
		}
	}
	for _, n := range rm.sm.notices(now, rm.cfg.SlotRequestTimeout) {
		jm, ok := rm.jms[n.JobID]
		if !ok {
			continue
		}
		if !n.TimedOut && rm.planner != nil {
			// Active: workers are started for it; only a timeout or
			// failing starts are worth a notice.
			continue
		}
		if n.TimedOut {
			rm.log.Warn().Str("job_id", n.JobID).Int("required_slots", n.Required).Int("acquired_slots", n.Acquired).
				Int("available_slots", n.Available).Dur("slot_request_timeout", rm.cfg.SlotRequestTimeout).
				Msgf("job %s has been short of slots for %s: it requires %d slots, holds %d, and %d are available to it",
					n.JobID, rm.cfg.SlotRequestTimeout, n.Required, n.Acquired, n.Available)
		} else {
			rm.log.Info().Str("job_id", n.JobID).Int("required_slots", n.Required).Int("acquired_slots", n.Acquired).
				Int("available_slots", n.Available).Msg("not enough resources for job")
		}
		jm.gw.NotifyNotEnoughResources(n.Acquired)
	}
	wake := rm.sm.nextWake(now)
	if rm.planner != nil {
		if t := rm.planWorkers(now); !t.IsZero() && (wake.IsZero() || t.Before(wake)) {
			wake = t
		}
	}
	rm.setWake(wake)
}

// setWake arranges a reconcile at t (zero: none), replacing the previous
// wake-up.
func (rm *ResourceManager) setWake(t time.Time) {
	if t.Equal(rm.wakeAt) {
		return
	}
	if rm.wake != nil {
		rm.wake.Stop()
		rm.wake = nil
	}
	rm.wakeAt = t
	if t.IsZero() {
		return
	}
	rm.wake = rm.clk.AfterFunc(t.Sub(rm.clk.Now()), func() {
		rm.mb.Post(func() {
			if !rm.wakeAt.Equal(t) {
				return // replaced meanwhile
			}
			rm.wakeAt = time.Time{}
			rm.reconcile()
		})
	})
}

// requestSlot sends a RequestSlot through the TaskExecutor's outbox, which
// retries transient failures until the RPC timeout; the outcome goes to the
// slot manager either way.
func (rm *ResourceManager) requestSlot(r slotRequest) {
	te := rm.tes[r.ResourceID]
	address := ""
	if jm, ok := rm.jms[r.JobID]; ok {
		address = jm.address
	}
	req := &pb.RequestSlotRequest{
		AllocationId:      r.AllocationID,
		SlotIndex:         r.SlotIndex,
		JobId:             r.JobID,
		JobMasterAddress:  address,
		ResourceManagerId: rm.id,
	}
	client := te.client
	log := rm.log.With().Str("job_id", r.JobID).Str("resource_id", r.ResourceID).Int32("slot_index", r.SlotIndex).
		Str("allocation_id", r.AllocationID).Logger()
	log.Debug().Msg("requesting slot")
	te.out.Send(outbox.Message{
		What: fmt.Sprintf("RequestSlot %s (slot %d for job %s)", r.AllocationID, r.SlotIndex, r.JobID),
		Call: func(ctx context.Context) error {
			_, err := client.RequestSlot(ctx, req)
			return err
		},
		Done: func(err error) {
			if rm.stopped {
				return
			}
			if rm.tes[r.ResourceID] != te {
				log.Debug().Err(err).Msg("RequestSlot ended after its TaskExecutor was unregistered; ignored")
				return
			}
			if !rm.sm.requestDone(r.AllocationID, err == nil, rm.clk.Now()) {
				log.Warn().Err(err).Msg("RequestSlot ended for a slot the slot manager no longer tracks as pending; ignored")
				return
			}
			if err != nil {
				log.Warn().Err(err).Msg("RequestSlot failed; the slot is free again and will be retried after the next heartbeat tick")
			} else {
				log.Info().Msg("slot allocated")
			}
			rm.reconcile()
		},
	})
}

// heartbeatTick runs every heartbeat interval on the mailbox.
func (rm *ResourceManager) heartbeatTick() {
	rm.hbTimer.Reset(rm.cfg.HeartbeatInterval)
	now := rm.clk.Now()
	rm.expireTaskExecutors(now)
	expired := rm.jmHB.Expired(now)
	slices.Sort(expired)
	for _, id := range expired {
		rm.disconnectJobMaster(id, fmt.Errorf("heartbeat timeout: the JobMaster did not answer within %s", rm.cfg.HeartbeatTimeout))
	}
	for _, id := range rm.teOrder {
		te := rm.tes[id]
		te.hbFailed = false
		rm.heartbeatTaskExecutor(te)
	}
	for _, id := range slices.Sorted(maps.Keys(rm.jms)) {
		rm.heartbeatJobMaster(rm.jms[id])
	}
	rm.sm.endBackoff()
	rm.reconcile()
}

// heartbeatTimeout bounds one heartbeat call: at most an interval, so a
// lost request or answer costs one heartbeat, not the whole timeout (only
// one heartbeat per peer is in flight).
func (rm *ResourceManager) heartbeatTimeout() time.Duration {
	return min(rm.cfg.RPCTimeout, rm.cfg.HeartbeatInterval)
}

// heartbeatTaskExecutor sends a heartbeat unless one is in flight; its
// answer carries a slot report requested now. Heartbeats bypass the
// outbox: at most one in flight, never retried (the next interval is the
// retry).
func (rm *ResourceManager) heartbeatTaskExecutor(te *taskExecutor) {
	if te.heartbeating {
		return
	}
	te.heartbeating = true
	asOf := rm.sm.Version()
	client, timeout := te.client, rm.heartbeatTimeout()
	req := &pb.HeartbeatRequest{SenderId: rm.id}
	mailbox.Go(rm.mb, func(ctx context.Context) (*pb.TaskManagerHeartbeatResponse, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return client.HeartbeatFromResourceManager(ctx, req)
	}, func(resp *pb.TaskManagerHeartbeatResponse, err error) {
		te.heartbeating = false
		if rm.tes[te.resourceID] != te {
			rm.log.Debug().Err(err).Str("resource_id", te.resourceID).Str("instance_id", te.instanceID).
				Msg("heartbeat answer from a TaskExecutor unregistered meanwhile; ignored")
			return
		}
		if err != nil {
			te.hbFailed = true
			rm.log.Debug().Err(err).Str("resource_id", te.resourceID).Msg("heartbeat to TaskExecutor failed")
			return
		}
		te.hbFailed = false
		now := rm.clk.Now()
		te.lastHeartbeat = now
		if st := resp.GetStatusMetrics(); st != nil {
			te.status = st
		}
		rm.teHB.Seen(te.resourceID, now)
		if resp.GetSlotReport() == nil {
			rm.log.Warn().Str("resource_id", te.resourceID).Msg("heartbeat answer without a slot report")
			return
		}
		out, _ := rm.sm.applySlotReport(te.resourceID, fromReport(resp.GetSlotReport()), asOf, now)
		rm.logReport(te, "heartbeat", out)
		rm.reconcile()
	})
}

// heartbeatJobMaster calls the JobMaster's gateway off the mailbox, at most
// one call in flight per JobMaster.
func (rm *ResourceManager) heartbeatJobMaster(jm *jobMaster) {
	if jm.heartbeating {
		return
	}
	jm.heartbeating = true
	gw, timeout := jm.gw, rm.heartbeatTimeout()
	mailbox.Go(rm.mb, func(ctx context.Context) (struct{}, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return struct{}{}, gw.HeartbeatFromResourceManager(ctx)
	}, func(_ struct{}, err error) {
		jm.heartbeating = false
		if rm.jms[jm.jobID] != jm || jm.gw != gw {
			rm.log.Debug().Err(err).Str("job_id", jm.jobID).Msg("heartbeat answer from a JobMaster disconnected or replaced meanwhile; ignored")
			return
		}
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				// Not answering: the heartbeat timeout decides.
				rm.log.Debug().Err(err).Str("job_id", jm.jobID).Msg("heartbeat to JobMaster unanswered")
				return
			}
			// The gateway's contract: an error means the JobMaster is gone.
			rm.disconnectJobMaster(jm.jobID, fmt.Errorf("heartbeat failed: %w", err))
			return
		}
		rm.jmHB.Seen(jm.jobID, rm.clk.Now())
	})
}
