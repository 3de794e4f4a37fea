package scheduler

import (
	"errors"
	"fmt"
	"time"

	"github.com/gofl/gofl/jobgraph"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/jobmanager/failover"
)

var (
	// ErrNoResourceAvailable is wrapped by slot allocation failures.
	ErrNoResourceAvailable = errors.New("scheduler: could not acquire the minimum required resources")
	// ErrTaskManagerLost is wrapped by failures of tasks on a lost TaskManager.
	ErrTaskManagerLost = errors.New("scheduler: TaskManager lost")
	// ErrSlotLost is wrapped by failures of tasks whose slot was lost.
	ErrSlotLost = errors.New("scheduler: slot lost")
	// ErrPartitionsLost is wrapped by failovers that rerun producers whose
	// BLOCKING partitions a TaskManager lost.
	ErrPartitionsLost = errors.New("scheduler: result partitions lost")
	// ErrTaskMissing is wrapped by failures of attempts whose TaskManager
	// acknowledged their deployment but no longer runs them.
	ErrTaskMissing = errors.New("scheduler: task missing on its TaskManager")
	// ErrIllegalState is wrapped by the failure of a job whose scheduler
	// made an illegal state transition (a bug; see Config.StrictTransitions).
	ErrIllegalState = errors.New("scheduler: illegal state")
	// ErrInvalidReport is wrapped by task state reports no TaskManager can
	// have sent (a state tasks do not report, an attempt never deployed).
	ErrInvalidReport = errors.New("scheduler: invalid task state report")
)

// Scheduler is the JobManager's scheduling core for one job: a pure state
// machine with no goroutines, clock or I/O. Step feeds it an event at a
// logical time; Ready hands back the actions to carry out.
//
// It is not safe for concurrent use: one goroutine (the JobMaster's mailbox)
// owns it.
type Scheduler struct {
	cfg      Config
	g        *eg.Graph
	now      time.Duration
	status   JobStatus
	strategy SchedulingStrategy
	failover FailoverStrategy
	restart  failover.RestartBackoffTimeStrategy
	// restartNotBefore: restarts wait until then (TaskManagerLost.FencedAt).
	restartNotBefore time.Duration
	pool             *slotPool
	alloc            *slotAllocator
	deployer         *deployer
	tracker          *partitionTracker
	tdds             *tddFactory
	timers           timerQueue
	ready            Ready

	active   int // vertices whose current execution is not terminal
	finished int // vertices whose current execution is FINISHED
	// versions implement Flink's ExecutionVertexVersioner: a restart only
	// resets vertices no newer failure handling has touched since.
	versions []uint32
	history  []FailureRecord
	restarts int
	// failCause is why the job is FAILING, reported again with FAILED.
	failCause error
	// acks holds, per TaskManager, the attempts whose deployment it
	// acknowledged, for reconciling its reports. Entries of attempts that
	// ended are dropped lazily, at the TaskManager's next report.
	acks map[string]map[eg.VertexIndex]*ackEntry
	// hosts are the preferred hosts of job vertices' subtasks
	// (SetPreferredHosts), by job vertex index, most data first.
	hosts map[int32][]string
	// reportsPartitions marks the TaskManagers that have listed partitions
	// in a report: only theirs are checked for lost partitions, so an older
	// TaskManager that does not report them loses none.
	reportsPartitions map[string]bool
	// bugs collects illegal transitions of this Step; they fail the job.
	bugs []error
}

// FailureRecord is one entry of the job's exception history.
type FailureRecord struct {
	Time     time.Duration
	Cause    error
	Type     failover.FailureType
	TaskName string // empty for global failures
	Location string
	Attempt  eg.ExecutionAttemptID
	// Restarted is how many tasks the failure restarted (0 if the job failed).
	Restarted int
}

