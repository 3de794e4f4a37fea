// Package restapi holds the JSON shapes and errors of the Dispatcher's REST
// API. Paths and field names follow Flink's REST API where the concept is
// the same, so Flink users and tools feel at home; the server
// (jobmanager/rest) and the client (client/) share these definitions.
package restapi

import "errors"

// Sentinel errors; the server maps them to HTTP status codes and the client
// maps status codes back to them.
var (
	ErrJobNotFound         = errors.New("restapi: job not found")                     // 404
	ErrTaskManagerNotFound = errors.New("restapi: TaskManager not found")             // 404
	ErrDuplicateJob        = errors.New("restapi: a job with this ID already exists") // 409
	ErrBadRequest          = errors.New("restapi: bad request")                       // 400
	ErrJobNotCancellable   = errors.New("restapi: job is not cancellable")            // 409
	ErrBlobNotFound        = errors.New("restapi: blob not found")                    // 404
	ErrResultGone          = errors.New("restapi: job result no longer kept")         // 410
)

// ErrorResponse is every error body: {"errors": [...]}.
type ErrorResponse struct {
	Errors []string `json:"errors"`
}

// ClusterOverview is GET /overview.
type ClusterOverview struct {
	TaskManagers   int    `json:"taskmanagers"`
	SlotsTotal     int    `json:"slots-total"`
	SlotsAvailable int    `json:"slots-available"`
	JobsRunning    int    `json:"jobs-running"`
	JobsFinished   int    `json:"jobs-finished"`
	JobsCancelled  int    `json:"jobs-cancelled"`
	JobsFailed     int    `json:"jobs-failed"`
	Version        string `json:"flink-version"`
	Commit         string `json:"flink-commit"`
}

// JobIDStatus is one entry of GET /jobs.
type JobIDStatus struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// JobIDsWithStatus is GET /jobs.
type JobIDsWithStatus struct {
	Jobs []JobIDStatus `json:"jobs"`
}

// TaskCounts counts tasks per execution state, with Flink's lower-case keys
// as used by /jobs/overview.
type TaskCounts struct {
	Total        int `json:"total"`
	Created      int `json:"created"`
	Scheduled    int `json:"scheduled"`
	Deploying    int `json:"deploying"`
	Initializing int `json:"initializing"`
	Running      int `json:"running"`
	Finished     int `json:"finished"`
	Canceling    int `json:"canceling"`
	Canceled     int `json:"canceled"`
	Failed       int `json:"failed"`
	Reconciling  int `json:"reconciling"`
}

// JobOverview is one entry of GET /jobs/overview.
type JobOverview struct {
	ID               string     `json:"jid"`
	Name             string     `json:"name"`
	State            string     `json:"state"`
	StartTime        int64      `json:"start-time"`
	EndTime          int64      `json:"end-time"` // -1 while running
	Duration         int64      `json:"duration"`
	LastModification int64      `json:"last-modification"`
	Tasks            TaskCounts `json:"tasks"`
}

// MultipleJobsDetails is GET /jobs/overview.
type MultipleJobsDetails struct {
	Jobs []JobOverview `json:"jobs"`
}

// JobVertexDetails is one vertex of GET /jobs/{jobid}. Tasks counts
// subtasks per execution state with upper-case state names, as Flink does.
type JobVertexDetails struct {
	ID             string         `json:"id"`
	Name           string         `json:"name"`
	Parallelism    int            `json:"parallelism"`
	MaxParallelism int            `json:"maxParallelism"`
	Status         string         `json:"status"`
	StartTime      int64          `json:"start-time"`
	EndTime        int64          `json:"end-time"`
	Duration       int64          `json:"duration"`
	Tasks          map[string]int `json:"tasks"`
	// Metrics sums the I/O metrics of the vertex's subtasks.
	Metrics IOMetricsInfo `json:"metrics"`
	// SourceProgress is how far the vertex's bounded sources are through
	// their input, as their split enumerators count it (gofl's addition;
	// absent for vertices without one).
	SourceProgress *SourceProgress `json:"source-progress,omitempty"`
}

// SourceProgress is a bounded source's progress: done of total units
// (splits), and the bytes of those splits where known. Total is 0 until
// the enumerator has listed its input.
type SourceProgress struct {
	Unit       string `json:"unit"`
	Done       int64  `json:"done"`
	Total      int64  `json:"total"`
	BytesDone  int64  `json:"bytes-done,omitempty"`
	BytesTotal int64  `json:"bytes-total,omitempty"`
}

