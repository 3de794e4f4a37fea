package jobmaster

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/failure"
	"github.com/gofl/gofl/ha"
	"github.com/gofl/gofl/internal/backoff"
	"github.com/gofl/gofl/internal/clock"
	"github.com/gofl/gofl/internal/heartbeat"
	"github.com/gofl/gofl/internal/mailbox"
	"github.com/gofl/gofl/internal/outbox"
	"github.com/gofl/gofl/internal/version"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/jobmanager/checkpoint"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/jobmanager/scheduler"
	"github.com/gofl/gofl/resourcemanager/gateway"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/rpc/restapi"
	"github.com/gofl/gofl/storage"
)

var (
	// ErrProtocolMismatch rejects a TaskManager speaking another protocol version.
	ErrProtocolMismatch = errors.New("jobmaster: protocol version mismatch")
	// ErrJobEnded closes the outboxes still busy when the job has ended
	// and Config.RPCTimeout has passed.
	ErrJobEnded = errors.New("jobmaster: job ended")
	// ErrTaskManagerReplaced closes the outbox of a TaskManager that
	// registered again at another address.
	ErrTaskManagerReplaced = errors.New("jobmaster: TaskManager registered again")
)

// ResourceManager is what a JobMaster needs from the ResourceManager, in
// process. Each method blocks until the ResourceManager recorded the call
// or ctx ends, and is idempotent. The JobMaster calls them off its mailbox,
// one at a time and in order, through its ResourceManager outbox.
type ResourceManager interface {
	// RegisterJobMaster connects the job's JobMaster (gw); it is retried
	// with backoff until it succeeds.
	RegisterJobMaster(ctx context.Context, jobID, jobMasterAddress string, gw gateway.JobMasterGateway) error
	// DeclareResourceRequirements sets the slots the job needs in total;
	// it fails with gateway.ErrJobMasterNotRegistered when the
	// ResourceManager does not know the JobMaster (any more), which makes
	// the JobMaster register again and declare its newest requirement.
	DeclareResourceRequirements(ctx context.Context, jobID string, slots int) error
	// DisconnectJobMaster drops the job once it ended.
	DisconnectJobMaster(ctx context.Context, jobID string, cause error) error
}

// DialFunc connects to a TaskManager's RPC address; the Closer releases the
// connection. It must not block on the network (grpc.NewClient does not).
type DialFunc func(addr string) (pb.TaskExecutorServiceClient, io.Closer, error)

// Config of one JobMaster.
type Config struct {
	Scheduler         scheduler.Config
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
	// RPCFailureThreshold is how many consecutive heartbeat calls may fail
	// with the TaskManager unreachable before it counts as lost
	// (heartbeat.rpc-failure-threshold); 0 or less disables it.
	RPCFailureThreshold int
	// RPCTimeout bounds each outgoing call attempt, a task deployment with
	// its retries, and how long a job that ended waits for its last calls;
	// default 10 s.
	RPCTimeout time.Duration
	// RetryBackoff spaces the retries of outgoing calls (package backoff's
	// defaults when zero).
	RetryBackoff backoff.Config
	// Address is the JobManager's RPC address TaskManagers reach it at.
	Address string

	// Clock gives the time of heartbeats, timers and the scheduler's
	// logical time; nil is clock.Real.
	Clock clock.Clock
	// Executor runs the mailbox's turns and outgoing calls (the fault
	// simulator); nil runs them on the JobMaster's own goroutines.
	Executor mailbox.Executor
	// DialTaskManager connects to TaskManagers; nil dials gRPC with
	// insecure credentials.
	DialTaskManager DialFunc
	// Rand draws IDs and jitter; nil is seeded from crypto/rand.
	Rand *rand.Rand

	// Checkpoint configures the CheckpointCoordinator (zero fields take
	// Flink's defaults); its Interval 0 leaves only savepoints.
	Checkpoint checkpoint.Config
	// SavepointPath is execution.savepoint.path: the state the job starts
	// from. New reads it unless Restored is set.
	SavepointPath string
	// IgnoreUnclaimedState is execution.savepoint.ignore-unclaimed-state.
	IgnoreUnclaimedState bool
	// Restored is SavepointPath as ReadSavepoint read it, so New does no
	// I/O (the Dispatcher reads it off its mailbox).
	Restored *checkpoint.Restored
	// Storage opens the file systems of checkpoints and savepoints.
	Storage storage.Options
	// HA, when set, records the job's checkpoint ids and completed
	// checkpoints in the HA services (high-availability.type other than
	// none), fenced by the leader session.
	HA *CheckpointRecovery

	// writeMetadata, if set (tests), replaces writing a checkpoint's
	// _metadata to storage.
	writeMetadata func(ctx context.Context, location string, md *pb.CheckpointMetadata) error
}

// CheckpointRecovery is where a leader's JobMaster records what the next
// leader restores the job from (Flink's CheckpointRecoveryFactory's
// products).
type CheckpointRecovery struct {
	// Session is the leader session: the fencing token of every write.
	Session ha.SessionID
	// Checkpoints gets every completed checkpoint before tasks hear of it.
	Checkpoints ha.CompletedCheckpointStore
	// IDs moves past every checkpoint id before its triggers go out.
	IDs ha.CheckpointIDCounter
}

// Result is how a job ended.
type Result struct {
	Status scheduler.JobStatus
	Cause  error
}

