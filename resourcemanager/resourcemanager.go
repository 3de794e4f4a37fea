package resourcemanager

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/heartbeat"
	"github.com/gofl/gofl/internal/mailbox"
	"github.com/gofl/gofl/providers"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/rpc/restapi"
)

// Sentinel errors.
var (
	// ErrStopped: the ResourceManager is not running (any more).
	ErrStopped = errors.New("resourcemanager: stopped")
	// ErrInvalidArgument: a caller passed an empty ID, a nil gateway or a
	// negative requirement.
	ErrInvalidArgument = errors.New("resourcemanager: invalid argument")
	// ErrJobMasterNotRegistered: a requirement was declared for a job whose
	// JobMaster is not registered (or was disconnected).
	ErrJobMasterNotRegistered = errors.New("resourcemanager: job master not registered")
)

// DefaultRPCTimeout is the per-call timeout of outgoing RPCs when
// Config.RPCTimeout is zero.
const DefaultRPCTimeout = 10 * time.Second

// JobMasterGateway is what the ResourceManager needs from a job's JobMaster
// (implemented by jobmaster).
type JobMasterGateway interface {
	// NotifyNotEnoughResources: the cluster cannot provide the declared
	// requirement; acquired is how many slots the job holds (allocated, or
	// with a RequestSlot in flight). Called on the ResourceManager's mailbox:
	// it must not block. May be called repeatedly.
	NotifyNotEnoughResources(acquired int)
	// HeartbeatFromResourceManager blocks until the JobMaster answered or
	// ctx ends; an error means it is gone. Called every heartbeat interval
	// from a goroutine the ResourceManager owns, never concurrently with
	// itself for the same JobMaster.
	HeartbeatFromResourceManager(ctx context.Context) error
	// NotifyTaskManagerLost: the TaskManager's worker ended (the provider
	// said so) or it was unregistered; the JobMaster drops it at once
	// instead of waiting for its heartbeat timeout. Called on the
	// ResourceManager's mailbox for every registered JobMaster: it must
	// not block. Idempotent; an unknown resourceID is ignored.
	NotifyTaskManagerLost(resourceID string, cause error)
}

// Config holds the ResourceManager's settings.
type Config struct {
	HeartbeatInterval, HeartbeatTimeout time.Duration // heartbeat.interval / heartbeat.timeout
	SlotRequestTimeout                  time.Duration // slot.request.timeout
	EvenlySpreadOut                     bool          // cluster.evenly-spread-out-slots
	RPCTimeout                          time.Duration // per outgoing call; default 10 s

	// Workers is the provider's worker half. Nil: standalone, the
	// ResourceManager is passive and never starts or stops TaskManagers.
	// With a driver it is active (see ActiveConfig); Run starts the driver
	// and closes it (stopping every worker) when it returns.
	Workers providers.WorkerDriver
	Active  ActiveConfig
}

// ActiveConfig holds the settings of an active ResourceManager (one with a
// WorkerDriver). Zero fields take the defaults of their options.
type ActiveConfig struct {
	// Worker is the spec of every TaskManager requested; Worker.Slots is
	// taskmanager.numberOfTaskSlots (default 1).
	Worker providers.WorkerSpec
	// MinSlots: slotmanager.number-of-slots.min (default 0).
	MinSlots int
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
	cfg Config
	log zerolog.Logger
	id  string
	mb  *mailbox.Mailbox
	svc *service

	// Owned by the mailbox.
	sm      *slotManager
	tes     map[string]*taskExecutor // by resource ID
	teOrder []string                 // registration order, for the REST view
	teHB    *heartbeat.Monitor[string]
	jms     map[string]*jobMaster // by job ID
	jmHB    *heartbeat.Monitor[string]
	// Active mode only (nil planner: passive).
	planner   *workerPlanner
	wake      *time.Timer
	wakeAt    time.Time
	releasing map[string]bool // workers with a ReleaseWorker call decided
}

type taskExecutor struct {
	resourceID, instanceID        string
	rpcAddress, dataAddress, host string
	numberOfSlots                 int
	registeredAt, lastHeartbeat   time.Time
	conn                          *grpc.ClientConn
	client                        pb.TaskExecutorServiceClient
	heartbeating                  bool // a heartbeat call is in flight
}

type jobMaster struct {
	jobID, address string
	gw             JobMasterGateway
	heartbeating   bool
}

