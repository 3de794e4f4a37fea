package jobmaster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/heartbeat"
	"github.com/gofl/gofl/internal/mailbox"
	"github.com/gofl/gofl/internal/version"
	"github.com/gofl/gofl/jobgraph"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/jobmanager/failover"
	"github.com/gofl/gofl/jobmanager/scheduler"
	"github.com/gofl/gofl/resourcemanager"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/rpc/restapi"
)

// ErrProtocolMismatch rejects a TaskManager speaking another protocol version.
var ErrProtocolMismatch = errors.New("jobmaster: protocol version mismatch")

// ResourceManager is what a JobMaster needs from the ResourceManager. Each
// method blocks until the ResourceManager recorded it or ctx ends, and is
// idempotent.
type ResourceManager interface {
	RegisterJobMaster(ctx context.Context, jobID, jobMasterAddress string, gw resourcemanager.JobMasterGateway) error
	DeclareResourceRequirements(ctx context.Context, jobID string, slots int) error
	DisconnectJobMaster(ctx context.Context, jobID string, cause error) error
}

// Config of one JobMaster.
type Config struct {
	Scheduler         scheduler.Config
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
	// RPCFailureThreshold is how many consecutive heartbeat calls may fail
	// with the TaskManager unreachable before it counts as lost
	// (heartbeat.rpc-failure-threshold); 0 or less disables it.
	RPCFailureThreshold int
	RPCTimeout          time.Duration
	// Address is the JobManager's RPC address TaskManagers reach it at.
	Address string
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
	sched *scheduler.Scheduler
	start time.Time

	tms     map[string]*taskManager
	hb      *heartbeat.Monitor[string]
	blobs   map[string][]byte
	metrics map[subtaskKey]*attemptMetrics // newest task I/O metrics per subtask
	// accumulators of the newest FINISHED attempt per subtask, and their
	// bytes in all.
	accumulators     map[subtaskKey]attemptAccumulators
	accumulatorBytes int
	execResult       *restapi.JobExecutionResult // once the job is globally terminal
	wake             *time.Timer
	statusAt         map[scheduler.JobStatus]time.Time
	pending          int // outgoing calls still running after the job ended
	ended            bool

	doneOnce sync.Once
	done     chan struct{}
	result   Result
	final    Snapshot // the views as the job ended, for the Dispatcher's history
}

type taskManager struct {
	// unreachable counts consecutive heartbeats that failed to connect.
	unreachable int
	loc         eg.TaskManagerLocation
	conn        *grpc.ClientConn
	client      pb.TaskExecutorServiceClient
}