// JobMaster runs one job.
type JobMaster struct {
	cfg   Config
	id    string // job_master_id, fresh per JobMaster
	jobID string
	jg    *jobgraph.JobGraph
	log   zerolog.Logger
	rm    ResourceManager
	mb    *mailbox.Mailbox
	clk   clock.Clock
	rnd   *rand.Rand
	dial  DialFunc
	sched *scheduler.Scheduler
	start time.Time

	tms map[string]*taskManager
	hb  *heartbeat.Monitor[string]
	// rmOut carries every call to the ResourceManager, in order.
	rmOut *outbox.Outbox
	// registering is set while a RegisterJobMaster is queued.
	registering bool
	// requirement is the newest slot requirement, declared again after a
	// re-registration; -1 before the first.
	requirement int

	blobs   map[string][]byte
	metrics map[subtaskKey]*attemptMetrics // newest task I/O metrics per subtask
	// accumulators of the newest FINISHED attempt per subtask, and their
	// bytes in all.
	accumulators     map[subtaskKey]attemptAccumulators
	accumulatorBytes int
	execResult       *restapi.JobExecutionResult // once the job is globally terminal
	statusAt         map[scheduler.JobStatus]time.Time

	wake     clock.Timer // the scheduler's WakeAt
	hbTimer  clock.Timer // the next heartbeat round
	endTimer clock.Timer // gives up on the last calls of an ended job
	// stepping is set while a Step's Ready is carried out; events that
	// arise meanwhile wait in followUps (raft's Ready/Advance: a Ready is
	// handled in full before the next Step).
	stepping  bool
	followUps []scheduler.Event
	pending   int // messages in the outboxes not yet done
	ended     bool
	released  bool // TaskManager connections closed

	// coords are the operator coordinators, by operator ID.
	coords map[string]*opCoordinator

	// checkpointing: the coordinator (built at Start), its timer, and
	// what REST reads without the mailbox (under ckMu).
	ck           *checkpoint.Coordinator
	ckCfg        checkpoint.Config
	ckStore      checkpoint.Store
	ckWake       clock.Timer
	ckDirty      bool // task states changed since the coordinator heard
	ckSyncPosted bool
	ckEnded      bool
	ckMu         sync.Mutex
	ckSavepoints int // savepoint requests in progress
	savepoints   map[string]SavepointStatus
	ckStats      checkpoint.StatsSnapshot

	doneOnce sync.Once
	done     chan struct{}
	result   Result
	final    Snapshot // the views as the job ended, for the Dispatcher's history
}

type taskManager struct {
	loc  eg.TaskManagerLocation
	addr string
	// registrationID is the TaskManager's current connection to this job
	// (RegisterTaskManager); a disconnect naming another is stale.
	registrationID string
	client         pb.TaskExecutorServiceClient
	closer         io.Closer
	// out carries every call to the TaskManager but heartbeats, in order.
	out *outbox.Outbox
	// unreachable counts consecutive heartbeats that failed to connect.
	unreachable  int
	heartbeating bool // a heartbeat is in flight
	// lastRequest is when the last heartbeat request went out (job time).
	lastRequest time.Duration
}

// New builds the job's ExecutionGraph and scheduler. Errors wrap
// jobgraph.ErrInvalid or scheduler.ErrInvalidConfig.
func New(cfg Config, jg *jobgraph.JobGraph, rm ResourceManager, log zerolog.Logger) (*JobMaster, error) {
	if cfg.RPCTimeout <= 0 {
		cfg.RPCTimeout = 10 * time.Second
	}
	rnd := cfg.Rand
	if rnd == nil {
		var seed [32]byte
		_, _ = crand.Read(seed[:])
		rnd = rand.New(rand.NewChaCha8(seed))
	}
	if cfg.Scheduler.Jitter == nil {
		cfg.Scheduler.Jitter = rnd.Float64
	}
	sched, err := scheduler.New(cfg.Scheduler, jg, rnd.Uint64())
	if err != nil {
		return nil, err
	}
	ckCfg := checkpointConfig(cfg.Checkpoint)
	if err := ckCfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", scheduler.ErrInvalidConfig, err)
	}
	if cfg.Restored == nil && cfg.SavepointPath != "" {
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		cfg.Restored, err = ReadSavepoint(ctx, cfg, jg)
		cancel()
		if err != nil {
			return nil, err
		}
	}
	dial := cfg.DialTaskManager
	if dial == nil {
		dial = dialGRPC
	}
	mb := mailbox.New()
	if cfg.Executor != nil {
		mb = mailbox.NewWithExecutor(cfg.Executor)
	}
	jm := &JobMaster{
		cfg: cfg, id: randomID(rnd), jobID: jg.JobID, jg: jg, rm: rm, sched: sched,
		log: log.With().Str("job_id", jg.JobID).Str("job", jg.Name).Logger(),
		mb:  mb, clk: clock.Or(cfg.Clock), rnd: rnd, dial: dial,
		tms:          map[string]*taskManager{},
		hb:           heartbeat.New[string](cfg.HeartbeatTimeout),
		requirement:  -1,
		blobs:        map[string][]byte{},
		metrics:      map[subtaskKey]*attemptMetrics{},
		accumulators: map[subtaskKey]attemptAccumulators{},
		statusAt:     map[scheduler.JobStatus]time.Time{},
		done:         make(chan struct{}),
		ckCfg:        ckCfg,
		ckStore:      checkpoint.Store{Options: cfg.Storage},
		savepoints:   map[string]SavepointStatus{},
	}
	jm.rmOut = outbox.New("resourcemanager", mb, jm.outboxConfig(rmRetryable), jm.log)
	if err := jm.newCoordinators(); err != nil {
		return nil, err
	}
	jm.preferSourceHosts()
	return jm, nil
}