// IOMetricsInfo is a vertex's or a subtask's I/O metrics, with Flink's
// field names: records and bytes read from and written to the network
// exchange (a source reads none, a sink writes none) and the accumulated
// back-pressured, idle and busy times in ms. A *-complete flag is false
// while a running subtask has not reported its metrics yet.
type IOMetricsInfo struct {
	ReadBytes                    int64   `json:"read-bytes"`
	ReadBytesComplete            bool    `json:"read-bytes-complete"`
	WriteBytes                   int64   `json:"write-bytes"`
	WriteBytesComplete           bool    `json:"write-bytes-complete"`
	ReadRecords                  int64   `json:"read-records"`
	ReadRecordsComplete          bool    `json:"read-records-complete"`
	WriteRecords                 int64   `json:"write-records"`
	WriteRecordsComplete         bool    `json:"write-records-complete"`
	AccumulatedBackpressuredTime int64   `json:"accumulated-backpressured-time"`
	AccumulatedIdleTime          int64   `json:"accumulated-idle-time"`
	AccumulatedBusyTime          float64 `json:"accumulated-busy-time"`
}

// Back-pressure levels of JobVertexBackPressureInfo, from a subtask's
// back-pressured ratio (backPressuredTimeMsPerSecond / 1000) as Flink
// grades it: up to 0.10 ok, up to 0.5 low, above high.
const (
	BackPressureLevelOK   = "ok"
	BackPressureLevelLow  = "low"
	BackPressureLevelHigh = "high"
)

// Statuses of JobVertexBackPressureInfo: "ok" with levels and ratios, or
// "deprecated" when no subtask reported metrics yet.
const (
	BackPressureStatusOK         = "ok"
	BackPressureStatusDeprecated = "deprecated"
)

// BackPressureLevel grades a back-pressured ratio the way Flink does.
func BackPressureLevel(ratio float64) string {
	switch {
	case ratio <= 0.10:
		return BackPressureLevelOK
	case ratio <= 0.5:
		return BackPressureLevelLow
	default:
		return BackPressureLevelHigh
	}
}

// SubtaskBackPressureInfo is one subtask of JobVertexBackPressureInfo: the
// shares of the last sampling interval its current attempt was
// back-pressured (ratio), idle and busy.
type SubtaskBackPressureInfo struct {
	Subtask           int     `json:"subtask"`
	AttemptNumber     int     `json:"attempt-number"`
	BackpressureLevel string  `json:"backpressure-level"`
	Ratio             float64 `json:"ratio"`
	IdleRatio         float64 `json:"idleRatio"`
	BusyRatio         float64 `json:"busyRatio"`
}

// JobVertexBackPressureInfo is GET /jobs/{jobid}/vertices/{vertexid}/backpressure
// (Flink's JobVertexBackPressureInfo): the vertex's level is its most
// back-pressured subtask's; end-timestamp is when the newest sample was taken.
type JobVertexBackPressureInfo struct {
	Status            string                    `json:"status"`
	BackpressureLevel string                    `json:"backpressure-level,omitempty"`
	EndTimestamp      int64                     `json:"end-timestamp,omitempty"`
	Subtasks          []SubtaskBackPressureInfo `json:"subtasks,omitempty"`
}

// JobDetails is GET /jobs/{jobid}.
type JobDetails struct {
	ID           string             `json:"jid"`
	Name         string             `json:"name"`
	IsStoppable  bool               `json:"isStoppable"`
	State        string             `json:"state"`
	JobType      string             `json:"job-type"`
	StartTime    int64              `json:"start-time"`
	EndTime      int64              `json:"end-time"`
	Duration     int64              `json:"duration"`
	Now          int64              `json:"now"`
	Timestamps   map[string]int64   `json:"timestamps"`
	Vertices     []JobVertexDetails `json:"vertices"`
	StatusCounts map[string]int     `json:"status-counts"`
	// Plan is the logical plan, with the edges between vertices.
	Plan JobPlan `json:"plan"`
}

// ExceptionEntry is one failure in a job's exception history.
type ExceptionEntry struct {
	ExceptionName string `json:"exceptionName"`
	Stacktrace    string `json:"stacktrace"`
	Timestamp     int64  `json:"timestamp"`
	TaskName      string `json:"taskName,omitempty"`
	Location      string `json:"location,omitempty"`
	FailureType   string `json:"failureType"`
}

// ExceptionHistory holds the entries, newest first.
type ExceptionHistory struct {
	Entries   []ExceptionEntry `json:"entries"`
	Truncated bool             `json:"truncated"`
}

// JobExceptions is GET /jobs/{jobid}/exceptions.
type JobExceptions struct {
	ExceptionHistory ExceptionHistory `json:"exceptionHistory"`
	RootException    string           `json:"root-exception,omitempty"`
	Timestamp        int64            `json:"timestamp,omitempty"`
}

// Queue states of JobExecutionResultResponse.Status.ID, as Flink's
// QueueStatus.
const (
	ResultInProgress = "IN_PROGRESS"
	ResultCompleted  = "COMPLETED"
)