// New builds the ExecutionGraph of jg and the scheduler that runs it.
// graphID makes attempt IDs unique across graph instances.
func New(cfg Config, jg *jobgraph.JobGraph, graphID uint64) (*Scheduler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g, err := eg.Build(jg, graphID)
	if err != nil {
		return nil, err
	}
	restart, err := failover.NewRestartBackoffTimeStrategy(cfg.Restart, cfg.Jitter)
	if err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	s := &Scheduler{cfg: cfg, g: g, restart: restart, active: len(g.Vertices), versions: make([]uint32, len(g.Vertices))}
	s.tracker = newPartitionTracker(s)
	s.tdds = newTDDFactory(s)
	s.pool = newSlotPool(s, newSlotSelection(cfg))
	s.alloc = newSlotAllocator(s, cfg.Allocator)
	s.deployer = newDeployer(s)
	s.strategy = newStrategy(cfg.Strategy, g, s.deployer)
	if cfg.Failover == FailoverFull {
		s.failover = restartAll{g: g}
	} else {
		s.failover = &restartPipelinedRegion{g: g, available: s.tracker.isAvailable}
	}
	return s, nil
}

// Graph exposes the ExecutionGraph for read-only queries (REST, tests).
func (s *Scheduler) Graph() *eg.Graph { return s.g }

// Status is the job status.
func (s *Scheduler) Status() JobStatus { return s.status }

// Now is the logical time of the last Step.
func (s *Scheduler) Now() time.Duration { return s.now }

// ExceptionHistory lists recent failures, oldest first.
func (s *Scheduler) ExceptionHistory() []FailureRecord { return s.history }

// NumRestarts counts restarts carried out so far.
func (s *Scheduler) NumRestarts() int { return s.restarts }

// HasReady reports whether Ready would return actions.
func (s *Scheduler) HasReady() bool { return !s.ready.Empty() }

// Ready returns the pending actions and clears them, with WakeAt set to the
// earliest pending timer.
func (s *Scheduler) Ready() Ready {
	s.tracker.flush()
	r := s.ready
	s.ready = Ready{}
	r.WakeAt, r.HasWakeAt = s.timers.next()
	return r
}

// Step applies one event at logical time now (monotonic; earlier times are
// treated as now). Errors describe events that were rejected, such as a
// state update for an unknown attempt; the scheduler's state is unchanged
// by a rejected event.
func (s *Scheduler) Step(now time.Duration, ev Event) error {
	if now > s.now {
		s.now = now
	}
	err := s.apply(ev)
	s.deployer.deployComplete()
	if len(s.bugs) > 0 {
		s.failOnBugs(ev)
	}
	return err
}

func (s *Scheduler) apply(ev Event) error {
	switch e := ev.(type) {
	case StartScheduling:
		if s.status != JobCreated {
			return fmt.Errorf("scheduler: cannot start scheduling a job in status %s", s.status)
		}
		s.setStatus(JobRunning, nil)
		s.strategy.StartScheduling()
	case Tick:
		s.fireTimers()
	case CancelJob:
		s.cancelJob()
	case FailJob:
		s.handleGlobalFailure(e.Cause)
	case SlotsOffered:
		s.pool.offer(e)
	case TaskManagerLost:
		s.restartNotBefore = max(s.restartNotBefore, e.FencedAt)
		s.taskManagerLost(e.TaskManagerID, e.Cause)
	case SlotLost:
		if victims := s.pool.slotLost(e.Allocation); len(victims) > 0 {
			s.failExecutions(victims, failover.EnvironmentError(fmt.Errorf("%w: %s: %w", ErrSlotLost, e.Allocation, e.Cause)))
		}
	case TaskStateChanged:
		return s.updateTaskState(e.Attempt, e.State, e.Cause)
	case DeploymentFailed:
		return s.deploymentFailed(e)
	case DeploymentAcknowledged:
		s.deploymentAcknowledged(e.Attempt)
	case TaskManagerReport:
		s.reconcile(e)
	case PartitionsLost:
		s.partitionsLost(e)
	case PartitionConsumable:
		p, ok := s.g.LookupPartition(e.Partition)
		if !ok {
			return fmt.Errorf("scheduler: unknown partition %s", e.Partition)
		}
		if s.g.MarkConsumable(p) {
			s.strategy.OnPartitionConsumable(p)
		}
	case NotEnoughResources:
		if s.cfg.Strategy == StrategyEager {
			s.deployer.failPendingBulks(fmt.Errorf("%w: the cluster can provide only %d slots and eager scheduling needs them all at once (%d)",
				ErrNoResourceAvailable, e.Acquired, s.alloc.requiredSlots()))
		}
	case ResourceAllocationFailed:
		s.deployer.failPendingBulks(fmt.Errorf("%w: %w", ErrNoResourceAvailable, e.Cause))
	default:
		return fmt.Errorf("scheduler: unknown event %T", ev)
	}
	return nil
}