func dialGRPC(addr string) (pb.TaskExecutorServiceClient, io.Closer, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	return pb.NewTaskExecutorServiceClient(conn), conn, nil
}

func (jm *JobMaster) outboxConfig(retryable func(error) bool) outbox.Config {
	return outbox.Config{CallTimeout: jm.cfg.RPCTimeout, Backoff: jm.cfg.RetryBackoff, Retryable: retryable,
		Clock: jm.clk, Rand: jm.rnd.Float64}
}

// rmRetryable: the in-process ResourceManager fails for good only on a bad
// argument, when it stopped, or for a JobMaster it does not know (which
// the JobMaster answers by registering again); everything else, such as
// a busy ResourceManager missing the call's deadline, is retried.
func rmRetryable(err error) bool {
	return !errors.Is(err, gateway.ErrInvalidArgument) && !errors.Is(err, gateway.ErrStopped) &&
		!errors.Is(err, gateway.ErrJobMasterNotRegistered)
}

func randomID(rnd *rand.Rand) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], rnd.Uint64())
	binary.BigEndian.PutUint64(b[8:], rnd.Uint64())
	return hex.EncodeToString(b[:])
}

// ID is the job_master_id.
func (jm *JobMaster) ID() string { return jm.id }

// JobID is the job's ID.
func (jm *JobMaster) JobID() string { return jm.jobID }

// Done is closed when the job has ended and the JobMaster cleaned up.
func (jm *JobMaster) Done() <-chan struct{} { return jm.done }

// Result is valid after Done.
func (jm *JobMaster) Result() Result { return jm.result }

// Start arms the JobMaster's timers and posts its first work (registering
// with the ResourceManager, then scheduling). It does not block; call it
// once, before the mailbox runs: Run calls it, and with a Config.Executor
// the simulator calls it and drives the turns.
func (jm *JobMaster) Start() {
	jm.start = jm.clk.Now()
	jm.statusAt[scheduler.JobCreated] = jm.start
	jm.wake = jm.clk.AfterFunc(time.Hour, func() { jm.mb.Post(func() { jm.step(scheduler.Tick{}) }) })
	jm.wake.Stop()
	jm.hbTimer = jm.clk.AfterFunc(jm.cfg.HeartbeatInterval, func() { jm.mb.Post(jm.heartbeatTick) })
	jm.startCheckpointing()
	jm.mb.Post(jm.startCoordinators)
	jm.mb.Post(jm.registerWithResourceManager)
}

// Run drives the job until it ends or ctx ends. It blocks.
func (jm *JobMaster) Run(ctx context.Context) {
	jm.Start()
	jm.mb.Run(ctx)
	jm.wake.Stop()
	jm.hbTimer.Stop()
	jm.ckWake.Stop()
	if jm.endTimer != nil {
		jm.endTimer.Stop()
	}
	jm.releaseConnections()
	jm.closeCoordinators()
	if !jm.ended {
		jm.result = Result{Status: jm.sched.Status(), Cause: errors.New("jobmaster: stopped before the job ended")}
		jm.final = jm.snapshot()
	}
	jm.doneOnce.Do(func() { close(jm.done) })
}

func (jm *JobMaster) now() time.Duration { return jm.clk.Now().Sub(jm.start) }

// ---- the ResourceManager ----

// registerWithResourceManager queues a RegisterJobMaster, retried with
// backoff until it succeeds; then the job starts, or its newest
// requirement is declared again.
func (jm *JobMaster) registerWithResourceManager() {
	if jm.registering || jm.ended {
		return
	}
	jm.registering = true
	jm.send(jm.rmOut, outbox.Message{
		What: "RegisterJobMaster",
		Call: func(ctx context.Context) error { return jm.rm.RegisterJobMaster(ctx, jm.jobID, jm.cfg.Address, jm) },
		Done: func(err error) {
			jm.registering = false
			if err != nil {
				jm.log.Error().Err(err).Msg("registering with the ResourceManager failed for good")
				return
			}
			if jm.sched.Status() == scheduler.JobCreated {
				jm.feed(scheduler.StartScheduling{})
			} else if jm.requirement >= 0 && !jm.ended {
				jm.declare(jm.requirement)
			}
		},
	})
}

// declare queues the job's slot requirement; a newer one replaces it while
// it waits.
func (jm *JobMaster) declare(n int) {
	jm.requirement = n
	jm.send(jm.rmOut, outbox.Message{
		What: fmt.Sprintf("DeclareResourceRequirements %d", n),
		Key:  "requirements",
		Call: func(ctx context.Context) error { return jm.rm.DeclareResourceRequirements(ctx, jm.jobID, n) },
		Done: func(err error) {
			if errors.Is(err, gateway.ErrJobMasterNotRegistered) && !jm.ended {
				jm.log.Warn().Err(err).Msg("the ResourceManager does not know this JobMaster; registering again")
				jm.registerWithResourceManager()
			}
		},
	})
}

// ---- stepping the scheduler ----

// step feeds one event to the core, carries out its Ready, and then the
// events that arose meanwhile (outcomes known at once, such as a deployment
// to a TaskManager that is gone), each with its own Ready. It returns the
// first Ready and the core's verdict on ev. It must not be called while a
// Ready is carried out: use feed.
func (jm *JobMaster) step(ev scheduler.Event) (scheduler.Ready, error) {
	if jm.stepping {
		panic(fmt.Sprintf("jobmaster: step(%T) while carrying out a Ready", ev))
	}
	jm.stepping = true
	defer func() { jm.stepping = false }()
	err := jm.sched.Step(jm.now(), ev)
	r := jm.sched.Ready()
	jm.execute(&r)
	jm.drain()
	return r, err
}

