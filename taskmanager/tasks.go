package taskmanager

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/mailbox"
	"github.com/gofl/gofl/jobmanager/failover"
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

// task is one running task attempt. Its goroutine runs the invokable; the
// record itself lives on the mailbox and is removed when the goroutine
// returned.
type task struct {
	key          string
	attempt      *pb.ExecutionAttemptID
	jobID        string
	allocationID string
	name         string
	invokable    string
	produced     []*pb.ResultPartitionDeploymentDescriptor
	cancel       context.CancelFunc
	canceled     bool
	log          zerolog.Logger
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
	}
	s := te.slotByAllocation(tdd.AllocationId)
	switch {
	case s == nil:
		return status.Errorf(codes.FailedPrecondition, "cannot run task %s: no slot is allocated to allocation %q", key, tdd.AllocationId)
	case s.jobID != req.JobId:
		return status.Errorf(codes.FailedPrecondition, "cannot run task %s: slot %d (allocation %s) belongs to job %s, not %s", key, s.index, s.allocationID, s.jobID, req.JobId)
	case s.releasing:
		return status.Errorf(codes.FailedPrecondition, "cannot run task %s: slot %d (allocation %s) is being freed", key, s.index, s.allocationID)
	}
	// A JobMaster deploying into a slot it was offered has accepted it, even
	// if its OfferSlots reply has not arrived yet (Flink's tryMarkSlotActive).
	s.active = true
	if _, dup := te.tasks[key]; dup {
		return status.Errorf(codes.AlreadyExists, "task %s is already running", key)
	}

	ti := tdd.TaskInformation
	ctx, cancel := context.WithCancel(te.mb.Context())
	t := &task{
		key: key, attempt: tdd.Attempt, jobID: req.JobId, allocationID: tdd.AllocationId,
		name: ti.TaskName, invokable: ti.Invokable, produced: tdd.ProducedPartitions, cancel: cancel,
		log: jc.log.With().Str("attempt", key).Str("task", ti.TaskName).Logger(),
	}
	te.tasks[key] = t
	env := invokable.Env{
		JobID: req.JobId, JobVertexID: ti.JobVertexId, TaskName: ti.TaskName,
		SubtaskIndex: int(tdd.Attempt.SubtaskIndex), Parallelism: int(ti.NumberOfSubtasks),
		AttemptNumber: int(tdd.Attempt.AttemptNumber), Config: ti.Config,
	}
	t.log.Info().Str("invokable", ti.Invokable).Int("slot", s.index).Msg("task submitted")
	if req.Tdd.GetJobInformation().GetJobBinaryKey() != "" {
		te.startRemoteTask(ctx, t, req, jc)
	} else {
		te.startTask(ctx, t, env)
	}
	return nil
}

// startTask runs the task on its own goroutine, owned by the mailbox.
func (te *TaskExecutor) startTask(ctx context.Context, t *task, env invokable.Env) {
	report := func(state string) {
		te.mb.Post(func() {
			te.enqueueReport(&pb.UpdateTaskExecutionStateRequest{JobId: t.jobID, Attempt: t.attempt, State: state})
		})
	}
	run := func(context.Context) (struct{}, error) {
		return struct{}{}, invokable.Run(ctx, t.invokable, env, report)
	}
	mailbox.Go(te.mb, run, func(_ struct{}, err error) { te.taskEnded(t, err, nil) })
}

// taskEnded runs on the mailbox when the task's goroutine returned. final
// is what the job runner reported with the terminal state: the task's I/O
// counters (nil counts as zeros, as for a built-in task) and, once
// FINISHED, its accumulator results.
func (te *TaskExecutor) taskEnded(t *task, err error, final *pb.RunnerTaskState) {
	delete(te.tasks, t.key)
	t.cancel()
	metrics := final.GetMetrics()
	if err == nil && !t.canceled {
		// The runner runs user code: never relay more than the protocol allows.
		err = failover.NonRecoverable(runner.CheckAccumulators(final.GetAccumulators()))
	}
	if metrics == nil {
		metrics = &pb.TaskIOMetrics{Attempt: t.attempt, TimestampMs: time.Now().UnixMilli()}
	}
	req := &pb.UpdateTaskExecutionStateRequest{JobId: t.jobID, Attempt: t.attempt, Metrics: metrics}
	switch {
	case t.canceled:
		req.State = StateCanceled
		t.log.Info().Msg("task canceled")
	case err == nil:
		req.State, req.Accumulators = StateFinished, final.GetAccumulators()
		te.recordPartitions(t)
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
		te.sendSlotReport(false)
		te.closeJobIfIdle(job)
	}
	te.maybeFinishShutdown()
}

func failureInfo(err error) *pb.FailureInfo { return failover.Encode(err) }

func (te *TaskExecutor) slotHasTasks(s *slot) bool {
	for _, t := range te.tasks {
		if t.allocationID == s.allocationID {
			return true
		}
	}
	return false
}

func (te *TaskExecutor) cancelTask(t *task) {
	if !t.canceled {
		t.canceled = true
		t.log.Info().Msg("canceling task")
	}
	t.cancel()
}

// cancelTaskRPC is CancelTask on the mailbox; unknown or ended tasks are fine.
func (te *TaskExecutor) cancelTaskRPC(req *pb.CancelTaskRequest) error {
	if t := te.tasks[attemptKey(req.Attempt)]; t != nil && t.jobID == req.JobId {
		te.cancelTask(t)
	}
	return nil
}
