package scheduler

import (
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
// report, disconnect). Its slots and the tasks in them fail.
type TaskManagerLost struct {
	TaskManagerID string
	Cause         error
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

// DeploymentFailed says submitting a TDD to its TaskManager failed.
type DeploymentFailed struct {
	Attempt eg.ExecutionAttemptID
	Cause   error
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
func (PartitionConsumable) isEvent()      {}
func (NotEnoughResources) isEvent()       {}
func (ResourceAllocationFailed) isEvent() {}