// drain steps the events held back, in order, each Ready in full.
func (jm *JobMaster) drain() {
	for len(jm.followUps) > 0 {
		next := jm.followUps[0]
		jm.followUps = jm.followUps[1:]
		if err := jm.sched.Step(jm.now(), next); err != nil {
			jm.log.Debug().Err(err).Str("event", fmt.Sprintf("%T", next)).Msg("event rejected")
		}
		r := jm.sched.Ready()
		jm.execute(&r)
	}
	jm.followUps = nil
}

// feed steps ev now, or after the Ready being carried out.
func (jm *JobMaster) feed(ev scheduler.Event) {
	if jm.stepping {
		jm.followUps = append(jm.followUps, ev)
		return
	}
	if _, err := jm.step(ev); err != nil {
		jm.log.Debug().Err(err).Str("event", fmt.Sprintf("%T", ev)).Msg("event rejected")
	}
}

// hold runs fn with the events it causes held back; the caller steps them
// afterwards (step, or flush).
func (jm *JobMaster) hold(fn func()) {
	was := jm.stepping
	jm.stepping = true
	fn()
	jm.stepping = was
}

// flush steps the events held back, outside a step.
func (jm *JobMaster) flush() {
	if jm.stepping || len(jm.followUps) == 0 {
		return
	}
	jm.stepping = true
	defer func() { jm.stepping = false }()
	jm.drain()
}

func (jm *JobMaster) execute(r *scheduler.Ready) {
	for _, c := range r.JobStatus {
		jm.statusAt[c.To] = jm.clk.Now()
		ev := jm.log.Info()
		switch {
		case errors.Is(c.Cause, scheduler.ErrIllegalState):
			ev = jm.log.Error().Err(c.Cause).Str("graph", fmt.Sprintf("%x", jm.sched.Graph().ID))
		case c.Cause != nil:
			ev = jm.log.Warn().Err(c.Cause)
		}
		ev.Str("from", c.From.String()).Str("to", c.To.String()).Msg("job status changed")
	}
	for _, b := range r.OffloadedBlobs {
		jm.blobs[b.Key] = b.Data
	}
	if r.ResourceRequirements != nil {
		jm.declare(*r.ResourceRequirements)
	}
	// Cancellations go first: an old attempt leaves its slot before a new
	// one arrives. Only an attempt deployed in this very Ready (the job
	// failed right after) is cancelled after its deployment.
	var deployed map[eg.ExecutionAttemptID]bool
	if len(r.Deployments) > 0 && len(r.Cancellations) > 0 {
		deployed = make(map[eg.ExecutionAttemptID]bool, len(r.Deployments))
		for _, d := range r.Deployments {
			deployed[attemptID(d.Descriptor.Attempt)] = true
		}
	}
	for _, c := range r.Cancellations {
		if !deployed[c.Attempt] {
			jm.cancel(c)
		}
	}
	restores := false
	for _, d := range r.Deployments {
		restores = jm.attachRestore(d) || restores
		jm.coordinatorsDeploying(d)
		jm.deploy(d)
	}
	if restores {
		jm.recordRestore()
	}
	for _, c := range r.Cancellations {
		if deployed[c.Attempt] {
			jm.cancel(c)
		}
	}
	for _, pr := range r.PartitionReleases {
		tm := jm.tms[pr.TaskManagerID]
		if tm == nil {
			continue // gone: so are its partitions
		}
		req := &pb.ReleasePartitionsRequest{JobId: jm.jobID}
		for _, p := range pr.Partitions {
			req.Partitions = append(req.Partitions, partitionProto(p))
		}
		c := tm.client
		jm.send(tm.out, outbox.Message{What: fmt.Sprintf("ReleasePartitions (%d)", len(req.Partitions)),
			Call: func(ctx context.Context) error { _, err := c.ReleasePartitions(ctx, req); return err }})
	}
	for _, sr := range r.SlotReleases {
		tm := jm.tms[sr.TaskManagerID]
		if tm == nil {
			continue
		}
		req := &pb.FreeSlotRequest{AllocationId: string(sr.Allocation), Cause: sr.Cause}
		c := tm.client
		jm.send(tm.out, outbox.Message{What: "FreeSlot " + string(sr.Allocation),
			Call: func(ctx context.Context) error { _, err := c.FreeSlot(ctx, req); return err }})
	}
	if r.HasWakeAt {
		jm.wake.Reset(max(0, r.WakeAt-jm.now()))
	}
	jm.checkpointJobStatus(r.JobStatus)
	jm.checkpointTasksChanged()
	if jm.sched.Status().IsGloballyTerminal() && !jm.ended {
		jm.endJob()
	}
}

