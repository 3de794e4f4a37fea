package rest

import (
	"context"

	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/rpc/restapi"
)

// Dispatcher is what the REST API serves. The JobManager's Dispatcher
// implements it. Every method blocks until the Dispatcher's mailbox answered
// or ctx ends, and is safe to call from any goroutine. Errors wrap the
// restapi sentinels (ErrJobNotFound, ErrDuplicateJob, ...) or
// jobgraph.ErrInvalid, which the handlers map to HTTP status codes.
type Dispatcher interface {
	// SubmitJob validates and starts a job; it returns once the job is
	// accepted (not finished). Not idempotent: a second submission of the
	// same job ID fails with ErrDuplicateJob.
	SubmitJob(ctx context.Context, jg *jobgraph.JobGraph) (jobID string, err error)
	// ListJobs lists running and finished jobs (the bounded history).
	ListJobs(ctx context.Context) (restapi.JobIDsWithStatus, error)
	JobsOverview(ctx context.Context) (restapi.MultipleJobsDetails, error)
	JobDetails(ctx context.Context, jobID string) (restapi.JobDetails, error)
	JobExceptions(ctx context.Context, jobID string) (restapi.JobExceptions, error)
	// JobVertex lists one vertex's subtasks with their current attempts.
	JobVertex(ctx context.Context, jobID, vertexID string) (restapi.JobVertexInfo, error)
	// JobExecutionResult is the job's result once it ended (status
	// COMPLETED), or status IN_PROGRESS while it runs; it does not wait.
	JobExecutionResult(ctx context.Context, jobID string) (restapi.JobExecutionResultResponse, error)
	// CancelJob starts cancelling; it does not wait for CANCELED.
	// Idempotent while the job is cancelling.
	CancelJob(ctx context.Context, jobID string) error
	Overview(ctx context.Context) (restapi.ClusterOverview, error)
	TaskManagers(ctx context.Context) (restapi.TaskManagersInfo, error)
	TaskManager(ctx context.Context, id string) (restapi.TaskManagerInfo, error)

	// CheckpointStatistics is the job's checkpoint counts, summary, latest
	// checkpoints and history (also after it ended).
	CheckpointStatistics(ctx context.Context, jobID string) (restapi.CheckpointingStatistics, error)
	// CheckpointConfig is the job's checkpointing configuration.
	CheckpointConfig(ctx context.Context, jobID string) (restapi.CheckpointConfigInfo, error)
	// TriggerSavepoint starts a savepoint into dir (empty:
	// state.savepoints.dir) and returns its request ID at once; with
	// cancelJob the job stops after it. Not idempotent: each call is a
	// new savepoint. A job that ended: ErrBadRequest.
	TriggerSavepoint(ctx context.Context, jobID, dir string, cancelJob bool) (requestID string, err error)
	// StopWithSavepoint takes a savepoint and then stops the job (FINISHED);
	// with drain its sources end their input first.
	StopWithSavepoint(ctx context.Context, jobID, dir string, drain bool) (requestID string, err error)
	// SavepointStatus is a savepoint request's state; an unknown request:
	// ErrOperationNotFound. It does not wait.
	SavepointStatus(ctx context.Context, jobID, requestID string) (restapi.SavepointStatusResponse, error)

	// JobMetrics is the job's metrics by Flink's names (numRestarts,
	// uptime, the checkpoint counts and last checkpoint's duration and
	// size). It does not wait for the job.
	JobMetrics(ctx context.Context, jobID string) (map[string]float64, error)
}