func (s *Scheduler) setStatus(to JobStatus, cause error) {
	if s.status == to {
		return
	}
	s.ready.JobStatus = append(s.ready.JobStatus, JobStatusChange{From: s.status, To: to, Cause: cause})
	s.status = to
}

// transition changes a vertex's execution state and keeps the scheduler's
// counters and slots in step with it. Callers only ask for legal
// transitions: an illegal one is a bug of the core (see illegal), and
// transition reports false without changing anything.
func (s *Scheduler) transition(v eg.VertexIndex, to eg.ExecutionState) bool {
	from := s.g.Vertices[v].Current.State
	if err := s.g.Transition(v, to); err != nil {
		s.illegal(err)
		return false
	}
	if to.IsTerminal() && !from.IsTerminal() {
		s.active--
		s.alloc.release(v)
		s.deployer.executionTerminated(v)
	}
	if to == eg.Finished {
		s.finished++
	}
	if to == eg.Deploying {
		s.tdds.producerDeployed(v)
	}
	return true
}

// illegal handles a state change the core itself got wrong. Such a bug
// panics under Config.StrictTransitions; otherwise the job fails at the end
// of the Step with ErrIllegalState and the whole context, as going on from
// a state the core does not understand could run a task twice.
func (s *Scheduler) illegal(err error) {
	err = fmt.Errorf("%w: %w (job %s at %v)", ErrIllegalState, err, s.status, s.now)
	if s.cfg.StrictTransitions {
		panic(err)
	}
	s.bugs = append(s.bugs, err)
}

// failOnBugs fails the job after a Step that made illegal transitions.
func (s *Scheduler) failOnBugs(ev Event) {
	cause := failover.NonRecoverable(fmt.Errorf("handling %T: %w", ev, errors.Join(s.bugs...)))
	s.bugs = nil
	if s.status.IsGloballyTerminal() {
		return
	}
	s.recordFailure(0, true, cause, failover.FailureNonRecoverable)
	s.failJob(cause)
	s.bugs = nil // whatever stopping the job ran into is part of the same failure
}