// JobExecutionResultResponse is GET /jobs/{jobid}/execution-result: while
// the job runs only the status, IN_PROGRESS; once it ended COMPLETED with
// the result (Flink's JobExecutionResultResponseBody).
type JobExecutionResultResponse struct {
	Status          QueueStatus         `json:"status"`
	ExecutionResult *JobExecutionResult `json:"job-execution-result,omitempty"`
}

// QueueStatus is the status of an asynchronous operation.
type QueueStatus struct {
	ID string `json:"id"`
}

// JobExecutionResult is how a job ended: the application status
// (SUCCEEDED, FAILED, CANCELED or UNKNOWN), the accumulator results by
// name, each the subtasks' serialized lists concatenated in subtask order
// (base64 in JSON), the net runtime in milliseconds, and the failure cause
// of a failed job.
type JobExecutionResult struct {
	ID                 string            `json:"id"`
	ApplicationStatus  string            `json:"application-status"`
	AccumulatorResults map[string][]byte `json:"accumulator-results"`
	NetRuntime         int64             `json:"net-runtime"`
	FailureCause       *FailureCause     `json:"failure-cause,omitempty"`
}

// FailureCause is a job's root failure (Flink's SerializedThrowable, without
// the Java serialization).
type FailureCause struct {
	Class      string `json:"class"`
	StackTrace string `json:"stack-trace"`
}

// TaskManagerInfo is one entry of GET /taskmanagers and the body of
// GET /taskmanagers/{tmid}.
type TaskManagerInfo struct {
	ID                     string `json:"id"`
	Path                   string `json:"path"` // its RPC address
	DataPort               int    `json:"dataPort"`
	TimeSinceLastHeartbeat int64  `json:"timeSinceLastHeartbeat"` // epoch millis of the last heartbeat, as Flink reports
	SlotsNumber            int    `json:"slotsNumber"`
	FreeSlots              int    `json:"freeSlots"`
	// Hardware and MemoryConfiguration are Flink's, for a Go process;
	// absent for a TaskManager that registered without them.
	Hardware            *HardwareDescription `json:"hardware,omitempty"`
	MemoryConfiguration *MemoryConfiguration `json:"memoryConfiguration,omitempty"`
	// StatusMetrics are the process's Go runtime status from its latest
	// heartbeat, by Flink's names (Status.JVM.Memory.Heap.Used...) and
	// gofl's (Status.Go.*), served at GET /taskmanagers/{tmid}/metrics;
	// not part of the JSON.
	StatusMetrics map[string]float64 `json:"-"`
}

// HardwareDescription is Flink's: the TaskManager's cores, the machine's
// memory, the memory free at registration (Flink: the JVM's heap size) and
// managed memory (taskmanager.memory.managed.size), in bytes.
type HardwareDescription struct {
	CPUCores       int   `json:"cpuCores"`
	PhysicalMemory int64 `json:"physicalMemory"`
	FreeMemory     int64 `json:"freeMemory"`
	ManagedMemory  int64 `json:"managedMemory"`
}

// MemoryConfiguration is Flink's TaskExecutorMemoryConfiguration, in
// bytes. A Go TaskManager has no JVM memory pools: only
// totalProcessMemory is set, to the Go memory limit (GOMEMLIMIT), when
// there is one, and managedMemory.
type MemoryConfiguration struct {
	FrameworkHeap      int64 `json:"frameworkHeap"`
	TaskHeap           int64 `json:"taskHeap"`
	FrameworkOffHeap   int64 `json:"frameworkOffHeap"`
	TaskOffHeap        int64 `json:"taskOffHeap"`
	NetworkMemory      int64 `json:"networkMemory"`
	ManagedMemory      int64 `json:"managedMemory"`
	JVMMetaspace       int64 `json:"jvmMetaspace"`
	JVMOverhead        int64 `json:"jvmOverhead"`
	TotalFlinkMemory   int64 `json:"totalFlinkMemory"`
	TotalProcessMemory int64 `json:"totalProcessMemory"`
}

// TaskManagersInfo is GET /taskmanagers.
type TaskManagersInfo struct {
	TaskManagers []TaskManagerInfo `json:"taskmanagers"`
}

// JobSubmitResponse is the body of a successful POST /jobs.
type JobSubmitResponse struct {
	JobURL string `json:"jobUrl"`
	JobID  string `json:"jobid"`
}