// deploy submits a TDD. The TaskManager has Config.RPCTimeout to accept
// it; if it does not, the attempt fails and is cancelled there, through
// the same outbox, so an attempt started despite a lost answer does not
// keep its slot.
func (jm *JobMaster) deploy(d scheduler.Deployment) {
	id := attemptID(d.Descriptor.Attempt)
	tm := jm.tms[d.TaskManager.ID]
	if tm == nil {
		jm.feed(scheduler.DeploymentFailed{Attempt: id, TaskManager: d.TaskManager, Cause: fmt.Errorf("TaskManager %s is not connected", d.TaskManager.ID)})
		return
	}
	req := &pb.SubmitTaskRequest{JobId: jm.jobID, JobMasterId: jm.id, Tdd: d.Descriptor}
	c := tm.client
	jm.send(tm.out, outbox.Message{
		// Room for one retry after a lost message.
		What: "SubmitTask " + id.String(), Deadline: 2 * jm.cfg.RPCTimeout,
		Call: func(ctx context.Context) error {
			_, err := c.SubmitTask(ctx, req)
			if status.Code(err) == codes.AlreadyExists {
				return nil // an earlier try arrived; only its answer was lost
			}
			return err
		},
		Done: func(err error) {
			if err != nil {
				if status.Code(err) == codes.NotFound {
					// The TaskManager does not hold the slot (it freed
					// it meanwhile): the pool must not use it again.
					jm.feed(scheduler.SlotLost{Allocation: eg.AllocationID(d.Descriptor.AllocationId), Cause: err})
				}
				// Without an answer the TaskManager may have started it.
				unknown := errors.Is(err, outbox.ErrDeadline)
				jm.feed(scheduler.DeploymentFailed{Attempt: id, TaskManager: d.TaskManager, Cause: err, OutcomeUnknown: unknown})
				return
			}
			jm.feed(scheduler.DeploymentAcknowledged{Attempt: id})
		},
	})
}

// cancel asks a TaskManager to cancel a task, retried until it answers or
// is lost.
func (jm *JobMaster) cancel(c scheduler.Cancellation) {
	tm := jm.tms[c.TaskManager.ID]
	if tm == nil {
		return // its loss is handled by the scheduler
	}
	req := &pb.CancelTaskRequest{JobId: jm.jobID, Attempt: attemptProto(c.Attempt)}
	cl := tm.client
	var running bool
	jm.send(tm.out, outbox.Message{What: "CancelTask " + c.Attempt.String(),
		Call: func(ctx context.Context) error {
			resp, err := cl.CancelTask(ctx, req)
			running = resp.GetRunning()
			return err
		},
		Done: func(err error) {
			if err == nil && !running {
				// It does not run there and never will (the TaskManager
				// remembers the cancel): it has stopped. A running one
				// reports its own end.
				jm.feed(scheduler.TaskStateChanged{Attempt: c.Attempt, State: eg.Canceled})
			}
		}})
}

// send queues m and counts it until done, so an ended job stops only once
// its last calls are through.
func (jm *JobMaster) send(out *outbox.Outbox, m outbox.Message) {
	jm.pending++
	done := m.Done
	m.Done = func(err error) {
		jm.pending--
		if done != nil {
			done(err)
		}
		jm.maybeClose()
	}
	out.Send(m)
}

// endJob tells the ResourceManager and the TaskManagers the job is done;
// the mailbox closes once the last outgoing call is through, at most
// Config.RPCTimeout later.
func (jm *JobMaster) endJob() {
	jm.ended = true
	jm.hbTimer.Stop()
	st := jm.sched.Status()
	var cause error
	if h := jm.sched.ExceptionHistory(); st == scheduler.JobFailed && len(h) > 0 {
		cause = h[len(h)-1].Cause
	}
	jm.result = Result{Status: st, Cause: cause}
	jm.send(jm.rmOut, outbox.Message{What: "DisconnectJobMaster",
		Call: func(ctx context.Context) error {
			return jm.rm.DisconnectJobMaster(ctx, jm.jobID, fmt.Errorf("job %s", st))
		}})
	for _, id := range jm.sortedTaskManagers() {
		tm := jm.tms[id]
		req := &pb.DisconnectJobManagerRequest{JobId: jm.jobID, Cause: fmt.Sprintf("job %s", st)}
		c := tm.client
		jm.send(tm.out, outbox.Message{What: "DisconnectJobManager",
			Call: func(ctx context.Context) error { _, err := c.DisconnectJobManager(ctx, req); return err }})
	}
	jm.endTimer = jm.clk.AfterFunc(jm.cfg.RPCTimeout, func() {
		jm.mb.Post(func() {
			cause := fmt.Errorf("%w %s %v ago", ErrJobEnded, st, jm.cfg.RPCTimeout)
			jm.rmOut.Close(cause)
			for _, id := range jm.sortedTaskManagers() {
				jm.tms[id].out.Close(cause)
			}
		})
	})
}

func (jm *JobMaster) maybeClose() {
	if !jm.ended || jm.pending > 0 || jm.released {
		return
	}
	if jm.endTimer != nil {
		jm.endTimer.Stop()
	}
	jm.final = jm.snapshot()
	jm.log.Info().Str("status", jm.result.Status.String()).Msg("job master stopped")
	jm.releaseConnections()
	jm.closeCoordinators()
	jm.mb.Close()
	if jm.cfg.Executor != nil {
		// No Run to return: the job is done now. (Run closes done only
		// once the mailbox stopped running turns.)
		jm.doneOnce.Do(func() { close(jm.done) })
	}
}

// releaseConnections closes every TaskManager connection once.
func (jm *JobMaster) releaseConnections() {
	if jm.released {
		return
	}
	jm.released = true
	for _, tm := range jm.tms {
		_ = tm.closer.Close()
	}
}