func (s *Scheduler) updateTaskState(id eg.ExecutionAttemptID, state eg.ExecutionState, cause error) error {
	switch state {
	case eg.Deploying, eg.Initializing, eg.Running, eg.Finished, eg.Canceled, eg.Failed:
	default:
		return fmt.Errorf("%w: %s for %s: not a state tasks report", ErrInvalidReport, state, id)
	}
	v, err := s.g.Lookup(id)
	if errors.Is(err, eg.ErrStaleAttempt) {
		return nil // late reports of replaced attempts are expected
	}
	if err != nil {
		return fmt.Errorf("scheduler: task state update %s: %w", state, err)
	}
	ex := &s.g.Vertices[v].Current
	cur := ex.State
	if cur == eg.Created || cur == eg.Scheduled {
		return fmt.Errorf("%w: %s for %s, which was never deployed (%s)", ErrInvalidReport, state, id, cur)
	}
	if cur == eg.Canceling && (state == eg.Finished || state == eg.Failed) {
		if state == eg.Failed && cause != nil && s.status == JobFailing {
			// It counts as canceled, but the history keeps why it failed:
			// a consumer's lost connection to a dead producer often fails
			// the job before the producer's own failure (its runner's
			// panic) arrives, and that one explains the job's end.
			s.recordFailure(v, false, cause, failover.Classify(cause))
		}
		state = eg.Canceled // a task that ends while being canceled counts as canceled, as in Flink
	}
	if cur == state || (cur.IsTerminal() && state.IsTerminal()) {
		return nil // duplicate report
	}
	if !state.IsTerminal() && (cur == eg.Canceling || cur.IsTerminal() || state < cur) {
		// INITIALIZING or RUNNING sent before the task saw the cancel (or
		// before its TaskManager was declared lost), or overtaken by a
		// later report: stale, as in Flink.
		return nil
	}
	if !s.transition(v, state) {
		return nil // a bug, handled by illegal
	}
	switch state {
	case eg.Running:
		s.strategy.OnExecutionStateChange(v, state)
		var buf [4]eg.PartitionIndex
		for _, p := range s.g.ProducedPartitions(buf[:0], v) {
			if s.g.Results[s.g.Partitions[p].Result].Type == jobgraph.Pipelined {
				s.strategy.OnPartitionConsumable(p)
			}
		}
	case eg.Finished:
		s.ackFinished(v)
		s.tracker.vertexFinished(v)
		s.strategy.OnExecutionStateChange(v, state)
		if s.finished == len(s.g.Vertices) && s.status == JobRunning {
			s.finishJob()
		}
	case eg.Failed:
		ex.Failure = cause
		s.handleTaskFailures([]eg.VertexIndex{v}, nil, cause)
	case eg.Canceled:
		s.afterTerminal()
	}
	return nil
}

// failExecutions marks the given non-terminal executions FAILED with cause
// and runs failover once for all of them.
func (s *Scheduler) failExecutions(vs []eg.VertexIndex, cause error) {
	s.failAndRerun(vs, nil, cause)
}

// failAndRerun handles one failure: the given executions fail (CANCELING
// ones count as canceled), and the finished producers in rerun (whose
// partitions are lost) restart together with them and with everything the
// failover strategy adds, as one failure for the restart strategy.
func (s *Scheduler) failAndRerun(vs, rerun []eg.VertexIndex, cause error) {
	var failed []eg.VertexIndex
	for _, v := range vs {
		ex := &s.g.Vertices[v].Current
		if ex.State.IsTerminal() {
			continue
		}
		if ex.State == eg.Canceling {
			s.transition(v, eg.Canceled)
			continue
		}
		if s.transition(v, eg.Failed) {
			ex.Failure = cause
			failed = append(failed, v)
		}
	}
	if len(failed) > 0 || len(rerun) > 0 {
		s.handleTaskFailures(failed, rerun, cause)
	} else {
		s.afterTerminal()
	}
}

// afterTerminal completes whatever was waiting for executions to stop.
func (s *Scheduler) afterTerminal() {
	if s.active == 0 {
		switch s.status {
		case JobCancelling:
			s.endJob(JobCanceled, nil)
			return
		case JobFailing:
			s.endJob(JobFailed, s.failCause)
			return
		}
	}
	s.deployer.tryRestarts()
}

func (s *Scheduler) recordFailure(v eg.VertexIndex, global bool, cause error, typ failover.FailureType) *FailureRecord {
	rec := FailureRecord{Time: s.now, Cause: cause, Type: typ}
	if !global {
		ex := s.g.Vertices[v].Current
		jv := s.g.JobVertexOf(v)
		rec.TaskName = fmt.Sprintf("%s (%d/%d)", jv.Vertex.Name, s.g.Vertices[v].Subtask+1, jv.Parallelism)
		rec.Location = ex.Location.ID
		rec.Attempt = s.g.AttemptID(v)
	}
	s.history = append(s.history, rec)
	if n := s.cfg.ExceptionHistorySize; n > 0 && len(s.history) > n {
		s.history = append(s.history[:0], s.history[len(s.history)-n:]...)
	}
	return &s.history[len(s.history)-1]
}

