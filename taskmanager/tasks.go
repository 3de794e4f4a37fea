package taskmanager

import (
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/failure"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/taskmanager/invokable"
	"github.com/gofl/gofl/taskmanager/runner"
)

// Execution state names reported to the JobMaster.
const (
	StateInitializing = "INITIALIZING"
	StateRunning      = "RUNNING"
	StateFinished     = "FINISHED"
	StateCanceled     = "CANCELED"
	StateFailed       = "FAILED"
)

// task is one running task attempt. The TaskRunner runs it; the record
// lives on the mailbox and is removed when the task ended.
type task struct {
	key          string
	attempt      *pb.ExecutionAttemptID
	jobID        string
	allocationID string
	name         string
	jobName      string
	invokable    string
	produced     []*pb.ResultPartitionDeploymentDescriptor
	run          RunningTask
	ended        bool
	// canceled is set once the task was asked to stop. cancelCause is nil
	// if the JobMaster asked (CancelTask, FreeSlot): the task ends
	// CANCELED. Otherwise the TaskManager stopped it for that reason (it
	// shuts down, lost the JobMaster) and it ends FAILED with an
	// environment failure, which the JobMaster restarts.
	canceled    bool
	cancelCause error
	log         zerolog.Logger
}

// attemptKey renders an ExecutionAttemptID as a map key and log field.
func attemptKey(a *pb.ExecutionAttemptID) string {
	if a == nil {
		return ""
	}
	return fmt.Sprintf("%016x/%s/%d/%d", a.Graph, a.JobVertexId, a.SubtaskIndex, a.AttemptNumber)
}

// PanicError is the failure of a task whose invokable panicked.
type PanicError = invokable.PanicError

// submitTask is SubmitTask on the mailbox.
func (te *TaskExecutor) submitTask(req *pb.SubmitTaskRequest) error {
	if te.stopping {
		return status.Error(codes.Unavailable, "TaskManager is shutting down")
	}
	tdd := req.Tdd
	if tdd == nil || tdd.Attempt == nil || tdd.TaskInformation == nil {
		return status.Error(codes.InvalidArgument, "SubmitTask needs a TaskDeploymentDescriptor with an attempt and task information")
	}
	if ji := tdd.JobInformation; ji != nil && ji.JobId != "" && ji.JobId != req.JobId {
		return status.Errorf(codes.InvalidArgument, "TDD is for job %s, the request for job %s", ji.JobId, req.JobId)
	}
	key := attemptKey(tdd.Attempt)
	jc := te.jobs[req.JobId]
	switch {
	case jc == nil || !jc.connected:
		return status.Errorf(codes.FailedPrecondition, "cannot run task %s: this TaskManager is not connected to the JobMaster of job %s", key, req.JobId)
	case req.JobMasterId != "" && req.JobMasterId != jc.jobMasterID:
		return status.Errorf(codes.FailedPrecondition, "cannot run task %s: it comes from JobMaster %s, but job %s is led by %s", key, req.JobMasterId, req.JobId, jc.jobMasterID)
	case te.ran[req.JobId].has(key, te.clk.Now()):
		// A retried or duplicated SubmitTask: the attempt runs, or ran,
		// here already and must not run again.
		return status.Errorf(codes.AlreadyExists, "task %s already runs or ran here", key)
	case te.cancelled[req.JobId].has(key, te.clk.Now()):
		// The cancel overtook its deployment: running it now would run an
		// attempt the JobMaster has given up.
		jc.log.Warn().Str("attempt", key).Msg("refused the deployment of a task the JobMaster cancelled before")
		return status.Errorf(codes.FailedPrecondition, "cannot run task %s: the JobMaster cancelled this attempt before its deployment arrived", key)
	}
	s := te.slotByAllocation(tdd.AllocationId)
	switch {
	// NotFound: the JobMaster holds a slot this TaskManager does not (any
	// more); it drops it from its pool.
	case s == nil:
		return status.Errorf(codes.NotFound, "cannot run task %s: no slot is allocated to allocation %q", key, tdd.AllocationId)
	case s.jobID != req.JobId:
		return status.Errorf(codes.NotFound, "cannot run task %s: slot %d (allocation %s) belongs to job %s, not %s", key, s.index, s.allocationID, s.jobID, req.JobId)
	case s.releasing:
		return status.Errorf(codes.FailedPrecondition, "cannot run task %s: slot %d (allocation %s) is being freed", key, s.index, s.allocationID)
	}
	// A JobMaster deploying into a slot it was offered has accepted it, even
	// if its OfferSlots reply has not arrived yet (Flink's tryMarkSlotActive).
	s.active, s.kept = true, false
	if _, dup := te.tasks[key]; dup {
		return status.Errorf(codes.AlreadyExists, "task %s is already running", key)
	}
	remember(te.ran, req.JobId, key, te.clk.Now(), te.cfg.CancelTombstoneTTL)

	ti := tdd.TaskInformation
	t := &task{
		key: key, attempt: tdd.Attempt, jobID: req.JobId, allocationID: tdd.AllocationId,
		name: ti.TaskName, jobName: tdd.GetJobInformation().GetJobName(), invokable: ti.Invokable, produced: tdd.ProducedPartitions,
		log: jc.log.With().Str("attempt", key).Str("task", ti.TaskName).Logger(),
	}
	te.tasks[key] = t
	t.log.Info().Str("invokable", ti.Invokable).Int("slot", s.index).Msg("task submitted")
	t.run = te.exec.StartTask(req, TaskContext{
		JobMaster: jc.client, JobMasterAddress: jc.address,
		State: func(state string) {
			te.mb.Post(func() {
				if !t.ended {
					te.enqueueReport(&pb.UpdateTaskExecutionStateRequest{JobId: t.jobID, Attempt: t.attempt, State: state})
				}
			})
		},
		Ended: func(r TaskResult) { te.mb.Post(func() { te.taskEnded(t, r) }) },
	})
	return nil
}

