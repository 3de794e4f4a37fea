package restapi

import "errors"

// Checkpoint and savepoint shapes of Flink's REST API.

// Values of CheckpointStatistics.Status.
const (
	CheckpointInProgress = "IN_PROGRESS"
	CheckpointCompleted  = "COMPLETED"
	CheckpointFailed     = "FAILED"
)

// CheckpointingStatistics is GET /jobs/:jobid/checkpoints.
type CheckpointingStatistics struct {
	Counts  CheckpointCounts       `json:"counts"`
	Summary CheckpointSummary      `json:"summary"`
	Latest  LatestCheckpoints      `json:"latest"`
	History []CheckpointStatistics `json:"history"`
}

// CheckpointCounts counts the job's checkpoints.
type CheckpointCounts struct {
	Restored   int64 `json:"restored"`
	Total      int64 `json:"total"`
	InProgress int64 `json:"in_progress"`
	Completed  int64 `json:"completed"`
	Failed     int64 `json:"failed"`
}

// MinMaxAvg summarizes a value over the completed checkpoints.
type MinMaxAvg struct {
	Min int64 `json:"min"`
	Max int64 `json:"max"`
	Avg int64 `json:"avg"`
}

// CheckpointSummary is the summary over the completed checkpoints.
type CheckpointSummary struct {
	CheckpointedSize  MinMaxAvg `json:"checkpointed_size"`
	StateSize         MinMaxAvg `json:"state_size"`
	EndToEndDuration  MinMaxAvg `json:"end_to_end_duration"`
	AlignmentBuffered MinMaxAvg `json:"alignment_buffered"`
	ProcessedData     MinMaxAvg `json:"processed_data"`
	PersistedData     MinMaxAvg `json:"persisted_data"`
}

// LatestCheckpoints are the newest checkpoints of each kind; nil: none.
type LatestCheckpoints struct {
	Completed *CheckpointStatistics         `json:"completed"`
	Savepoint *CheckpointStatistics         `json:"savepoint"`
	Failed    *CheckpointStatistics         `json:"failed"`
	Restored  *RestoredCheckpointStatistics `json:"restored"`
}

// CheckpointStatistics is one checkpoint or savepoint. Times are Unix
// milliseconds, durations milliseconds, sizes bytes.
type CheckpointStatistics struct {
	// Class is Flink's "@class": completed, failed or in_progress.
	Class                   string `json:"@class"`
	ID                      int64  `json:"id"`
	Status                  string `json:"status"`
	IsSavepoint             bool   `json:"is_savepoint"`
	CheckpointType          string `json:"checkpoint_type"`
	TriggerTimestamp        int64  `json:"trigger_timestamp"`
	LatestAckTimestamp      int64  `json:"latest_ack_timestamp"`
	CheckpointedSize        int64  `json:"checkpointed_size"`
	StateSize               int64  `json:"state_size"`
	EndToEndDuration        int64  `json:"end_to_end_duration"`
	AlignmentBuffered       int64  `json:"alignment_buffered"`
	ProcessedData           int64  `json:"processed_data"`
	PersistedData           int64  `json:"persisted_data"`
	NumSubtasks             int    `json:"num_subtasks"`
	NumAcknowledgedSubtasks int    `json:"num_acknowledged_subtasks"`
	ExternalPath            string `json:"external_path,omitempty"`
	Discarded               bool   `json:"discarded"`
	FailureTimestamp        int64  `json:"failure_timestamp,omitempty"`
	FailureMessage          string `json:"failure_message,omitempty"`
	// AlignmentDuration is gofl's: the longest alignment of a subtask (ms).
	AlignmentDuration int64 `json:"alignment_duration"`
}

// RestoredCheckpointStatistics is the checkpoint the job restored from.
type RestoredCheckpointStatistics struct {
	ID               int64  `json:"id"`
	RestoreTimestamp int64  `json:"restore_timestamp"`
	IsSavepoint      bool   `json:"is_savepoint"`
	ExternalPath     string `json:"external_path"`
}

// CheckpointConfigInfo is GET /jobs/:jobid/checkpoints/config.
type CheckpointConfigInfo struct {
	// Mode is exactly_once or at_least_once.
	Mode                        string                     `json:"mode"`
	Interval                    int64                      `json:"interval"`
	Timeout                     int64                      `json:"timeout"`
	MinPause                    int64                      `json:"min_pause"`
	MaxConcurrent               int64                      `json:"max_concurrent"`
	Externalization             ExternalizedCheckpointInfo `json:"externalization"`
	StateBackend                string                     `json:"state_backend"`
	CheckpointStorage           string                     `json:"checkpoint_storage"`
	UnalignedCheckpoints        bool                       `json:"unaligned_checkpoints"`
	TolerableFailedCheckpoints  int                        `json:"tolerable_failed_checkpoints"`
	AlignedCheckpointTimeout    int64                      `json:"aligned_checkpoint_timeout"`
	CheckpointsAfterTasksFinish bool                       `json:"checkpoints_after_tasks_finish"`
}

// ExternalizedCheckpointInfo says whether completed checkpoints outlive the job.
type ExternalizedCheckpointInfo struct {
	Enabled              bool `json:"enabled"`
	DeleteOnCancellation bool `json:"delete_on_cancellation"`
}

// SavepointTriggerRequest is POST /jobs/:jobid/savepoints.
type SavepointTriggerRequest struct {
	TargetDirectory string `json:"target-directory,omitempty"`
	CancelJob       bool   `json:"cancel-job"`
	SavepointRequestOptions
}

// StopWithSavepointRequest is POST /jobs/:jobid/stop.
type StopWithSavepointRequest struct {
	TargetDirectory string `json:"targetDirectory,omitempty"`
	Drain           bool   `json:"drain"`
	SavepointRequestOptions
}

// SavepointRequestOptions are the fields Flink's clients (1.15 and later)
// send with either savepoint request. gofl writes one savepoint format
// and picks the trigger ID itself, so it accepts formatType "CANONICAL"
// (Flink's default) and an absent triggerId; the REST handler refuses
// the rest with 400.
type SavepointRequestOptions struct {
	FormatType string `json:"formatType,omitempty"`
	TriggerID  string `json:"triggerId,omitempty"`
}

// SavepointFormatCanonical is Flink's default savepoint format, the only
// formatType gofl accepts.
const SavepointFormatCanonical = "CANONICAL"

// TriggerResponse names an asynchronous operation.
type TriggerResponse struct {
	RequestID string `json:"request-id"`
}

// SavepointStatusResponse is GET /jobs/:jobid/savepoints/:triggerid:
// status IN_PROGRESS, or COMPLETED with the operation's location or
// failure-cause.
type SavepointStatusResponse struct {
	Status    QueueStatus    `json:"status"`
	Operation *SavepointInfo `json:"operation,omitempty"`
}

// SavepointInfo is a finished savepoint operation.
type SavepointInfo struct {
	Location     string        `json:"location,omitempty"`
	FailureCause *FailureCause `json:"failure-cause,omitempty"`
}

// ErrOperationNotFound: no asynchronous operation (savepoint) has this
// trigger ID (404).
var ErrOperationNotFound = errors.New("restapi: no such operation")
