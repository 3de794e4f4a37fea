package checkpoint

import (
	"time"

	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/rpc/pb"
)

// Ready is what the driver must do after a Step. Outcomes come back as
// events (MetadataWritten); everything else is fire-and-forget.
type Ready struct {
	// Triggers go to the trigger tasks (TriggerCheckpointRequest).
	Triggers []Trigger
	// WriteMetadata must be written (temporary name + rename) off the
	// driver's goroutine; the outcome comes back as MetadataWritten.
	WriteMetadata []MetadataWrite
	// Notifications go to each attempt (NotifyCheckpointRequest).
	Notifications []Notification
	// Discards delete state, off the driver's goroutine; failures are only
	// logged.
	Discards []Discard
	// Savepoints are the outcomes of TriggerSavepoint requests.
	Savepoints []SavepointResult
	// FailJob, when set, must fail the job (a global failure): more
	// checkpoints failed in a row than tolerated.
	FailJob error
	// WakeAt, when HasWakeAt, is when the driver must deliver a Tick.
	WakeAt    time.Duration
	HasWakeAt bool
}

// Empty reports whether there is nothing to do (WakeAt aside).
func (r *Ready) Empty() bool {
	return len(r.Triggers) == 0 && len(r.WriteMetadata) == 0 && len(r.Notifications) == 0 &&
		len(r.Discards) == 0 && len(r.Savepoints) == 0 && r.FailJob == nil
}

// Trigger starts checkpoint ID at Attempts.
type Trigger struct {
	ID          int64
	TimestampMs int64
	Options     *pb.CheckpointOptions
	Attempts    []eg.ExecutionAttemptID
}

// MetadataWrite asks for Metadata to be written as <Location>/_metadata.
type MetadataWrite struct {
	ID       int64
	Location string
	Metadata *pb.CheckpointMetadata
}

// Notification tells Attempts that checkpoint ID completed or was aborted.
type Notification struct {
	ID            int64
	Complete      bool
	LastCompleted int64
	Attempts      []eg.ExecutionAttemptID
}

// Discard deletes state: Files (relative to Location) when set, else the
// directory Location with everything below it (nothing when Location is
// empty); and SharedFiles, absolute URIs of shared state files no
// retained checkpoint references any more.
type Discard struct {
	Location    string
	Files       []string
	SharedFiles []string
}

// SavepointResult is the outcome of a savepoint request: Location, or Err.
type SavepointResult struct {
	RequestID string
	ID        int64
	Location  string
	Err       error
}
