package jobmaster

import (
	"context"
	"errors"
	"time"

	"github.com/gofl/gofl/failure"
	"github.com/gofl/gofl/internal/mailbox"
	"github.com/gofl/gofl/jobgraph"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/jobmanager/scheduler"
	"github.com/gofl/gofl/rpc/restapi"
	"github.com/gofl/gofl/stream/source"
)

// Snapshot is the REST view of a job at one moment.
type Snapshot struct {
	Overview   restapi.JobOverview
	Details    restapi.JobDetails
	Exceptions restapi.JobExceptions
	// Vertices are the vertex views by vertex ID, each with its
	// back-pressure view.
	Vertices map[string]restapi.JobVertexInfo
	// Result is set once the job is globally terminal.
	Result *restapi.JobExecutionResult
	// NumRestarts counts the job's restarts (Flink's numRestarts).
	NumRestarts int
}

// Snapshot returns the job's current views; after Done it returns the views
// as the job ended.
func (jm *JobMaster) Snapshot(ctx context.Context) (Snapshot, error) {
	select {
	case <-jm.done:
		return jm.final, nil
	default:
	}
	s, err := mailbox.Call(ctx, jm.mb, func() (Snapshot, error) { return jm.snapshot(), nil })
	if errors.Is(err, mailbox.ErrClosed) {
		<-jm.done
		return jm.final, nil
	}
	return s, err
}

// Status is a cheap status query.
func (jm *JobMaster) Status(ctx context.Context) (scheduler.JobStatus, error) {
	s, err := jm.Snapshot(ctx)
	if err != nil {
		return 0, err
	}
	st, _ := parseJobStatus(s.Overview.State)
	return st, nil
}

func parseJobStatus(name string) (scheduler.JobStatus, bool) {
	for s := scheduler.JobCreated; s <= scheduler.JobRestarting; s++ {
		if s.String() == name {
			return s, true
		}
	}
	return 0, false
}

func millis(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}

// snapshot runs on the mailbox.
func (jm *JobMaster) snapshot() Snapshot {
	g := jm.sched.Graph()
	st := jm.sched.Status()
	now := jm.clk.Now()
	start := jm.statusAt[scheduler.JobCreated]
	end := time.Time{}
	if st.IsGloballyTerminal() {
		end = jm.statusAt[st]
	}
	duration := now.Sub(start)
	if !end.IsZero() {
		duration = end.Sub(start)
	}
	var lastMod time.Time
	timestamps := map[string]int64{}
	for s, t := range jm.statusAt {
		timestamps[s.String()] = t.UnixMilli()
		if t.After(lastMod) {
			lastMod = t
		}
	}
	counts := restapi.TaskCounts{}
	statusCounts := map[string]int{}
	for _, s := range eg.AllStates() {
		statusCounts[s.String()] = 0
	}
	var vertices []restapi.JobVertexDetails
	infos := map[string]restapi.JobVertexInfo{}
	for _, jv := range g.JobVertices {
		info := restapi.JobVertexInfo{ID: string(jv.ID()), Name: jv.Vertex.Name, Parallelism: jv.Parallelism, MaxParallelism: jv.MaxParallelism, Now: now.UnixMilli()}
		ios := make([]restapi.IOMetricsInfo, 0, jv.Parallelism)
		samples := make([]subtaskSample, 0, jv.Parallelism)
		for i := 0; i < jv.Parallelism; i++ {
			vi := jv.VertexAt(i)
			ex := g.Vertices[vi].Current
			m := jm.metricsOf(g.AttemptID(vi))
			io := subtaskIO(ex.State, m)
			ios = append(ios, io)
			samples = append(samples, subtaskSample{subtask: i, attempt: int(ex.Attempt), state: ex.State, m: m})
			info.Subtasks = append(info.Subtasks, restapi.SubtaskInfo{Subtask: i, Status: ex.State.String(), Attempt: int(ex.Attempt),
				Host: ex.Location.Host, TaskManagerID: ex.Location.ID, Metrics: io, TaskMetrics: taskMetrics(m)})
		}
		info.BackPressure = backPressure(samples)
		infos[info.ID] = info
		tasks := map[string]int{}
		for _, s := range eg.AllStates() {
			tasks[s.String()] = 0
		}
		for i := 0; i < jv.Parallelism; i++ {
			state := g.Vertices[jv.VertexAt(i)].Current.State
			tasks[state.String()]++
			addCount(&counts, state)
		}
		vs := vertexStatus(tasks, jv.Parallelism)
		statusCounts[vs]++
		vertices = append(vertices, restapi.JobVertexDetails{
			ID: string(jv.ID()), Name: jv.Vertex.Name, Parallelism: jv.Parallelism, MaxParallelism: jv.MaxParallelism,
			Status: vs, StartTime: millis(start), EndTime: millis(end), Duration: duration.Milliseconds(), Tasks: tasks,
			Metrics: sumIO(ios), SourceProgress: jm.sourceProgress(jv.ID()),
		})
	}
	counts.Total = len(g.Vertices)
	ov := restapi.JobOverview{ID: jm.jobID, Name: jm.jg.Name, State: st.String(), StartTime: millis(start), EndTime: millis(end),
		Duration: duration.Milliseconds(), LastModification: millis(lastMod), Tasks: counts}
	det := restapi.JobDetails{ID: jm.jobID, Name: jm.jg.Name, State: st.String(), JobType: jm.jg.Type.String(),
		StartTime: millis(start), EndTime: millis(end), Duration: duration.Milliseconds(), Now: now.UnixMilli(),
		Timestamps: timestamps, Vertices: vertices, StatusCounts: statusCounts, Plan: restapi.NewJobPlan(jm.jobID, jm.jg)}
	return Snapshot{Overview: ov, Details: det, Exceptions: jm.exceptions(), Vertices: infos, Result: jm.executionResult(st, duration.Milliseconds()),
		NumRestarts: jm.sched.NumRestarts()}
}

