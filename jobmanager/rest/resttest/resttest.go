// Package resttest provides an in-memory rest.Dispatcher and a test server
// around the real REST handler, for tests of jobmanager/rest, client/ and
// the CLI. It is a stand-in for the JobManager's Dispatcher, which is a
// separate component: it validates and stores submitted JobGraphs and lets
// the test drive job states, exceptions and TaskManagers directly.
package resttest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/jobmanager/rest"
	"github.com/gofl/gofl/rpc/restapi"
)

// Job states, as Flink names them.
const (
	StateInitializing = "INITIALIZING"
	StateRunning      = "RUNNING"
	StateCancelling   = "CANCELLING"
	StateCanceled     = "CANCELED"
	StateFinished     = "FINISHED"
	StateFailed       = "FAILED"
)

// Dispatcher is an in-memory rest.Dispatcher. Submitted jobs start RUNNING
// with every task RUNNING; SetState moves them on. The zero value is not
// usable; call NewDispatcher.
type Dispatcher struct {
	mu         sync.Mutex
	jobs       map[string]*job
	order      []string // submission order
	tms        []restapi.TaskManagerInfo
	fail       error
	block      chan struct{}
	now        func() time.Time
	cancelDone bool
	served     map[string]int // JobDetails answers per job
	// savepoints by "job/request", and the error the next ones fail with.
	savepoints   map[string]restapi.SavepointStatusResponse
	savepointErr error
}

type job struct {
	graph        *jobgraph.JobGraph
	state        string
	start, end   int64
	exceptions   []restapi.ExceptionEntry // newest first
	accumulators map[string][]byte
	// taskMetrics are every subtask's TaskMetrics, by vertex.
	taskMetrics map[string]map[string]float64
	// io and progress are what SetVertexIO set, by vertex index.
	io       map[int]restapi.IOMetricsInfo
	progress map[int]*restapi.SourceProgress
}

// SetTaskMetrics makes every subtask of a vertex report m as its
// TaskMetrics (rates, watermarks, user metrics).
func (d *Dispatcher) SetTaskMetrics(jobID, vertexID string, m map[string]float64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	j, err := d.get(jobID)
	if err != nil {
		return err
	}
	if j.taskMetrics == nil {
		j.taskMetrics = map[string]map[string]float64{}
	}
	j.taskMetrics[vertexID] = m
	return nil
}

// NewDispatcher returns an empty Dispatcher.
func NewDispatcher() *Dispatcher {
	return &Dispatcher{jobs: map[string]*job{}, now: time.Now, served: map[string]int{}, savepoints: map[string]restapi.SavepointStatusResponse{}}
}

// DetailsServed is how many times JobDetails answered for jobID, so a test
// can move a job on once a client has seen its current state.
func (d *Dispatcher) DetailsServed(jobID string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.served[jobID]
}

var _ rest.Dispatcher = (*Dispatcher)(nil)

// SetClock replaces time.Now, for stable start times and durations.
func (d *Dispatcher) SetClock(now func() time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.now = now
}

// FailWith makes every call fail with err (nil restores normal service).
func (d *Dispatcher) FailWith(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fail = err
}

// Block makes every call wait until ctx ends or Unblock is called, to test
// timeouts.
func (d *Dispatcher) Block() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.block = make(chan struct{})
}

// Unblock ends Block.
func (d *Dispatcher) Unblock() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.block != nil {
		close(d.block)
		d.block = nil
	}
}

// CancelImmediately makes CancelJob go straight to CANCELED instead of
// CANCELLING.
func (d *Dispatcher) CancelImmediately() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cancelDone = true
}

// AddTaskManager registers a TaskManager.
func (d *Dispatcher) AddTaskManager(tm restapi.TaskManagerInfo) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.tms = append(d.tms, tm)
}

// SetState moves a job to state; terminal states set its end time.
func (d *Dispatcher) SetState(jobID, state string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	j := d.jobs[jobID]
	if j == nil {
		panic("resttest: SetState of unknown job " + jobID)
	}
	j.state = state
	if terminal(state) {
		j.end = d.now().UnixMilli()
	}
}

// SetAccumulators sets the accumulator results a terminal job reports.
func (d *Dispatcher) SetAccumulators(jobID string, acc map[string][]byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	j := d.jobs[jobID]
	if j == nil {
		panic("resttest: SetAccumulators of unknown job " + jobID)
	}
	j.accumulators = acc
}

// AddException records a failure in the job's exception history.
func (d *Dispatcher) AddException(jobID string, e restapi.ExceptionEntry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	j := d.jobs[jobID]
	if j == nil {
		panic("resttest: AddException to unknown job " + jobID)
	}
	j.exceptions = append([]restapi.ExceptionEntry{e}, j.exceptions...)
}