// New returns a ResourceManager; it serves once Run runs. Zero durations
// take Flink's defaults (heartbeat 10 s / 50 s, slot request 5 min, RPC 10 s).
func New(cfg Config, log zerolog.Logger) *ResourceManager {
	cfg = cfg.withDefaults()
	id := randomID()
	rm := &ResourceManager{
		cfg:  cfg,
		log:  log.With().Str("resource_manager_id", id).Logger(),
		id:   id,
		mb:   mailbox.New(),
		sm:   newSlotManager(cfg.EvenlySpreadOut, randomID),
		tes:  map[string]*taskExecutor{},
		teHB: heartbeat.New[string](cfg.HeartbeatTimeout),
		jms:  map[string]*jobMaster{},
		jmHB: heartbeat.New[string](cfg.HeartbeatTimeout),
	}
	if cfg.Workers != nil {
		rm.planner = newWorkerPlanner(workerPlannerConfig{
			SlotsPerWorker:      cfg.Active.Worker.Slots,
			MinSlots:            cfg.Active.MinSlots,
			IdleTimeout:         cfg.Active.IdleTimeout,
			RegistrationTimeout: cfg.Active.RegistrationTimeout,
			MaxFailedStarts:     cfg.Active.MaxFailedStarts,
			RetryInterval:       cfg.Active.RetryInterval,
			MaxRetryInterval:    cfg.Active.MaxRetryInterval,
		})
		rm.releasing = map[string]bool{}
	}
	rm.svc = &service{rm: rm}
	return rm
}

// randomID is 32 hex digits, like Flink's IDs.
func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ID is this instance's resource_manager_id; TaskExecutors see it in
// registration responses, heartbeats and RequestSlot calls.
func (rm *ResourceManager) ID() string { return rm.id }

// Service is the gRPC ResourceManagerService to register on the
// JobManager's gRPC server.
func (rm *ResourceManager) Service() pb.ResourceManagerServiceServer { return rm.svc }

// Run serves until ctx ends: it runs the mailbox and the heartbeat ticker.
// It blocks; call it once. When it returns, every goroutine it started has
// ended and every connection to a TaskExecutor is closed; later calls fail
// with ErrStopped.
func (rm *ResourceManager) Run(ctx context.Context) {
	rm.log.Info().Dur("heartbeat_interval", rm.cfg.HeartbeatInterval).Dur("heartbeat_timeout", rm.cfg.HeartbeatTimeout).
		Dur("slot_request_timeout", rm.cfg.SlotRequestTimeout).Bool("evenly_spread_out", rm.cfg.EvenlySpreadOut).
		Bool("active", rm.planner != nil).Msg("ResourceManager started")
	if rm.planner != nil {
		if err := rm.cfg.Workers.Start(rm.onWorkerEvent); err != nil {
			rm.log.Error().Err(err).Msg("the provider's worker driver did not start; no TaskManagers will be started")
		}
		// Reach the minimum number of slots without waiting for a job.
		rm.mb.Post(rm.reconcile)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(rm.cfg.HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-rm.mb.Done():
				return
			case <-t.C:
				if !rm.mb.Post(rm.tick) {
					return
				}
			}
		}
	}()
	rm.mb.Run(ctx)
	wg.Wait()
	// The mailbox stopped: its state is ours alone now.
	for _, te := range rm.tes {
		te.conn.Close()
	}
	if rm.planner != nil {
		if rm.wake != nil {
			rm.wake.Stop()
		}
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
		rm.jmHB.Seen(jobID, time.Now())
		return struct{}{}, nil
	})
	return err
}

// DeclareResourceRequirements sets how many slots the job needs in total.
// Called by the JobMaster whenever its requirement changes. Blocks until
// recorded or ctx ends. Idempotent. Fails with ErrJobMasterNotRegistered if
// the job's JobMaster is not registered. Lowering the requirement never
// reclaims slots: the JobMaster frees them through the TaskExecutors.
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
	return restapi.TaskManagerInfo{
		ID:                     te.resourceID,
		Path:                   te.rpcAddress,
		DataPort:               dataPort(te.dataAddress),
		TimeSinceLastHeartbeat: te.lastHeartbeat.UnixMilli(),
		SlotsNumber:            total,
		FreeSlots:              free,
	}
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
	now := time.Now()
	loc := req.GetLocation()
	// Registrations not heard from within the timeout are gone: replace them.
	rm.expireTaskExecutors(now)
	if te, ok := rm.tes[loc.GetResourceId()]; ok && te.instanceID != req.GetInstanceId() && te.rpcAddress == loc.GetRpcAddress() {
		// A new process on the old one's address: the old one is gone (it
		// cannot hold the port any more), though the new one may have been
		// answering the old registration's heartbeats. Replace it.
		rm.removeTaskExecutor(te.resourceID, fmt.Sprintf("restarted as instance %s", req.GetInstanceId()))
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
	conn, err := grpc.NewClient(loc.GetRpcAddress(), grpc.WithTransportCredentials(insecure.NewCredentials()))
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
		conn:          conn,
		client:        pb.NewTaskExecutorServiceClient(conn),
	}
	rm.tes[te.resourceID] = te
	rm.teOrder = append(rm.teOrder, te.resourceID)
	rm.teHB.Seen(te.resourceID, now)
	rm.sm.addTaskManager(te.resourceID)
	rm.log.Info().Str("resource_id", te.resourceID).Str("instance_id", te.instanceID).Str("address", te.rpcAddress).
		Int("slots", te.numberOfSlots).Msg("TaskExecutor registered")
	return rm.registrationResponse(), nil
}