// taskEnded runs on the mailbox when the task ended. r.Final is what the
// job runner reported with the terminal state: the task's I/O counters
// (nil counts as zeros, as for a built-in task) and, once FINISHED, its
// accumulator results.
func (te *TaskExecutor) taskEnded(t *task, r TaskResult) {
	if t.ended {
		t.log.Error().Msg("a task reported its end twice; ignored")
		return
	}
	t.ended = true
	delete(te.tasks, t.key)
	final, err := r.Final, r.Err
	metrics := final.GetMetrics()
	if err == nil && !t.canceled {
		// The runner runs user code: never relay more than the protocol allows.
		err = failure.NonRecoverable(runner.CheckAccumulators(final.GetAccumulators()))
	}
	if metrics == nil {
		metrics = &pb.TaskIOMetrics{Attempt: t.attempt, TimestampMs: te.clk.Now().UnixMilli()}
	}
	req := &pb.UpdateTaskExecutionStateRequest{JobId: t.jobID, Attempt: t.attempt, Metrics: metrics}
	switch {
	case t.canceled && t.cancelCause == nil:
		req.State = StateCanceled
		t.log.Info().Msg("task canceled")
	case t.canceled:
		req.State = StateFailed
		req.Failure = failureInfo(failure.EnvironmentError(t.cancelCause))
		t.log.Info().Str("cause", t.cancelCause.Error()).Msg("task stopped by the TaskManager; reported as failed")
	case err == nil:
		req.State, req.Accumulators = StateFinished, final.GetAccumulators()
		te.recordPartitions(t, r.Runner)
		t.log.Info().Msg("task finished")
	default:
		req.State = StateFailed
		req.Failure = failureInfo(err)
		t.log.Warn().Err(err).Str("failure_type", req.Failure.Type).Msg("task failed")
	}
	te.enqueueReport(req)
	if s := te.slotByAllocation(t.allocationID); s != nil && s.releasing && !te.slotHasTasks(s) {
		job := s.jobID
		te.releaseSlot(s)
		te.sendSlotReport()
		te.closeJobIfIdle(job)
	}
	te.maybeFinishShutdown()
}

func failureInfo(err error) *pb.FailureInfo { return failure.Encode(err) }

func (te *TaskExecutor) slotHasTasks(s *slot) bool {
	for _, t := range te.tasks {
		if t.allocationID == s.allocationID {
			return true
		}
	}
	return false
}

