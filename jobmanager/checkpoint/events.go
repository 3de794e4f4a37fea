package checkpoint

import (
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/rpc/pb"
)

// Event is an input to Coordinator.Step.
type Event interface{ isEvent() }

// Tick says logical time advanced: due triggers and timeouts fire.
type Tick struct{}

// Task is the current attempt of one subtask and its state.
type Task struct {
	Attempt eg.ExecutionAttemptID
	State   eg.ExecutionState
}

// TasksChanged carries the current attempt of every subtask of the job
// (level-triggered: the whole set each time). Checkpoints are triggered only
// when every task is RUNNING or FINISHED; an attempt a pending checkpoint
// waits for that is no longer RUNNING aborts it.
type TasksChanged struct{ Tasks []Task }

// TriggerSavepoint asks for a savepoint. Its outcome comes back in
// Ready.Savepoints under RequestID. Dir empty: Config.SavepointsDir.
type TriggerSavepoint struct {
	RequestID string
	Dir       string
	// Type is SAVEPOINT, SAVEPOINT_SUSPEND (stop) or SAVEPOINT_TERMINATE
	// (stop --drain).
	Type pb.CheckpointType
}

// Acknowledge is a task's report that it wrote its state for checkpoint ID.
// A duplicate is ignored; an acknowledgement of a checkpoint that was
// aborted, or from an attempt the checkpoint does not wait for, has its
// state files discarded.
type Acknowledge struct {
	Attempt   eg.ExecutionAttemptID
	ID        int64
	Operators []*pb.OperatorSubtaskStateHandle
	Metrics   *pb.CheckpointMetrics
}

// Decline is a task's report that it could not take checkpoint ID: the
// checkpoint is aborted (a failure for tolerable-failed-checkpoints).
type Decline struct {
	Attempt eg.ExecutionAttemptID
	ID      int64
	Reason  error
}

// EndOfData says a task attempt ended its data and waits for a final
// checkpoint (FLIP-147). Once every unfinished task has, the next periodic
// checkpoint is due at once (min-pause and max-concurrent still apply):
// a bounded job need not wait up to an interval to end. Repeats and
// attempts that are not current are ignored; a notice may come before
// the attempt's RUNNING state.
type EndOfData struct{ Attempt eg.ExecutionAttemptID }

// Failover says tasks are being restarted: every pending checkpoint and
// savepoint is aborted (not counted as a checkpoint failure).
type Failover struct{ Cause error }

// MetadataWritten is the outcome of a Ready.WriteMetadata.
type MetadataWritten struct {
	ID  int64
	Err error
}

// JobEnded says the job reached a globally terminal status: pending
// checkpoints are aborted and completed ones discarded as
// Config.Retention says. Later events are ignored.
type JobEnded struct{ Status JobEndStatus }

// JobEndStatus is how the job ended.
type JobEndStatus int

const (
	JobFinished JobEndStatus = iota + 1
	JobCanceled
	JobFailed
	// JobSuspended: the JobMaster stopped without ending the job
	// (checkpoints stay for a later recovery).
	JobSuspended
)

func (Tick) isEvent()             {}
func (TasksChanged) isEvent()     {}
func (TriggerSavepoint) isEvent() {}
func (Acknowledge) isEvent()      {}
func (Decline) isEvent()          {}
func (Failover) isEvent()         {}
func (EndOfData) isEvent()        {}
func (MetadataWritten) isEvent()  {}
func (JobEnded) isEvent()         {}