func (jm *JobMaster) sortedTaskManagers() []string {
	ids := make([]string, 0, len(jm.tms))
	for id := range jm.tms {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// ---- TaskManager heartbeats ----

// heartbeatTick drops TaskManagers silent for the heartbeat timeout and
// heartbeats the others, at most one heartbeat in flight each; it re-arms
// itself.
func (jm *JobMaster) heartbeatTick() {
	if jm.ended {
		return
	}
	for _, id := range jm.hb.Expired(jm.clk.Now()) {
		jm.log.Warn().Str("resource_id", id).Dur("timeout", jm.cfg.HeartbeatTimeout).Msg("TaskManager heartbeat timed out")
		// It may only be cut off and still run its tasks: it stops them
		// by itself within its fencing timeout (less than ours) of the
		// last heartbeat request it may have received.
		fenced := time.Duration(0)
		if tm := jm.tms[id]; tm != nil {
			fenced = tm.lastRequest + jm.cfg.HeartbeatTimeout
		}
		jm.dropTaskManagerFenced(id, fmt.Errorf("heartbeat of TaskManager %s timed out after %v", id, jm.cfg.HeartbeatTimeout), fenced)
	}
	if jm.ended {
		return // losing them ended the job
	}
	for _, id := range jm.sortedTaskManagers() {
		jm.heartbeat(id, jm.tms[id])
	}
	jm.hbTimer.Reset(jm.cfg.HeartbeatInterval)
}

func (jm *JobMaster) heartbeat(id string, tm *taskManager) {
	if tm.heartbeating {
		return
	}
	tm.heartbeating = true
	requestedAt := jm.now()
	tm.lastRequest = requestedAt
	c := tm.client
	req := &pb.HeartbeatRequest{SenderId: jm.id, JobId: jm.jobID}
	mailbox.Go(jm.mb, func(ctx context.Context) (*pb.TaskManagerHeartbeatResponse, error) {
		// At most an interval: with one heartbeat in flight, a lost request
		// or answer must cost one heartbeat, not the whole timeout.
		ctx, cancel := context.WithTimeout(ctx, min(jm.cfg.HeartbeatInterval, jm.cfg.RPCTimeout))
		defer cancel()
		return c.HeartbeatFromJobManager(ctx, req)
	}, func(resp *pb.TaskManagerHeartbeatResponse, err error) {
		tm.heartbeating = false
		if jm.tms[id] != tm || jm.ended {
			return // dropped or replaced meanwhile
		}
		if refused(err) {
			// The process is gone (connection refused): Flink's
			// heartbeat.rpc-failure-threshold notices this without
			// waiting for the heartbeat timeout. A peer that is merely
			// unreachable (timeouts, no route) may still run its tasks:
			// only the heartbeat timeout, after which it has stopped them
			// itself, decides about it.
			if tm.unreachable++; jm.cfg.RPCFailureThreshold > 0 && tm.unreachable >= jm.cfg.RPCFailureThreshold {
				jm.log.Warn().Str("resource_id", id).Int("failed_heartbeats", tm.unreachable).Err(err).Msg("TaskManager unreachable")
				jm.dropTaskManager(id, fmt.Errorf("TaskManager %s unreachable for %d heartbeats: %w", id, tm.unreachable, err))
			}
			return
		}
		if err != nil {
			jm.log.Debug().Err(err).Str("resource_id", id).Msg("heartbeat failed")
			return
		}
		tm.unreachable = 0
		if !jm.hb.Tracked(id) {
			return
		}
		jm.hb.Seen(id, jm.clk.Now())
		for _, m := range resp.GetMetrics() {
			jm.recordMetrics(m, false)
		}
		report := scheduler.TaskManagerReport{TaskManagerID: id, RequestedAt: requestedAt}
		for _, a := range resp.GetRunning() {
			report.Running = append(report.Running, attemptID(a))
		}
		for _, p := range resp.GetPartitions() {
			report.Partitions = append(report.Partitions, partitionID(p))
		}
		jm.feed(report)
	})
}

// dropTaskManager forgets a TaskManager that is gone: the scheduler fails
// its tasks and reruns the producers of the partitions it held, then its
// outbox closes (the calls still queued fail, their outcomes follow).
func (jm *JobMaster) dropTaskManager(id string, cause error) { jm.dropTaskManagerFenced(id, cause, 0) }

// dropTaskManagerFenced drops a TaskManager whose attempts may restart
// only from fencedAt (see scheduler.TaskManagerLost).
func (jm *JobMaster) dropTaskManagerFenced(id string, cause error, fencedAt time.Duration) {
	tm := jm.tms[id]
	if tm == nil {
		return
	}
	delete(jm.tms, id)
	jm.hb.Remove(id)
	jm.hold(func() {
		tm.out.Close(cause)
		_ = tm.closer.Close()
	})
	jm.step(scheduler.TaskManagerLost{TaskManagerID: id, Cause: failure.EnvironmentError(cause), FencedAt: fencedAt})
}

// ---- called by the ResourceManager ----

// NotifyNotEnoughResources implements gateway.JobMasterGateway.
func (jm *JobMaster) NotifyNotEnoughResources(acquired int) {
	jm.mb.Post(func() { jm.feed(scheduler.NotEnoughResources{Acquired: acquired}) })
}

// NotifyResourceAllocationFailed implements
// gateway.ResourceAllocationFailureNotifier: the ResourceManager
// could not start TaskManagers, so waiting slot requests fail now rather
// than at slot.request.timeout.
func (jm *JobMaster) NotifyResourceAllocationFailed(cause error) {
	jm.mb.Post(func() { jm.feed(scheduler.ResourceAllocationFailed{Cause: cause}) })
}

// HeartbeatFromResourceManager implements gateway.JobMasterGateway.
func (jm *JobMaster) HeartbeatFromResourceManager(ctx context.Context) error {
	_, err := mailbox.Call(ctx, jm.mb, func() (struct{}, error) { return struct{}{}, nil })
	return err
}

// NotifyTaskManagerLost implements gateway.JobMasterGateway: the
// provider reported the TaskManager's worker ended, so it is dropped now
// rather than after a heartbeat timeout. Non-blocking; idempotent.
func (jm *JobMaster) NotifyTaskManagerLost(resourceID string, cause error) {
	jm.mb.Post(func() {
		if cause == nil {
			cause = errors.New("its worker ended")
		}
		jm.dropTaskManager(resourceID, fmt.Errorf("TaskManager %s lost: %w", resourceID, cause))
	})
}

// ---- called by TaskManagers through the JobManager's JobMasterService ----

// RegisterTaskManager connects a TaskManager to this job.
func (jm *JobMaster) RegisterTaskManager(ctx context.Context, req *pb.RegisterTaskManagerRequest) (*pb.RegisterTaskManagerResponse, error) {
	return mailbox.Call(ctx, jm.mb, func() (*pb.RegisterTaskManagerResponse, error) {
		if req.ProtocolVersion != version.ProtocolVersion {
			return nil, status.Errorf(codes.FailedPrecondition, "%v: TaskManager speaks protocol %d, this JobManager speaks %d", ErrProtocolMismatch, req.ProtocolVersion, version.ProtocolVersion)
		}
		loc := req.GetLocation()
		if loc.GetResourceId() == "" || loc.GetRpcAddress() == "" {
			return nil, status.Error(codes.InvalidArgument, "jobmaster: a TaskManager needs a resource ID and an RPC address")
		}
		if jm.ended {
			return nil, status.Errorf(codes.FailedPrecondition, "jobmaster: job %s has ended", jm.jobID)
		}
		if tm := jm.tms[loc.ResourceId]; tm == nil || tm.addr != loc.RpcAddress {
			client, closer, err := jm.dial(loc.RpcAddress)
			if err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "jobmaster: TaskManager address %q: %v", loc.RpcAddress, err)
			}
			if tm != nil {
				jm.hold(func() {
					tm.out.Close(fmt.Errorf("%w at %s", ErrTaskManagerReplaced, loc.RpcAddress))
					_ = tm.closer.Close()
				})
			}
			jm.tms[loc.ResourceId] = &taskManager{
				loc:  eg.TaskManagerLocation{ID: loc.ResourceId, Host: loc.Host, DataAddress: loc.DataAddress},
				addr: loc.RpcAddress, client: client, closer: closer, registrationID: req.RegistrationId,
				out: outbox.New("TaskManager "+loc.ResourceId, jm.mb, jm.outboxConfig(nil), jm.log),
			}
			jm.log.Info().Str("resource_id", loc.ResourceId).Str("address", loc.RpcAddress).Msg("TaskManager registered")
			jm.flush() // the outcomes of the calls the old outbox dropped
		} else if tm.registrationID != req.RegistrationId {
			// The same process connecting anew: its data address is that of
			// the job's runner now, which may be a new one.
			jm.log.Info().Str("resource_id", loc.ResourceId).Str("data_address", loc.DataAddress).
				Str("previous_data_address", tm.loc.DataAddress).Msg("TaskManager reconnected")
			tm.registrationID, tm.loc.DataAddress, tm.loc.Host = req.RegistrationId, loc.DataAddress, loc.Host
		}
		jm.hb.Seen(loc.ResourceId, jm.clk.Now())
		return &pb.RegisterTaskManagerResponse{JobMasterId: jm.id,
			HeartbeatIntervalMs: jm.cfg.HeartbeatInterval.Milliseconds(), HeartbeatTimeoutMs: jm.cfg.HeartbeatTimeout.Milliseconds()}, nil
	})
}