// handleTaskFailures runs Flink's failure handling for tasks that failed
// together: classify, pick what to restart, ask the restart strategy, then
// cancel and restart after the backoff. rerun are finished vertices whose
// results were lost: they restart as if they had failed.
func (s *Scheduler) handleTaskFailures(failed, rerun []eg.VertexIndex, cause error) {
	typ := failover.Classify(cause)
	var first eg.VertexIndex
	if len(failed) > 0 {
		first = failed[0]
	} else {
		first = rerun[0]
	}
	rec := s.recordFailure(first, false, cause, typ)
	if s.status != JobRunning && s.status != JobRestarting {
		s.afterTerminal()
		return
	}
	if typ == failover.FailureNonRecoverable {
		s.failJob(cause)
		return
	}
	if typ == failover.FailurePartitionDataMissing {
		s.tracker.markMissing(cause)
	}
	if len(rerun) > 0 {
		failed = append(failed[:len(failed):len(failed)], rerun...)
	}
	toRestart := s.failover.TasksNeedingRestart(failed)
	s.scheduleRestart(rec, toRestart, cause, false)
}

func (s *Scheduler) handleGlobalFailure(cause error) {
	if s.status != JobRunning && s.status != JobRestarting {
		return
	}
	typ := failover.Classify(cause)
	rec := s.recordFailure(0, true, cause, typ)
	if typ == failover.FailureNonRecoverable {
		s.failJob(cause)
		return
	}
	all := make([]eg.VertexIndex, len(s.g.Vertices))
	for i := range all {
		all[i] = eg.VertexIndex(i)
	}
	s.scheduleRestart(rec, all, cause, true)
}

func (s *Scheduler) scheduleRestart(rec *FailureRecord, vs []eg.VertexIndex, cause error, global bool) {
	s.restart.NotifyFailure(s.now, cause)
	if !s.restart.CanRestart() {
		s.failJob(fmt.Errorf("recovery is suppressed by %s: %w", s.restart, cause))
		return
	}
	rec.Restarted = len(vs)
	if global || len(vs) == len(s.g.Vertices) {
		s.setStatus(JobRestarting, cause)
	}
	s.deployer.restartWithDelay(vs, max(s.restart.BackoffTime(), s.restartNotBefore-s.now))
}

func (s *Scheduler) failJob(cause error) {
	s.failCause = cause
	s.setStatus(JobFailing, cause)
	s.stopAll()
}

func (s *Scheduler) cancelJob() {
	if s.status.IsGloballyTerminal() || s.status == JobCancelling {
		return
	}
	if s.status == JobCreated {
		s.status = JobRunning // so the transition reads RUNNING → CANCELLING
	}
	s.setStatus(JobCancelling, nil)
	s.stopAll()
}

// stopAll cancels every execution and drops pending restarts; the job ends
// once all executions are terminal.
func (s *Scheduler) stopAll() {
	s.deployer.dropPendingRestarts()
	for v := range s.g.Vertices {
		s.deployer.cancelExecution(eg.VertexIndex(v))
	}
	s.afterTerminal()
}

func (s *Scheduler) finishJob() {
	s.endJob(JobFinished, nil)
}

func (s *Scheduler) endJob(status JobStatus, cause error) {
	s.deployer.dropPendingRestarts()
	s.acks, s.reportsPartitions = nil, nil
	s.tracker.releaseAll()
	s.pool.releaseAll(fmt.Sprintf("job %s", status))
	s.timers.clear()
	s.setStatus(status, cause)
}