func (rm *ResourceManager) registrationResponse() *pb.RegisterTaskExecutorResponse {
	return &pb.RegisterTaskExecutorResponse{
		ResourceManagerId:   rm.id,
		HeartbeatIntervalMs: rm.cfg.HeartbeatInterval.Milliseconds(),
		HeartbeatTimeoutMs:  rm.cfg.HeartbeatTimeout.Milliseconds(),
	}
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
	rm.sm.applySlotReport(te.resourceID, fromReport(req.GetSlotReport()), rm.sm.Version())
	rm.reconcile()
	return nil
}

func fromReport(r *pb.SlotReport) []reportedSlot {
	out := make([]reportedSlot, 0, len(r.GetSlots()))
	for _, s := range r.GetSlots() {
		out = append(out, reportedSlot{Index: s.GetSlotIndex(), AllocationID: s.GetAllocationId(), JobID: s.GetJobId()})
	}
	return out
}

// removeTaskExecutor unregisters a TaskExecutor at once, forgets its slots
// and, in active mode, releases its worker if it still runs. Runs on the
// mailbox; a no-op for an unknown one.
func (rm *ResourceManager) removeTaskExecutor(resourceID, why string) {
	if rm.dropTaskExecutor(resourceID, why) {
		rm.releaseWorker(resourceID, why)
		rm.reconcile()
	}
}

// dropTaskExecutor is removeTaskExecutor without releasing the worker or
// reconciling; it reports whether the TaskExecutor was registered.
func (rm *ResourceManager) dropTaskExecutor(resourceID, why string) bool {
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
	rm.sm.removeTaskManager(resourceID)
	te.conn.Close()
	rm.log.Warn().Str("resource_id", resourceID).Str("instance_id", te.instanceID).Str("address", te.rpcAddress).
		Str("reason", why).Msg("TaskExecutor unregistered; its slots are removed")
	return true
}

func (rm *ResourceManager) expireTaskExecutors(now time.Time) {
	for _, id := range rm.teHB.Expired(now) {
		rm.removeTaskExecutor(id, fmt.Sprintf("heartbeat timeout: no heartbeat response within %s", rm.cfg.HeartbeatTimeout))
	}
}

// reconcile matches free slots to requirements and sends the resulting
// RequestSlot calls, then notifies jobs that cannot be satisfied. Runs on
// the mailbox after every change.
func (rm *ResourceManager) reconcile() {
	for _, r := range rm.sm.allocate() {
		rm.requestSlot(r)
	}
	for _, n := range rm.sm.notices(time.Now(), rm.cfg.SlotRequestTimeout) {
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
	if rm.planner != nil {
		rm.planWorkers()
	}
}

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
	client, timeout := te.client, rm.cfg.RPCTimeout
	rm.log.Debug().Str("job_id", r.JobID).Str("resource_id", r.ResourceID).Int32("slot_index", r.SlotIndex).
		Str("allocation_id", r.AllocationID).Msg("requesting slot")
	mailbox.Go(rm.mb, func(ctx context.Context) (*pb.Ack, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return client.RequestSlot(ctx, req)
	}, func(_ *pb.Ack, err error) {
		if !rm.sm.requestDone(r.AllocationID, err == nil) {
			return // the TaskExecutor is gone
		}
		if err != nil {
			rm.log.Warn().Err(err).Str("job_id", r.JobID).Str("resource_id", r.ResourceID).Int32("slot_index", r.SlotIndex).
				Str("allocation_id", r.AllocationID).Msg("RequestSlot failed; the slot is free again and will be retried after the next heartbeat tick")
		} else {
			rm.log.Info().Str("job_id", r.JobID).Str("resource_id", r.ResourceID).Int32("slot_index", r.SlotIndex).
				Str("allocation_id", r.AllocationID).Msg("slot allocated")
		}
		rm.reconcile()
	})
}

// tick runs every heartbeat interval on the mailbox.
func (rm *ResourceManager) tick() {
	now := time.Now()
	rm.expireTaskExecutors(now)
	for _, id := range rm.jmHB.Expired(now) {
		rm.disconnectJobMaster(id, fmt.Errorf("heartbeat timeout: the JobMaster did not answer within %s", rm.cfg.HeartbeatTimeout))
	}
	for _, te := range rm.tes {
		rm.heartbeatTaskExecutor(te)
	}
	for _, jm := range rm.jms {
		rm.heartbeatJobMaster(jm)
	}
	rm.sm.endBackoff()
	rm.reconcile()
}

func (rm *ResourceManager) heartbeatTimeout() time.Duration {
	return min(rm.cfg.RPCTimeout, rm.cfg.HeartbeatTimeout)
}

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
			return // unregistered or replaced meanwhile
		}
		if err != nil {
			rm.log.Debug().Err(err).Str("resource_id", te.resourceID).Msg("heartbeat to TaskExecutor failed")
			return
		}
		now := time.Now()
		te.lastHeartbeat = now
		rm.teHB.Seen(te.resourceID, now)
		if resp.GetSlotReport() != nil {
			rm.sm.applySlotReport(te.resourceID, fromReport(resp.GetSlotReport()), asOf)
			rm.reconcile()
		}
	})
}

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
		rm.jmHB.Seen(jm.jobID, time.Now())
	})
}