// New builds the job's ExecutionGraph and scheduler. Errors wrap
// jobgraph.ErrInvalid or scheduler.ErrInvalidConfig.
func New(cfg Config, jg *jobgraph.JobGraph, rm ResourceManager, log zerolog.Logger) (*JobMaster, error) {
	if cfg.RPCTimeout <= 0 {
		cfg.RPCTimeout = 10 * time.Second
	}
	var graphID [8]byte
	_, _ = rand.Read(graphID[:])
	sched, err := scheduler.New(cfg.Scheduler, jg, binary.BigEndian.Uint64(graphID[:]))
	if err != nil {
		return nil, err
	}
	return &JobMaster{
		cfg: cfg, id: randomID(), jobID: jg.JobID, jg: jg, rm: rm, sched: sched,
		log:          log.With().Str("job_id", jg.JobID).Str("job", jg.Name).Logger(),
		mb:           mailbox.New(),
		tms:          map[string]*taskManager{},
		hb:           heartbeat.New[string](cfg.HeartbeatTimeout),
		blobs:        map[string][]byte{},
		metrics:      map[subtaskKey]*attemptMetrics{},
		accumulators: map[subtaskKey]attemptAccumulators{},
		statusAt:     map[scheduler.JobStatus]time.Time{},
		done:         make(chan struct{}),
	}, nil
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
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

// Run drives the job until it ends or ctx ends. It blocks.
func (jm *JobMaster) Run(ctx context.Context) {
	jm.start = time.Now()
	jm.statusAt[scheduler.JobCreated] = jm.start
	jm.wake = time.AfterFunc(time.Hour, func() { jm.mb.Post(func() { jm.step(scheduler.Tick{}) }) })
	jm.wake.Stop()
	ticker := time.NewTicker(jm.cfg.HeartbeatInterval)
	tickerDone := make(chan struct{})
	stopTicker := make(chan struct{})
	go func() {
		defer close(tickerDone)
		for {
			select {
			case <-ticker.C:
				jm.mb.Post(jm.heartbeatTick)
			case <-stopTicker:
				return
			}
		}
	}()
	jm.mb.Post(jm.connectResourceManager)
	jm.mb.Run(ctx)
	ticker.Stop()
	close(stopTicker)
	<-tickerDone
	jm.wake.Stop()
	for _, tm := range jm.tms {
		_ = tm.conn.Close()
	}
	if !jm.ended {
		jm.result = Result{Status: jm.sched.Status(), Cause: errors.New("jobmaster: stopped before the job ended")}
		jm.final = jm.snapshot()
	}
	jm.doneOnce.Do(func() { close(jm.done) })
}

func (jm *JobMaster) now() time.Duration { return time.Since(jm.start) }

func (jm *JobMaster) connectResourceManager() {
	mailbox.Go(jm.mb, func(ctx context.Context) (struct{}, error) {
		ctx, cancel := context.WithTimeout(ctx, jm.cfg.RPCTimeout)
		defer cancel()
		return struct{}{}, jm.rm.RegisterJobMaster(ctx, jm.jobID, jm.cfg.Address, jm)
	}, func(_ struct{}, err error) {
		if err != nil {
			jm.log.Warn().Err(err).Msg("registering with the ResourceManager failed; retrying")
			time.AfterFunc(time.Second, func() { jm.mb.Post(jm.connectResourceManager) })
			return
		}
		if jm.sched.Status() == scheduler.JobCreated {
			jm.step(scheduler.StartScheduling{})
		}
	})
}

// step feeds one event to the core and carries out its Ready.
func (jm *JobMaster) step(ev scheduler.Event) (scheduler.Ready, error) {
	err := jm.sched.Step(jm.now(), ev)
	r := jm.sched.Ready()
	jm.execute(&r)
	return r, err
}

func (jm *JobMaster) execute(r *scheduler.Ready) {
	for _, c := range r.JobStatus {
		jm.statusAt[c.To] = time.Now()
		ev := jm.log.Info()
		if c.Cause != nil {
			ev = jm.log.Warn().Err(c.Cause)
		}
		ev.Str("from", c.From.String()).Str("to", c.To.String()).Msg("job status changed")
	}
	for _, b := range r.OffloadedBlobs {
		jm.blobs[b.Key] = b.Data
	}
	if r.ResourceRequirements != nil {
		n := *r.ResourceRequirements
		jm.call("declare resource requirements", func(ctx context.Context) error {
			return jm.rm.DeclareResourceRequirements(ctx, jm.jobID, n)
		}, nil)
	}
	for _, d := range r.Deployments {
		jm.deploy(d)
	}
	for _, c := range r.Cancellations {
		tm := jm.tms[c.TaskManager.ID]
		if tm == nil {
			continue // its loss is handled by the scheduler
		}
		req := &pb.CancelTaskRequest{JobId: jm.jobID, Attempt: attemptProto(c.Attempt)}
		jm.call("cancel task", func(ctx context.Context) error { _, err := tm.client.CancelTask(ctx, req); return err }, nil)
	}
	for _, pr := range r.PartitionReleases {
		tm := jm.tms[pr.TaskManagerID]
		if tm == nil {
			continue
		}
		req := &pb.ReleasePartitionsRequest{JobId: jm.jobID}
		for _, p := range pr.Partitions {
			req.Partitions = append(req.Partitions, &pb.ResultPartitionIDProto{ResultId: string(p.Result), PartitionIndex: p.Partition, Producer: attemptProto(p.Producer)})
		}
		jm.call("release partitions", func(ctx context.Context) error { _, err := tm.client.ReleasePartitions(ctx, req); return err }, nil)
	}
	for _, sr := range r.SlotReleases {
		tm := jm.tms[sr.TaskManagerID]
		if tm == nil {
			continue
		}
		req := &pb.FreeSlotRequest{AllocationId: string(sr.Allocation), Cause: sr.Cause}
		jm.call("free slot", func(ctx context.Context) error { _, err := tm.client.FreeSlot(ctx, req); return err }, nil)
	}
	if r.HasWakeAt {
		jm.wake.Reset(max(0, r.WakeAt-jm.now()))
	}
	if jm.sched.Status().IsGloballyTerminal() && !jm.ended {
		jm.endJob()
	}
}

func (jm *JobMaster) deploy(d scheduler.Deployment) {
	tm := jm.tms[d.TaskManager.ID]
	id := attemptID(d.Descriptor.Attempt)
	if tm == nil {
		jm.step(scheduler.DeploymentFailed{Attempt: id, Cause: fmt.Errorf("TaskManager %s is not connected", d.TaskManager.ID)})
		return
	}
	req := &pb.SubmitTaskRequest{JobId: jm.jobID, JobMasterId: jm.id, Tdd: d.Descriptor}
	jm.call("submit task", func(ctx context.Context) error { _, err := tm.client.SubmitTask(ctx, req); return err },
		func(err error) { jm.step(scheduler.DeploymentFailed{Attempt: id, Cause: err}) })
}

// call runs an outgoing RPC with the RPC timeout; onError runs on the mailbox.
func (jm *JobMaster) call(what string, rpc func(ctx context.Context) error, onError func(error)) {
	jm.pending++
	mailbox.Go(jm.mb, func(ctx context.Context) (struct{}, error) {
		ctx, cancel := context.WithTimeout(ctx, jm.cfg.RPCTimeout)
		defer cancel()
		return struct{}{}, rpc(ctx)
	}, func(_ struct{}, err error) {
		jm.pending--
		if err != nil {
			jm.log.Warn().Err(err).Str("call", what).Msg("outgoing call failed")
			if onError != nil && !jm.ended {
				onError(err)
			}
		}
		jm.maybeClose()
	})
}

// endJob tells the ResourceManager the job is done; the mailbox closes once
// the last outgoing call (slot releases) returned.
func (jm *JobMaster) endJob() {
	jm.ended = true
	st := jm.sched.Status()
	var cause error
	if h := jm.sched.ExceptionHistory(); st == scheduler.JobFailed && len(h) > 0 {
		cause = h[len(h)-1].Cause
	}
	jm.result = Result{Status: st, Cause: cause}
	jm.call("disconnect from ResourceManager", func(ctx context.Context) error {
		return jm.rm.DisconnectJobMaster(ctx, jm.jobID, fmt.Errorf("job %s", st))
	}, nil)
	for _, tm := range jm.tms {
		req := &pb.DisconnectJobManagerRequest{JobId: jm.jobID, Cause: fmt.Sprintf("job %s", st)}
		c := tm.client
		jm.call("disconnect TaskManager", func(ctx context.Context) error { _, err := c.DisconnectJobManager(ctx, req); return err }, nil)
	}
}

func (jm *JobMaster) maybeClose() {
	if jm.ended && jm.pending == 0 {
		jm.final = jm.snapshot()
		jm.log.Info().Str("status", jm.result.Status.String()).Msg("job master stopped")
		jm.mb.Close()
	}
}

func (jm *JobMaster) heartbeatTick() {
	if jm.ended {
		return
	}
	now := time.Now()
	for _, id := range jm.hb.Expired(now) {
		jm.log.Warn().Str("resource_id", id).Dur("timeout", jm.cfg.HeartbeatTimeout).Msg("TaskManager heartbeat timed out")
		jm.dropTaskManager(id, fmt.Errorf("heartbeat of TaskManager %s timed out after %v", id, jm.cfg.HeartbeatTimeout))
	}
	for id, tm := range jm.tms {
		id, c := id, tm.client
		req := &pb.HeartbeatRequest{SenderId: jm.id, JobId: jm.jobID}
		mailbox.Go(jm.mb, func(ctx context.Context) (*pb.TaskManagerHeartbeatResponse, error) {
			ctx, cancel := context.WithTimeout(ctx, jm.cfg.HeartbeatInterval+jm.cfg.HeartbeatTimeout)
			defer cancel()
			return c.HeartbeatFromJobManager(ctx, req)
		}, func(resp *pb.TaskManagerHeartbeatResponse, err error) {
			tm := jm.tms[id]
			if tm == nil || tm.client != c {
				return // dropped or replaced meanwhile
			}
			if status.Code(err) == codes.Unavailable {
				// The process is gone (connection refused): Flink's
				// heartbeat.rpc-failure-threshold notices this without
				// waiting for the heartbeat timeout.
				if tm.unreachable++; jm.cfg.RPCFailureThreshold > 0 && tm.unreachable >= jm.cfg.RPCFailureThreshold {
					jm.log.Warn().Str("resource_id", id).Int("failed_heartbeats", tm.unreachable).Err(err).Msg("TaskManager unreachable")
					jm.dropTaskManager(id, fmt.Errorf("TaskManager %s unreachable for %d heartbeats: %w", id, tm.unreachable, err))
				}
				return
			}
			if err == nil {
				tm.unreachable = 0
			}
			if err == nil && jm.hb.Tracked(id) {
				jm.hb.Seen(id, time.Now())
				for _, m := range resp.GetMetrics() {
					jm.recordMetrics(m, false)
				}
			}
		})
	}
}

func (jm *JobMaster) dropTaskManager(id string, cause error) {
	tm := jm.tms[id]
	if tm == nil {
		return
	}
	delete(jm.tms, id)
	jm.hb.Remove(id)
	_ = tm.conn.Close()
	jm.step(scheduler.TaskManagerLost{TaskManagerID: id, Cause: failover.EnvironmentError(cause)})
}

// ---- called by the ResourceManager ----

// NotifyNotEnoughResources implements resourcemanager.JobMasterGateway.
func (jm *JobMaster) NotifyNotEnoughResources(acquired int) {
	jm.mb.Post(func() { jm.step(scheduler.NotEnoughResources{Acquired: acquired}) })
}

// NotifyResourceAllocationFailed implements
// resourcemanager.ResourceAllocationFailureNotifier: the ResourceManager
// could not start TaskManagers, so waiting slot requests fail now rather
// than at slot.request.timeout.
func (jm *JobMaster) NotifyResourceAllocationFailed(cause error) {
	jm.mb.Post(func() { jm.step(scheduler.ResourceAllocationFailed{Cause: cause}) })
}

// HeartbeatFromResourceManager implements resourcemanager.JobMasterGateway.
func (jm *JobMaster) HeartbeatFromResourceManager(ctx context.Context) error {
	_, err := mailbox.Call(ctx, jm.mb, func() (struct{}, error) { return struct{}{}, nil })
	return err
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
		if tm := jm.tms[loc.ResourceId]; tm == nil || tm.loc.ID != loc.ResourceId || tm.conn.Target() != loc.RpcAddress {
			conn, err := grpc.NewClient(loc.RpcAddress, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "jobmaster: TaskManager address %q: %v", loc.RpcAddress, err)
			}
			if tm != nil {
				_ = tm.conn.Close()
			}
			jm.tms[loc.ResourceId] = &taskManager{
				loc:  eg.TaskManagerLocation{ID: loc.ResourceId, Host: loc.Host, DataAddress: loc.DataAddress},
				conn: conn, client: pb.NewTaskExecutorServiceClient(conn),
			}
			jm.log.Info().Str("resource_id", loc.ResourceId).Str("address", loc.RpcAddress).Msg("TaskManager registered")
		}
		jm.hb.Seen(loc.ResourceId, time.Now())
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
	cause := failover.Decode(req.Failure)
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
		jm.dropTaskManager(req.ResourceId, fmt.Errorf("TaskManager %s disconnected: %s", req.ResourceId, req.Cause))
		return &pb.Ack{}, nil
	})
}

// ReportPartitionsLost: a TaskManager lost partitions of this job that it
// had produced (its job runner died). Called by TaskManagers through the
// JobMasterService; idempotent.
// TODO(#9): rerun their producers (scheduler event).
func (jm *JobMaster) ReportPartitionsLost(ctx context.Context, req *pb.ReportPartitionsLostRequest) (*pb.Ack, error) {
	return nil, status.Error(codes.Unimplemented, "jobmaster: ReportPartitionsLost is not implemented yet")
}

// NotifyTaskManagerLost implements resourcemanager.JobMasterGateway: the
// provider reported the TaskManager's worker ended, so it is dropped now
// rather than after a heartbeat timeout.
func (jm *JobMaster) NotifyTaskManagerLost(resourceID string, cause error) {
	jm.mb.Post(func() { jm.dropTaskManager(resourceID, cause) })
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

var (
	_ resourcemanager.JobMasterGateway                  = (*JobMaster)(nil)
	_ resourcemanager.ResourceAllocationFailureNotifier = (*JobMaster)(nil)
)
