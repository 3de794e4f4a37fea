package scheduler

import (
	"time"

	eg "github.com/gofl/gofl/jobmanager/executiongraph"
)

// Event is an input to Scheduler.Step. The driver (the JobMaster) turns RPCs,
// timers and its own decisions into events.
type Event interface{ isEvent() }

// StartScheduling starts the job: the strategy schedules its first tasks.
type StartScheduling struct{}

// Tick tells the scheduler that logical time has advanced; due timers fire.
type Tick struct{}

// CancelJob cancels every task and ends the job CANCELED.
type CancelJob struct{}

// FailJob fails the job as a whole (a global failure); the restart strategy
// and restart-all decide whether it restarts.
type FailJob struct{ Cause error }

// SlotOffer is one slot a TaskManager offers.
type SlotOffer struct {
	Allocation eg.AllocationID
	SlotIndex  int
}

// SlotsOffered carries a TaskManager's offer. The reply is in
// Ready.SlotOfferReplies. Offering a slot the pool already holds is accepted
// again (idempotent).
type SlotsOffered struct {
	TaskManager eg.TaskManagerLocation
	Slots       []SlotOffer
}

// TaskManagerLost says a TaskManager is gone (heartbeat timeout, provider
// report, disconnect). Its slots and the tasks in them fail, and the
// BLOCKING partitions it held are lost: their producers rerun together with
// their consumers, in the same failover.
type TaskManagerLost struct {
	TaskManagerID string
	Cause         error
	// FencedAt, if not zero, is when the TaskManager has surely stopped
	// its tasks by itself, if it still runs (it was lost by a heartbeat
	// timeout, not known dead): the attempts it ran restart no earlier, so
	// that no subtask runs twice at once.
	FencedAt time.Duration
}

// SlotLost says one slot is no longer usable (freed by its TaskManager).
type SlotLost struct {
	Allocation eg.AllocationID
	Cause      error
}

// TaskStateChanged is a TaskManager's report of a task state transition.
// Cause explains FAILED.
type TaskStateChanged struct {
	Attempt eg.ExecutionAttemptID
	State   eg.ExecutionState
	Cause   error
}

// DeploymentFailed says submitting a TDD to its TaskManager failed (an
// error or no answer in time). Ready cancels the attempt there
// (TaskManager, or the attempt's location when empty). If the TaskManager
// refused it (OutcomeUnknown false) the attempt fails. If no answer came
// (OutcomeUnknown), the TaskManager may run it all the same: the failure is
// handled, but the attempt stays CANCELING until the TaskManager confirms
// it stopped (its final state, or a cancel answered "not running") or is
// lost, so its subtask never runs twice at once.
type DeploymentFailed struct {
	Attempt        eg.ExecutionAttemptID
	TaskManager    eg.TaskManagerLocation
	Cause          error
	OutcomeUnknown bool
}

// DeploymentAcknowledged says the TaskManager accepted the TDD of Attempt
// (SubmitTask answered). From then on the TaskManager's reports must list
// the attempt while it runs.
type DeploymentAcknowledged struct{ Attempt eg.ExecutionAttemptID }

// TaskManagerReport is what a TaskManager answered to a heartbeat: the
// attempts of the job it runs and the job's result partitions it holds.
// The scheduler reconciles it with what it expects there (Flink's
// ExecutionDeploymentReconciler): attempts it does not know or no longer
// wants are cancelled; acknowledged attempts the TaskManager does not run
// fail, and tracked BLOCKING partitions of finished producers that the
// TaskManager no longer holds are lost (as in PartitionsLost), once missing
// from its reports for Config.MissingTaskGrace. Partitions are checked
// only on TaskManagers that have listed partitions in a report before (an
// older TaskManager does not report them). Level-triggered: every report is compared
// in full, so a lost message is made good by the next report.
type TaskManagerReport struct {
	TaskManagerID string
	// RequestedAt is the logical time the heartbeat request was sent. Only
	// what was acknowledged (deployed, finished) strictly before it must be
	// in the report.
	RequestedAt time.Duration
	Running     []eg.ExecutionAttemptID
	Partitions  []eg.ResultPartitionID
}

// PartitionsLost says a TaskManager lost result partitions it held (its
// job runner died). Partitions of older attempts, or no longer tracked on
// that TaskManager, are ignored. The producers of the others rerun together
// with their consumers.
type PartitionsLost struct {
	TaskManagerID string
	Partitions    []eg.ResultPartitionID
	Cause         error
}

// PartitionConsumable says a PIPELINED partition has produced data.
type PartitionConsumable struct{ Partition eg.ResultPartitionID }

// NotEnoughResources is the ResourceManager saying the declared requirements
// cannot be met: Acquired slots is all the job will get for now.
type NotEnoughResources struct{ Acquired int }

// ResourceAllocationFailed is the ResourceManager giving up on providing
// slots (its provider failed to start TaskManagers again and again): every
// bulk still waiting for slots fails with Cause, whatever the strategy.
type ResourceAllocationFailed struct{ Cause error }

func (StartScheduling) isEvent()          {}
func (Tick) isEvent()                     {}
func (CancelJob) isEvent()                {}
func (FailJob) isEvent()                  {}
func (SlotsOffered) isEvent()             {}
func (TaskManagerLost) isEvent()          {}
func (SlotLost) isEvent()                 {}
func (TaskStateChanged) isEvent()         {}
func (DeploymentFailed) isEvent()         {}
func (DeploymentAcknowledged) isEvent()   {}
func (TaskManagerReport) isEvent()        {}
func (PartitionsLost) isEvent()           {}
func (PartitionConsumable) isEvent()      {}
func (NotEnoughResources) isEvent()       {}
func (ResourceAllocationFailed) isEvent() {}