// Graph returns the JobGraph submitted as jobID, or nil.
func (d *Dispatcher) Graph(jobID string) *jobgraph.JobGraph {
	d.mu.Lock()
	defer d.mu.Unlock()
	if j := d.jobs[jobID]; j != nil {
		return j.graph
	}
	return nil
}

func terminal(state string) bool {
	return state == StateCanceled || state == StateFinished || state == StateFailed
}

// enter implements FailWith and Block; it must be called without d.mu.
func (d *Dispatcher) enter(ctx context.Context) error {
	d.mu.Lock()
	fail, block := d.fail, d.block
	d.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return fmt.Errorf("resttest: %w", ctx.Err())
		}
	}
	return fail
}

// SubmitJob validates jg and starts it RUNNING. An empty job ID gets a
// random 32-hex-digit one, like Flink's JobID.
func (d *Dispatcher) SubmitJob(ctx context.Context, jg *jobgraph.JobGraph) (string, error) {
	if err := d.enter(ctx); err != nil {
		return "", err
	}
	if err := jg.Validate(); err != nil {
		return "", err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	id := jg.JobID
	if id == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	if d.jobs[id] != nil {
		return "", fmt.Errorf("job %s: %w", id, restapi.ErrDuplicateJob)
	}
	d.jobs[id] = &job{graph: jg, state: StateRunning, start: d.now().UnixMilli(), end: -1}
	d.order = append(d.order, id)
	return id, nil
}

func (d *Dispatcher) get(id string) (*job, error) {
	j := d.jobs[id]
	if j == nil {
		return nil, fmt.Errorf("job %s: %w", id, restapi.ErrJobNotFound)
	}
	return j, nil
}

// ListJobs lists every job in submission order.
func (d *Dispatcher) ListJobs(ctx context.Context) (restapi.JobIDsWithStatus, error) {
	if err := d.enter(ctx); err != nil {
		return restapi.JobIDsWithStatus{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var out restapi.JobIDsWithStatus
	for _, id := range d.order {
		out.Jobs = append(out.Jobs, restapi.JobIDStatus{ID: id, Status: d.jobs[id].state})
	}
	return out, nil
}

// taskState is the state every task of a job in state s is in.
func taskState(s string) string {
	switch s {
	case StateInitializing:
		return "CREATED"
	case StateCancelling:
		return "CANCELING"
	}
	return s
}

func (d *Dispatcher) duration(j *job) int64 {
	if j.end >= 0 {
		return j.end - j.start
	}
	return d.now().UnixMilli() - j.start
}

func (d *Dispatcher) overview(id string, j *job) restapi.JobOverview {
	o := restapi.JobOverview{ID: id, Name: j.graph.Name, State: j.state, StartTime: j.start, EndTime: j.end,
		Duration: d.duration(j), LastModification: max(j.start, j.end)}
	for _, v := range j.graph.Vertices {
		o.Tasks.Total += v.Parallelism
		switch taskState(j.state) {
		case "CREATED":
			o.Tasks.Created += v.Parallelism
		case StateRunning:
			o.Tasks.Running += v.Parallelism
		case "CANCELING":
			o.Tasks.Canceling += v.Parallelism
		case StateCanceled:
			o.Tasks.Canceled += v.Parallelism
		case StateFinished:
			o.Tasks.Finished += v.Parallelism
		case StateFailed:
			o.Tasks.Failed += v.Parallelism
		}
	}
	return o
}

// JobsOverview summarizes every job in submission order.
func (d *Dispatcher) JobsOverview(ctx context.Context) (restapi.MultipleJobsDetails, error) {
	if err := d.enter(ctx); err != nil {
		return restapi.MultipleJobsDetails{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var out restapi.MultipleJobsDetails
	for _, id := range d.order {
		out.Jobs = append(out.Jobs, d.overview(id, d.jobs[id]))
	}
	return out, nil
}

// JobDetails describes one job and its vertices.
func (d *Dispatcher) JobDetails(ctx context.Context, jobID string) (restapi.JobDetails, error) {
	if err := d.enter(ctx); err != nil {
		return restapi.JobDetails{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	j, err := d.get(jobID)
	if err != nil {
		return restapi.JobDetails{}, err
	}
	d.served[jobID]++
	ts := taskState(j.state)
	out := restapi.JobDetails{ID: jobID, Name: j.graph.Name, State: j.state, JobType: j.graph.Type.String(),
		StartTime: j.start, EndTime: j.end, Duration: d.duration(j), Now: d.now().UnixMilli(),
		Timestamps: map[string]int64{StateRunning: j.start}, StatusCounts: map[string]int{}, Plan: restapi.NewJobPlan(jobID, j.graph)}
	for i, v := range j.graph.Vertices {
		out.Vertices = append(out.Vertices, restapi.JobVertexDetails{ID: string(v.ID), Name: v.Name,
			Parallelism: v.Parallelism, MaxParallelism: v.EffectiveMaxParallelism(), Status: ts,
			StartTime: j.start, EndTime: j.end, Duration: d.duration(j), Tasks: map[string]int{ts: v.Parallelism},
			Metrics: j.io[i], SourceProgress: j.progress[i]})
		out.StatusCounts[ts]++
	}
	if j.end >= 0 {
		out.Timestamps[j.state] = j.end
	}
	return out, nil
}

// SetVertexIO sets the I/O metrics and source progress (nil: none) that
// JobDetails reports for the job's vertex at index i.
func (d *Dispatcher) SetVertexIO(jobID string, i int, m restapi.IOMetricsInfo, p *restapi.SourceProgress) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if j, ok := d.jobs[jobID]; ok {
		if j.io == nil {
			j.io, j.progress = map[int]restapi.IOMetricsInfo{}, map[int]*restapi.SourceProgress{}
		}
		j.io[i], j.progress[i] = m, p
	}
}

// JobExceptions returns the job's exception history, newest first.
func (d *Dispatcher) JobExceptions(ctx context.Context, jobID string) (restapi.JobExceptions, error) {
	if err := d.enter(ctx); err != nil {
		return restapi.JobExceptions{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	j, err := d.get(jobID)
	if err != nil {
		return restapi.JobExceptions{}, err
	}
	out := restapi.JobExceptions{ExceptionHistory: restapi.ExceptionHistory{Entries: slices.Clone(j.exceptions)}}
	if len(j.exceptions) > 0 {
		out.RootException = j.exceptions[0].Stacktrace
		out.Timestamp = j.exceptions[0].Timestamp
	}
	return out, nil
}

// JobExecutionResult is IN_PROGRESS until the job is terminal; then its
// application status, accumulators and, when FAILED, the newest exception.
func (d *Dispatcher) JobExecutionResult(ctx context.Context, jobID string) (restapi.JobExecutionResultResponse, error) {
	if err := d.enter(ctx); err != nil {
		return restapi.JobExecutionResultResponse{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	j, err := d.get(jobID)
	if err != nil {
		return restapi.JobExecutionResultResponse{}, err
	}
	if !terminal(j.state) {
		return restapi.JobExecutionResultResponse{Status: restapi.QueueStatus{ID: restapi.ResultInProgress}}, nil
	}
	res := &restapi.JobExecutionResult{ID: jobID, NetRuntime: d.duration(j), AccumulatorResults: map[string][]byte{}}
	for k, v := range j.accumulators {
		res.AccumulatorResults[k] = v
	}
	switch j.state {
	case StateFinished:
		res.ApplicationStatus = "SUCCEEDED"
	case StateCanceled:
		res.ApplicationStatus = "CANCELED"
	default:
		res.ApplicationStatus = "FAILED"
		if len(j.exceptions) > 0 {
			res.FailureCause = &restapi.FailureCause{Class: j.exceptions[0].ExceptionName, StackTrace: j.exceptions[0].Stacktrace}
		}
	}
	return restapi.JobExecutionResultResponse{Status: restapi.QueueStatus{ID: restapi.ResultCompleted}, ExecutionResult: res}, nil
}

// CancelJob moves a running job to CANCELLING (or CANCELED after
// CancelImmediately); a terminal job is not cancellable.
func (d *Dispatcher) CancelJob(ctx context.Context, jobID string) error {
	if err := d.enter(ctx); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	j, err := d.get(jobID)
	if err != nil {
		return err
	}
	if terminal(j.state) {
		return fmt.Errorf("job %s is %s: %w", jobID, j.state, restapi.ErrJobNotCancellable)
	}
	j.state = StateCancelling
	if d.cancelDone {
		j.state, j.end = StateCanceled, d.now().UnixMilli()
	}
	return nil
}

// Overview counts TaskManagers, slots and jobs by state.
func (d *Dispatcher) Overview(ctx context.Context) (restapi.ClusterOverview, error) {
	if err := d.enter(ctx); err != nil {
		return restapi.ClusterOverview{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	o := restapi.ClusterOverview{TaskManagers: len(d.tms), Version: "test", Commit: "test"}
	for _, tm := range d.tms {
		o.SlotsTotal += tm.SlotsNumber
		o.SlotsAvailable += tm.FreeSlots
	}
	for _, j := range d.jobs {
		switch j.state {
		case StateFinished:
			o.JobsFinished++
		case StateCanceled:
			o.JobsCancelled++
		case StateFailed:
			o.JobsFailed++
		default:
			o.JobsRunning++
		}
	}
	return o, nil
}

// TaskManagers lists the registered TaskManagers.
func (d *Dispatcher) TaskManagers(ctx context.Context) (restapi.TaskManagersInfo, error) {
	if err := d.enter(ctx); err != nil {
		return restapi.TaskManagersInfo{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return restapi.TaskManagersInfo{TaskManagers: slices.Clone(d.tms)}, nil
}

// TaskManager returns one registered TaskManager.
func (d *Dispatcher) TaskManager(ctx context.Context, id string) (restapi.TaskManagerInfo, error) {
	if err := d.enter(ctx); err != nil {
		return restapi.TaskManagerInfo{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, tm := range d.tms {
		if tm.ID == id {
			return tm, nil
		}
	}
	return restapi.TaskManagerInfo{}, fmt.Errorf("TaskManager %s: %w", id, restapi.ErrTaskManagerNotFound)
}

// NewServer starts an httptest server with the real REST handler over d,
// closed when the test ends.
func NewServer(t testing.TB, d rest.Dispatcher, opts rest.Options) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(rest.NewHandler(d, zerolog.Nop(), opts))
	t.Cleanup(srv.Close)
	return srv
}

// Wordcount returns a valid three-vertex streaming JobGraph with the given
// job ID (empty lets the Dispatcher choose).
func Wordcount(jobID string) *jobgraph.JobGraph {
	return &jobgraph.JobGraph{
		JobID: jobID, Name: "wordcount", Type: jobgraph.Streaming,
		Vertices: []*jobgraph.Vertex{
			{ID: "source", Name: "Source: words", Parallelism: 2, Invokable: "stream"},
			{ID: "count", Name: "Count", Parallelism: 4, Invokable: "stream"},
			{ID: "sink", Name: "Sink: print", Parallelism: 1, Invokable: "stream"},
		},
		Edges: []*jobgraph.Edge{
			{Source: "source", Target: "count", Distribution: jobgraph.AllToAll, PartitionType: jobgraph.Pipelined, ShipStrategy: "hash"},
			{Source: "count", Target: "sink", Distribution: jobgraph.AllToAll, PartitionType: jobgraph.Pipelined, ShipStrategy: "rebalance"},
		},
		Config: map[string]string{"k": "v"},
	}
}

// JobVertex lists the vertex's subtasks, all in the job's state at attempt 0
// with zero I/O metrics; a running job's vertices are not back-pressured.
func (d *Dispatcher) JobVertex(ctx context.Context, jobID, vertexID string) (restapi.JobVertexInfo, error) {
	if err := d.enter(ctx); err != nil {
		return restapi.JobVertexInfo{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	j, err := d.get(jobID)
	if err != nil {
		return restapi.JobVertexInfo{}, err
	}
	v := j.graph.Vertex(jobgraph.VertexID(vertexID))
	if v == nil {
		return restapi.JobVertexInfo{}, fmt.Errorf("%w: job %s has no vertex %s", restapi.ErrJobNotFound, jobID, vertexID)
	}
	info := restapi.JobVertexInfo{ID: string(v.ID), Name: v.Name, Parallelism: v.Parallelism, MaxParallelism: v.EffectiveMaxParallelism(), Now: d.now().UnixMilli()}
	done := terminal(j.state)
	io := restapi.IOMetricsInfo{ReadBytesComplete: done, WriteBytesComplete: done, ReadRecordsComplete: done, WriteRecordsComplete: done}
	info.BackPressure = restapi.JobVertexBackPressureInfo{Status: restapi.BackPressureStatusDeprecated}
	if j.state == StateRunning {
		info.BackPressure = restapi.JobVertexBackPressureInfo{Status: restapi.BackPressureStatusOK, BackpressureLevel: restapi.BackPressureLevelOK, EndTimestamp: d.now().UnixMilli()}
	}
	for i := 0; i < v.Parallelism; i++ {
		info.Subtasks = append(info.Subtasks, restapi.SubtaskInfo{Subtask: i, Status: j.state, Metrics: io, TaskMetrics: j.taskMetrics[vertexID]})
		if j.state == StateRunning {
			info.BackPressure.Subtasks = append(info.BackPressure.Subtasks, restapi.SubtaskBackPressureInfo{Subtask: i, BackpressureLevel: restapi.BackPressureLevelOK})
		}
	}
	return info, nil
}