// sourceProgress sums the progress the split enumerators of vertex's
// sources report (source.ProgressReporter); nil when none does. On the
// mailbox, where the coordinators run.
func (jm *JobMaster) sourceProgress(vertex jobgraph.VertexID) *restapi.SourceProgress {
	var out *restapi.SourceProgress
	for _, c := range jm.coords { // sums: any order
		pr, ok := c.coord.(interface {
			Progress() (source.Progress, bool)
		})
		if c.vertex != vertex || !ok || c.closed {
			continue
		}
		p, ok := pr.Progress()
		if !ok {
			continue
		}
		if out == nil {
			out = &restapi.SourceProgress{Unit: "splits"}
		}
		out.Done += p.Done
		out.Total += p.Total
		out.BytesDone += p.BytesDone
		out.BytesTotal += p.BytesTotal
	}
	return out
}

// vertexStatus aggregates subtask states the way Flink's ExecutionJobVertex
// does: failures and cancellation dominate, then the least advanced state.
func vertexStatus(tasks map[string]int, parallelism int) string {
	for _, s := range []eg.ExecutionState{eg.Failed, eg.Canceling, eg.Canceled} {
		if tasks[s.String()] > 0 {
			return s.String()
		}
	}
	if tasks[eg.Finished.String()] == parallelism {
		return eg.Finished.String()
	}
	for _, s := range []eg.ExecutionState{eg.Running, eg.Initializing, eg.Deploying, eg.Scheduled} {
		if tasks[s.String()] > 0 {
			return s.String()
		}
	}
	return eg.Created.String()
}

func addCount(c *restapi.TaskCounts, s eg.ExecutionState) {
	switch s {
	case eg.Created:
		c.Created++
	case eg.Scheduled:
		c.Scheduled++
	case eg.Deploying:
		c.Deploying++
	case eg.Initializing:
		c.Initializing++
	case eg.Running:
		c.Running++
	case eg.Finished:
		c.Finished++
	case eg.Canceling:
		c.Canceling++
	case eg.Canceled:
		c.Canceled++
	case eg.Failed:
		c.Failed++
	}
}

func (jm *JobMaster) exceptions() restapi.JobExceptions {
	h := jm.sched.ExceptionHistory()
	out := restapi.JobExceptions{ExceptionHistory: restapi.ExceptionHistory{Entries: []restapi.ExceptionEntry{}}}
	for i := len(h) - 1; i >= 0; i-- {
		f := h[i]
		entry := restapi.ExceptionEntry{
			ExceptionName: errorName(f.Cause), Stacktrace: stackTrace(f.Cause),
			Timestamp: jm.start.Add(f.Time).UnixMilli(), TaskName: f.TaskName, Location: f.Location, FailureType: f.Type.String(),
		}
		out.ExceptionHistory.Entries = append(out.ExceptionHistory.Entries, entry)
	}
	if len(out.ExceptionHistory.Entries) > 0 {
		out.RootException = out.ExceptionHistory.Entries[0].Stacktrace
		out.Timestamp = out.ExceptionHistory.Entries[0].Timestamp
	}
	return out
}

// stackTrace is the error's text and, for a task's failure, the stack it
// failed with.
func stackTrace(err error) string {
	var re *failure.RemoteError
	if errors.As(err, &re) && re.Stack != "" {
		return err.Error() + "\n" + re.Stack
	}
	return err.Error()
}

func errorName(err error) string {
	var re *failure.RemoteError
	if errors.As(err, &re) {
		return "TaskFailure"
	}
	switch {
	case errors.Is(err, scheduler.ErrNoResourceAvailable):
		return "NoResourceAvailableException"
	case errors.Is(err, scheduler.ErrTaskManagerLost), errors.Is(err, scheduler.ErrSlotLost):
		return "TaskManagerLostException"
	}
	return "JobFailure"
}
