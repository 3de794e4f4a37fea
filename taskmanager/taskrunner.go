package taskmanager

import (
	"context"
	"sync"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/internal/clock"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/taskmanager/invokable"
)

// TaskRunner is the seam between the TaskExecutor's bookkeeping (slots,
// task records, state reports, partitions), which lives on its mailbox,
// and what actually executes tasks. The default runs built-in invokables
// as goroutines of the TaskManager and tasks of a job binary in the job's
// runner process (package runner); the fault simulator plugs in simulated
// tasks. Methods other than Close are called on the TaskExecutor's
// mailbox and must not block.
type TaskRunner interface {
	// DataAddress returns the job's data address on this TaskManager,
	// opening a data port for the job if it has none. The TaskExecutor
	// advertises it to the job's JobMaster when it registers, so it stays
	// the same as long as the job's runner lives; only ReleaseJob ends
	// it. "" means the job has no data port.
	DataAddress(jobID string) (string, error)
	// StartTask starts the task req describes and returns at once; the
	// task reports through tc. The TaskExecutor has checked req.
	StartTask(req *pb.SubmitTaskRequest, tc TaskContext) RunningTask
	// ReleasePartitions forwards a partition release to whatever holds the
	// data. Best effort.
	ReleasePartitions(req *pb.ReleasePartitionsRequest)
	// ReleaseJob ends the job here: its runner stops (tasks still running
	// in it end) and its data port closes. The end of a released runner is
	// never reported to RunnerLost. Idempotent; a later DataAddress or
	// StartTask of the job starts afresh.
	ReleaseJob(jobID string)
	// Close ends every task and runner and waits for them. Called once,
	// off the mailbox, after it stopped. Blocking.
	Close()
}

// TaskContext is what a task needs from its TaskExecutor.
type TaskContext struct {
	// JobMaster serves offloaded deployment data (GetBlob);
	// JobMasterAddress serves the job binary (BlobService).
	JobMaster        pb.JobMasterServiceClient
	JobMasterAddress string
	// State reports a transition before the task's end (INITIALIZING,
	// RUNNING), in order. Safe from any goroutine; never after Ended.
	State func(state string)
	// Ended reports the task's end, exactly once. Safe from any goroutine.
	Ended func(TaskResult)
}

// TaskResult is how a task ended.
type TaskResult struct {
	// Err is nil if the task finished, or ended after Cancel; otherwise why
	// it failed, classified with package failover's marks.
	Err error
	// Final is what the task's runner reported with its end: the task's
	// I/O counters and, once FINISHED, its accumulators; nil counts as
	// zeros.
	Final *pb.RunnerTaskState
	// Runner names the job runner incarnation that ran the task, as
	// TaskRunnerHost.RunnerLost does; 0 for a task run in-process. The
	// partitions the task produced live and die with that runner.
	Runner uint64
}

// RunningTask is a started task.
type RunningTask interface {
	// Cancel asks the task to stop; it ends soon after with Ended.
	// Idempotent, non-blocking, called on the mailbox.
	Cancel()
	// Metrics returns the task's latest I/O metrics sample, or nil if
	// there is none. Non-blocking; the result must not be modified.
	Metrics() *pb.TaskIOMetrics
}

// CheckpointingTask is a RunningTask that takes checkpoints: tasks of a job
// binary, which the job's runner runs. The TaskExecutor declines the
// triggers of a task that is not one (a built-in invokable) with the
// reason. Both methods are called on the mailbox and must not block; they
// forward in order, and a trigger that cannot be delivered is declined
// through TaskRunnerHost.CheckpointReport.
type CheckpointingTask interface {
	RunningTask
	// TriggerCheckpoint starts checkpoint req.CheckpointId at the task.
	TriggerCheckpoint(req *pb.TriggerCheckpointRequest)
	// NotifyCheckpoint tells the task a checkpoint completed or was
	// aborted. Best effort: a lost notice is subsumed by the next.
	NotifyCheckpoint(req *pb.NotifyCheckpointRequest)
}

// OperatorEventTask is a RunningTask whose operators take events from
// their coordinators in the JobMaster.
type OperatorEventTask interface {
	RunningTask
	// SendOperatorEvent hands an event to the task's operator; it returns
	// at once and keeps the order of its calls (and of the checkpoint
	// calls before it). Called on the TaskExecutor's mailbox.
	SendOperatorEvent(req *pb.OperatorEventRequest)
}

// TaskRunnerHost is what a TaskRunner is given when the TaskExecutor
// builds it (Config.TaskRunner).
type TaskRunnerHost struct {
	Log   zerolog.Logger
	Clock clock.Clock
	// RunnerLost reports that a job runner ended without being released
	// (it crashed, or was killed for not heartbeating): the partitions its
	// tasks produced are gone. runner is the incarnation TaskResult.Runner
	// names. Safe from any goroutine; the TaskExecutor reports the loss to
	// the job's JobMaster.
	RunnerLost func(jobID string, runner uint64, cause error)
	// CheckpointReport relays a task's checkpoint acknowledgement or
	// decline to the job's JobMaster, behind what was sent to it before.
	// Safe from any goroutine, non-blocking; every report is delivered
	// (none replaces another).
	CheckpointReport func(jobID string, r *pb.RunnerCheckpointReport)
}

// processTaskRunner is the default TaskRunner: built-in invokables run as
// goroutines here, tasks of a job binary in the job's runner process.
type processTaskRunner struct {
	pool *runnerPool
	ctx  context.Context // ends at Close; parent of in-process tasks
	stop context.CancelFunc
	wg   sync.WaitGroup
}

func newProcessTaskRunner(pool *runnerPool) *processTaskRunner {
	ctx, stop := context.WithCancel(context.Background())
	return &processTaskRunner{pool: pool, ctx: ctx, stop: stop}
}

func (r *processTaskRunner) DataAddress(jobID string) (string, error) {
	return r.pool.dataAddress(jobID)
}

func (r *processTaskRunner) ReleasePartitions(req *pb.ReleasePartitionsRequest) {
	r.pool.releasePartitions(req)
}

func (r *processTaskRunner) ReleaseJob(jobID string) { r.pool.release(jobID) }

func (r *processTaskRunner) Close() {
	r.stop()
	r.pool.close()
	r.wg.Wait()
}

func (r *processTaskRunner) StartTask(req *pb.SubmitTaskRequest, tc TaskContext) RunningTask {
	ctx, cancel := context.WithCancel(r.ctx)
	if req.Tdd.GetJobInformation().GetJobBinaryKey() != "" {
		return r.pool.startTask(ctx, cancel, req, tc)
	}
	t := &localTask{cancel: cancel}
	tdd, ti := req.Tdd, req.Tdd.TaskInformation
	env := invokable.Env{
		JobID: req.JobId, JobVertexID: ti.JobVertexId, TaskName: ti.TaskName,
		SubtaskIndex: int(tdd.Attempt.SubtaskIndex), Parallelism: int(ti.NumberOfSubtasks),
		AttemptNumber: int(tdd.Attempt.AttemptNumber), Config: ti.Config,
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer cancel()
		err := invokable.Run(ctx, ti.Invokable, env, tc.State)
		tc.Ended(TaskResult{Err: err})
	}()
	return t
}

// localTask is a built-in invokable running as a goroutine here.
type localTask struct{ cancel context.CancelFunc }

func (t *localTask) Cancel() { t.cancel() }

// Metrics: a built-in task exchanges no data; its counters are zeros.
func (t *localTask) Metrics() *pb.TaskIOMetrics { return nil }