// cancelTask asks the task to stop. cause is nil when the JobMaster asked
// for it, which wins over any reason of the TaskManager's own.
func (te *TaskExecutor) cancelTask(t *task, cause error) {
	switch {
	case !t.canceled:
		t.canceled, t.cancelCause = true, cause
		ev := t.log.Info()
		if cause != nil {
			ev = ev.Str("cause", cause.Error())
		}
		ev.Msg("canceling task")
	case cause == nil:
		t.cancelCause = nil
	}
	t.run.Cancel()
}

// cancelTaskRPC is CancelTask on the mailbox; unknown or ended tasks are
// fine. The attempt is remembered, so a deployment of it arriving after
// the cancel is refused.
func (te *TaskExecutor) cancelTaskRPC(req *pb.CancelTaskRequest) (running bool) {
	key := attemptKey(req.Attempt)
	if req.Attempt != nil {
		remember(te.cancelled, req.JobId, key, te.clk.Now(), te.cfg.CancelTombstoneTTL)
	}
	if t := te.tasks[key]; t != nil && t.jobID == req.JobId {
		te.cancelTask(t, nil)
		return true
	}
	te.log.Debug().Str("job_id", req.JobId).Str("attempt", key).Bool("connected", te.jobs[req.JobId] != nil).
		Msg("cancel of an attempt not running here; remembered")
	return false
}

// remember adds a job's attempt to one of the TaskExecutor's attempt
// memories (te.ran, te.cancelled) for ttl.
func remember(m map[string]*tombstones, jobID, key string, now time.Time, ttl time.Duration) {
	ts := m[jobID]
	if ts == nil {
		ts = newTombstones(ttl, maxTombstonesPerJob)
		m[jobID] = ts
	}
	ts.add(key, now)
}

// pruneAttempts forgets expired attempts and jobs left without any.
func (te *TaskExecutor) pruneAttempts() {
	now := te.clk.Now()
	for _, m := range []map[string]*tombstones{te.cancelled, te.ran} {
		for job, ts := range m {
			if ts.prune(now); ts.len() == 0 {
				delete(m, job)
			}
		}
	}
}

// taskMetrics is the latest I/O metrics sample of a running task; built-in
// tasks, and runner tasks before their first sample, report zeros.
func (te *TaskExecutor) taskMetrics(t *task) *pb.TaskIOMetrics {
	if m := t.run.Metrics(); m != nil {
		return m
	}
	return &pb.TaskIOMetrics{Attempt: t.attempt, TimestampMs: te.clk.Now().UnixMilli()}
}

// maxTombstonesPerJob bounds a job's tombstones; the oldest go first.
const maxTombstonesPerJob = 10000

// tombstones remember cancelled attempts for a while (ttl), oldest first.
type tombstones struct {
	ttl     time.Duration
	max     int
	expires map[string]time.Time
	order   []string // insertion order = expiry order
}

func newTombstones(ttl time.Duration, max int) *tombstones {
	return &tombstones{ttl: ttl, max: max, expires: map[string]time.Time{}}
}

// add remembers key until now+ttl; a key already there keeps its expiry.
func (ts *tombstones) add(key string, now time.Time) {
	ts.prune(now)
	if _, ok := ts.expires[key]; ok {
		return
	}
	for len(ts.order) >= ts.max {
		delete(ts.expires, ts.order[0])
		ts.order = ts.order[1:]
	}
	ts.expires[key] = now.Add(ts.ttl)
	ts.order = append(ts.order, key)
}

func (ts *tombstones) has(key string, now time.Time) bool {
	if ts == nil {
		return false
	}
	ts.prune(now)
	_, ok := ts.expires[key]
	return ok
}

func (ts *tombstones) len() int {
	if ts == nil {
		return 0
	}
	return len(ts.expires)
}

func (ts *tombstones) prune(now time.Time) {
	for len(ts.order) > 0 && !ts.expires[ts.order[0]].After(now) {
		delete(ts.expires, ts.order[0])
		ts.order[0] = ""
		ts.order = ts.order[1:]
	}
	if len(ts.order) == 0 {
		ts.order = nil
	}
}