// OfferSlots hands the offered slots to the scheduler's slot pool.
func (jm *JobMaster) OfferSlots(ctx context.Context, req *pb.OfferSlotsRequest) (*pb.OfferSlotsResponse, error) {
	return mailbox.Call(ctx, jm.mb, func() (*pb.OfferSlotsResponse, error) {
		tm := jm.tms[req.ResourceId]
		if tm == nil {
			return nil, status.Errorf(codes.FailedPrecondition, "jobmaster: TaskManager %s offers slots without being registered", req.ResourceId)
		}
		ev := scheduler.SlotsOffered{TaskManager: tm.loc}
		for _, s := range req.Slots {
			ev.Slots = append(ev.Slots, scheduler.SlotOffer{Allocation: eg.AllocationID(s.AllocationId), SlotIndex: int(s.SlotIndex)})
		}
		r, _ := jm.step(ev)
		resp := &pb.OfferSlotsResponse{}
		for _, rep := range r.SlotOfferReplies {
			if rep.TaskManagerID == req.ResourceId {
				for _, a := range rep.Accepted {
					resp.Accepted = append(resp.Accepted, string(a))
				}
			}
		}
		return resp, nil
	})
}

// UpdateTaskExecutionState applies a TaskManager's task state report.
func (jm *JobMaster) UpdateTaskExecutionState(ctx context.Context, req *pb.UpdateTaskExecutionStateRequest) (*pb.Ack, error) {
	state, err := eg.ParseExecutionState(req.State)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if req.Attempt == nil {
		return nil, status.Error(codes.InvalidArgument, "jobmaster: task state update without an attempt")
	}
	cause := failure.Decode(req.Failure)
	return mailbox.Call(ctx, jm.mb, func() (*pb.Ack, error) {
		if req.Metrics != nil && state.IsTerminal() {
			// Before the step: the job's final views may be taken in it.
			// Metrics of an attempt that is not current are never shown.
			req.Metrics.Attempt = req.Attempt
			jm.recordMetrics(req.Metrics, true)
		}
		id := attemptID(req.Attempt)
		if state == eg.Finished && len(req.Accumulators) > 0 && jm.isCurrent(id) {
			if err := jm.recordAccumulators(id, req.Accumulators); err != nil {
				state, cause = eg.Failed, err
			}
		}
		if _, err := jm.step(scheduler.TaskStateChanged{Attempt: id, State: state, Cause: cause}); err != nil {
			if errors.Is(err, eg.ErrUnknownAttempt) {
				return nil, status.Error(codes.NotFound, err.Error())
			}
			return nil, status.Error(codes.FailedPrecondition, err.Error())
		}
		return &pb.Ack{}, nil
	})
}