// SubtaskInfo is one subtask of GET /jobs/{jobid}/vertices/{vertexid}.
type SubtaskInfo struct {
	Subtask       int    `json:"subtask"`
	Status        string `json:"status"`
	Attempt       int    `json:"attempt"`
	Host          string `json:"host"`
	TaskManagerID string `json:"taskmanager-id"`
	// Metrics are the I/O metrics of the subtask's current attempt.
	Metrics IOMetricsInfo `json:"metrics"`
	// TaskMetrics are the attempt's further metrics by Flink's names
	// (numRecordsInPerSecond, currentInputWatermark, user metrics as
	// "<operator>.<name>"), served through the REST metric endpoints; not
	// part of the vertex view's JSON.
	TaskMetrics map[string]float64 `json:"-"`
}

// JobVertexInfo is GET /jobs/{jobid}/vertices/{vertexid}.
type JobVertexInfo struct {
	ID             string        `json:"id"`
	Name           string        `json:"name"`
	Parallelism    int           `json:"parallelism"`
	MaxParallelism int           `json:"maxParallelism"`
	Now            int64         `json:"now"`
	Subtasks       []SubtaskInfo `json:"subtasks"`
	// BackPressure is the vertex's back-pressure view, served at
	// GET /jobs/{jobid}/vertices/{vertexid}/backpressure; it travels with
	// the vertex view and is not part of its JSON.
	BackPressure JobVertexBackPressureInfo `json:"-"`
}

// BlobInfo is the answer to POST /blobs (upload) and HEAD /blobs/{key}:
// a content-addressed artifact such as a job binary.
type BlobInfo struct {
	Key    string `json:"key"`
	Size   int64  `json:"size"`
	Stored bool   `json:"stored"` // the upload wrote it; false if it was already there
}

// BlobKeyHeader carries the key a client expects its upload to hash to.
const BlobKeyHeader = "X-Gofl-Blob-Key"

// JobPlan is the job's logical plan in Flink's JobPlanInfo shape: the
// "plan" of GET /jobs/{jobid} and the body of GET /jobs/{jobid}/plan. The
// dashboard draws the job graph from it.
type JobPlan struct {
	ID    string        `json:"jid"`
	Name  string        `json:"name"`
	Type  string        `json:"type"`
	Nodes []JobPlanNode `json:"nodes"`
}

// JobPlanNode is one vertex of a JobPlan; Inputs are its incoming edges in
// input order.
type JobPlanNode struct {
	ID                  string            `json:"id"`
	Parallelism         int               `json:"parallelism"`
	Operator            string            `json:"operator"`
	OperatorStrategy    string            `json:"operator_strategy"`
	Description         string            `json:"description"`
	Inputs              []JobPlanInput    `json:"inputs,omitempty"`
	OptimizerProperties map[string]string `json:"optimizer_properties"`
}

// JobPlanInput is an edge into a JobPlanNode from the node ID: its input
// number, ship strategy (FORWARD, HASH, REBALANCE, ...) and exchange mode
// (pipelined_bounded or blocking, as Flink names them).
type JobPlanInput struct {
	Num          int    `json:"num"`
	ID           string `json:"id"`
	ShipStrategy string `json:"ship_strategy"`
	Exchange     string `json:"exchange"`
}

// JobPlanResponse is GET /jobs/{jobid}/plan.
type JobPlanResponse struct {
	Plan JobPlan `json:"plan"`
}

// DashboardConfiguration is GET /config (Flink's DashboardConfiguration):
// what a dashboard needs before its first page, including which actions the
// cluster allows (web.submit.enable, web.cancel.enable).
type DashboardConfiguration struct {
	RefreshInterval int64             `json:"refresh-interval"`
	TimezoneName    string            `json:"timezone-name"`
	TimezoneOffset  int64             `json:"timezone-offset"`
	Version         string            `json:"flink-version"`
	Revision        string            `json:"flink-revision"`
	Features        DashboardFeatures `json:"features"`
}

// DashboardFeatures are the actions a dashboard may offer.
type DashboardFeatures struct {
	WebSubmit  bool `json:"web-submit"`
	WebCancel  bool `json:"web-cancel"`
	WebRescale bool `json:"web-rescale"`
	WebHistory bool `json:"web-history"`
}

// ConfigEntry is one entry of GET /jobmanager/config: an option set on the
// cluster, a secret's value masked.
type ConfigEntry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Keys of a JobGraph's configuration that carry a job's own HDFS
// delegation tokens (Flink's delegation token framework, per job).
const (
	// JobConfigDelegationTokens holds the tokens a client obtained with its
	// user's Kerberos login (storage's token file JSON) in a POST /jobs;
	// the Dispatcher takes it out before the job is stored or shown, and a
	// session JobManager stages the tokens 0600.
	JobConfigDelegationTokens = "gofl.internal.delegation-tokens"
	// JobConfigDelegationTokensFile names the staged file of the job's
	// tokens (storage.JobDelegationTokensFile); set by the JobManager only,
	// read by TaskManagers to give the job's runners the tokens.
	JobConfigDelegationTokensFile = "gofl.internal.delegation-tokens-file"
)
