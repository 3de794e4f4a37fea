package scheduler

import (
	"time"

	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/rpc/pb"
)

// Ready is the batch of actions the driver must carry out after Step. The
// scheduler assumes nothing about their outcome: results come back as events.
type Ready struct {
	// JobStatus lists status changes in order.
	JobStatus []JobStatusChange
	// ResourceRequirements, when non-nil, is the number of slots the job now
	// needs in total; the driver declares it to the ResourceManager.
	ResourceRequirements *int
	SlotOfferReplies     []SlotOfferReply
	// OffloadedBlobs must be stored (content-addressed) before the
	// deployments that reference them are sent.
	OffloadedBlobs []Blob
	// Deployments in topological order within a bulk.
	Deployments       []Deployment
	Cancellations     []Cancellation
	PartitionReleases []PartitionRelease
	SlotReleases      []SlotRelease
	// WakeAt, when set, is the logical time at which the driver must deliver
	// a Tick.
	WakeAt    time.Duration
	HasWakeAt bool
}

// Empty reports whether there is nothing to do (WakeAt aside).
func (r *Ready) Empty() bool {
	return len(r.JobStatus) == 0 && r.ResourceRequirements == nil && len(r.SlotOfferReplies) == 0 &&
		len(r.OffloadedBlobs) == 0 && len(r.Deployments) == 0 && len(r.Cancellations) == 0 &&
		len(r.PartitionReleases) == 0 && len(r.SlotReleases) == 0
}

// JobStatusChange is one job status transition.
type JobStatusChange struct {
	From, To JobStatus
	Cause    error
}

// SlotOfferReply answers one SlotsOffered event.
type SlotOfferReply struct {
	TaskManagerID string
	Accepted      []eg.AllocationID
	Rejected      []eg.AllocationID
}

// Blob is content the TaskManagers fetch by key.
type Blob struct {
	Key  string
	Data []byte
}

// Deployment is one TDD to submit to a TaskManager.
type Deployment struct {
	TaskManager eg.TaskManagerLocation
	Descriptor  *pb.TaskDeploymentDescriptor
}

// Cancellation asks a TaskManager to cancel a task.
type Cancellation struct {
	TaskManager eg.TaskManagerLocation
	Attempt     eg.ExecutionAttemptID
}

// PartitionRelease asks a TaskManager to release result partitions.
type PartitionRelease struct {
	TaskManagerID string
	Partitions    []eg.ResultPartitionID
}

// SlotRelease returns a slot to its TaskManager.
type SlotRelease struct {
	TaskManagerID string
	Allocation    eg.AllocationID
	Cause         string
}

// JobStatus is the status of the whole job, with Flink's names.
type JobStatus int

const (
	JobCreated JobStatus = iota
	JobRunning
	JobFailing
	JobFailed
	JobCancelling
	JobCanceled
	JobFinished
	JobRestarting
)

var jobStatusNames = [...]string{"CREATED", "RUNNING", "FAILING", "FAILED", "CANCELLING", "CANCELED", "FINISHED", "RESTARTING"}

func (s JobStatus) String() string { return jobStatusNames[s] }

// IsGloballyTerminal reports whether the job has ended for good.
func (s JobStatus) IsGloballyTerminal() bool {
	return s == JobFailed || s == JobCanceled || s == JobFinished
}