// DisconnectTaskManager drops a TaskManager at once.
func (jm *JobMaster) DisconnectTaskManager(ctx context.Context, req *pb.DisconnectTaskManagerRequest) (*pb.Ack, error) {
	return mailbox.Call(ctx, jm.mb, func() (*pb.Ack, error) {
		if tm := jm.tms[req.ResourceId]; tm != nil && req.RegistrationId != "" && req.RegistrationId != tm.registrationID {
			// A late disconnect of a connection the TaskManager has
			// replaced since: the current one stays.
			jm.log.Info().Str("resource_id", req.ResourceId).Str("registration_id", req.RegistrationId).
				Str("current_registration_id", tm.registrationID).Msg("stale TaskManager disconnect ignored")
			return &pb.Ack{}, nil
		}
		jm.dropTaskManager(req.ResourceId, fmt.Errorf("TaskManager %s disconnected: %s", req.ResourceId, req.Cause))
		return &pb.Ack{}, nil
	})
}

// ReportPartitionsLost: a TaskManager lost partitions of this job that it
// had produced (its job runner died). Their producers rerun with their
// consumers; partitions of older attempts, or not tracked on that
// TaskManager, are ignored. Called by TaskManagers through the
// JobMasterService; idempotent.
func (jm *JobMaster) ReportPartitionsLost(ctx context.Context, req *pb.ReportPartitionsLostRequest) (*pb.Ack, error) {
	if req.ResourceId == "" {
		return nil, status.Error(codes.InvalidArgument, "jobmaster: partitions lost without a resource ID")
	}
	ev := scheduler.PartitionsLost{TaskManagerID: req.ResourceId, Cause: errors.New(req.Cause)}
	if req.Cause == "" {
		ev.Cause = errors.New("no cause given")
	}
	for _, p := range req.Partitions {
		if p.GetProducer() == nil {
			return nil, status.Error(codes.InvalidArgument, "jobmaster: a lost partition without its producer")
		}
		ev.Partitions = append(ev.Partitions, partitionID(p))
	}
	return mailbox.Call(ctx, jm.mb, func() (*pb.Ack, error) {
		if _, err := jm.step(ev); err != nil {
			return nil, status.Error(codes.FailedPrecondition, err.Error())
		}
		return &pb.Ack{}, nil
	})
}

// GetBlob serves offloaded shuffle descriptors.
func (jm *JobMaster) GetBlob(ctx context.Context, req *pb.GetBlobRequest) (*pb.GetBlobResponse, error) {
	return mailbox.Call(ctx, jm.mb, func() (*pb.GetBlobResponse, error) {
		data, ok := jm.blobs[req.Key]
		if !ok {
			return nil, status.Errorf(codes.NotFound, "jobmaster: no blob %q", req.Key)
		}
		return &pb.GetBlobResponse{Data: data}, nil
	})
}

// Cancel starts cancelling the job.
func (jm *JobMaster) Cancel(ctx context.Context) error {
	_, err := mailbox.Call(ctx, jm.mb, func() (struct{}, error) {
		_, err := jm.step(scheduler.CancelJob{})
		return struct{}{}, err
	})
	return err
}

func attemptProto(id eg.ExecutionAttemptID) *pb.ExecutionAttemptID {
	return &pb.ExecutionAttemptID{Graph: id.Graph, JobVertexId: string(id.JobVertex), SubtaskIndex: id.Subtask, AttemptNumber: id.Attempt}
}

func attemptID(p *pb.ExecutionAttemptID) eg.ExecutionAttemptID {
	return eg.ExecutionAttemptID{Graph: p.GetGraph(), JobVertex: jobgraph.VertexID(p.GetJobVertexId()), Subtask: p.GetSubtaskIndex(), Attempt: p.GetAttemptNumber()}
}

func partitionProto(p eg.ResultPartitionID) *pb.ResultPartitionIDProto {
	return &pb.ResultPartitionIDProto{ResultId: string(p.Result), PartitionIndex: p.Partition, Producer: attemptProto(p.Producer)}
}

func partitionID(p *pb.ResultPartitionIDProto) eg.ResultPartitionID {
	return eg.ResultPartitionID{Result: jobgraph.ResultID(p.GetResultId()), Partition: p.GetPartitionIndex(), Producer: attemptID(p.GetProducer())}
}

var (
	_ gateway.JobMasterGateway                  = (*JobMaster)(nil)
	_ gateway.ResourceAllocationFailureNotifier = (*JobMaster)(nil)
)

// refused reports whether a call failed because nothing listens at the
// peer's address any more: its process is gone.
func refused(err error) bool {
	return status.Code(err) == codes.Unavailable && strings.Contains(err.Error(), "connection refused")
}
