package checkpoint

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/jobgraph"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/rpc/pb"
)

// Sentinel errors of checkpoint and savepoint failures.
var (
	ErrTimeout          = errors.New("checkpoint: expired before completing")
	ErrDeclined         = errors.New("checkpoint: declined by a task")
	ErrFailover         = errors.New("checkpoint: aborted by a failover")
	ErrSubsumed         = errors.New("checkpoint: subsumed by a newer checkpoint")
	ErrTaskNotRunning   = errors.New("checkpoint: a task it waits for is no longer running")
	ErrNotAllRunning    = errors.New("checkpoint: not all tasks are running")
	ErrJobEnded         = errors.New("checkpoint: the job ended")
	ErrNoSavepointDir   = errors.New("checkpoint: no savepoint directory given and state.savepoints.dir is not set")
	ErrMetadataWrite    = errors.New("checkpoint: writing the metadata failed")
	ErrTooManyFailures  = errors.New("checkpoint: exceeded checkpoint tolerable failure threshold")
	ErrUnknownOperators = errors.New("checkpoint: savepoint state for operators the job does not have")
)

// historySize is how many finished checkpoints the statistics keep.
const historySize = 10

// outcomesKept bounds the memory of finished checkpoint ids (for late
// acknowledgements).
const outcomesKept = 1000

// Restored is the checkpoint or savepoint the job was started from.
type Restored struct {
	ID        int64
	Location  string
	Metadata  *pb.CheckpointMetadata
	Savepoint bool
}

// Completed is a completed checkpoint or savepoint.
type Completed struct {
	ID        int64
	Location  string
	Metadata  *pb.CheckpointMetadata
	Savepoint bool
}

type pending struct {
	id        int64
	typ       pb.CheckpointType
	requestID string
	location  string
	deadline  time.Duration
	waiting   map[eg.ExecutionAttemptID]bool // not yet acknowledged
	acks      map[eg.ExecutionAttemptID]Acknowledge
	finished  []eg.ExecutionAttemptID // FINISHED at trigger time
	writing   bool
	stats     *Stats
}

func (p *pending) savepoint() bool { return p.typ != pb.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT }

type outcome struct {
	location  string
	completed bool
}

// Coordinator is one job's CheckpointCoordinator. Not safe for concurrent
// use: the driver calls it from one goroutine.
type Coordinator struct {
	cfg   Config
	jobID string
	jg    *jobgraph.JobGraph
	// upstream[v] are the inputs of vertex v.
	upstream map[jobgraph.VertexID][]*jobgraph.Edge

	now     time.Duration
	started bool
	ended   bool
	nextID  int64
	// nextPeriodic is when the next periodic checkpoint is due.
	nextPeriodic   time.Duration
	lastCompletion time.Duration
	hasCompletion  bool
	failures       int // consecutive failed checkpoints

	tasks map[subtask]Task
	// endOfData are the current attempts that ended their data;
	// allEnded is whether every unfinished task had at the last change,
	// and finalDue that the next checkpoint is due at once (set when
	// allEnded turns true, cleared by the next periodic trigger).
	endOfData map[eg.ExecutionAttemptID]bool
	// afterWrite are aborted checkpoints whose metadata write was in
	// flight: their directory is discarded once the write ended, since a
	// discard before it would leave the _metadata the write then creates.
	afterWrite map[int64]string
	allEnded   bool
	finalDue   bool
	pending    map[int64]*pending
	store      []Completed // retained checkpoints, oldest first
	latest     *Completed  // newest completed (or restored) checkpoint or savepoint
	outcomes   map[int64]outcome
	oldest     []int64 // ids in outcomes, in insertion order
	shared     *SharedStateRegistry

	stats   statsState
	ready   Ready
	randSeq uint64
}

type subtask struct {
	v jobgraph.VertexID
	i int32
}

// New builds the coordinator of jg. restored, when not nil, is what the job
// restores from: ids continue after it and it is the state deployments
// restore until a checkpoint completes.
func New(cfg Config, jg *jobgraph.JobGraph, restored *Restored) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Coordinator{cfg: cfg, jobID: jg.JobID, jg: jg, upstream: map[jobgraph.VertexID][]*jobgraph.Edge{},
		nextID: 1, tasks: map[subtask]Task{}, endOfData: map[eg.ExecutionAttemptID]bool{}, afterWrite: map[int64]string{}, pending: map[int64]*pending{}, outcomes: map[int64]outcome{},
		shared: newSharedStateRegistry()}
	for _, e := range jg.Edges {
		c.upstream[e.Target] = append(c.upstream[e.Target], e)
	}
	if restored != nil {
		c.nextID = restored.ID + 1
		c.latest = &Completed{ID: restored.ID, Location: restored.Location, Metadata: restored.Metadata, Savepoint: restored.Savepoint}
		c.stats.restored = &RestoredStats{ID: restored.ID, ExternalPath: restored.Location, Savepoint: restored.Savepoint}
		c.stats.restoredN = 1
		// Its shared files stay: it may be another job's, or needed again
		// should the job fail before a checkpoint completes.
		c.shared.Register(restored.Metadata)
	}
	c.nextID = max(c.nextID, cfg.FirstID)
	return c, nil
}

// Config returns the configuration.
func (c *Coordinator) Config() Config { return c.cfg }

// Latest is the newest completed checkpoint or savepoint, else the one
// restored from; nil if none.
func (c *Coordinator) Latest() *Completed { return c.latest }

// Retained lists the retained completed checkpoints, oldest first.
func (c *Coordinator) Retained() []Completed { return slices.Clone(c.store) }

// Writing reports whether checkpoint id is pending with its metadata
// write in flight, not aborted meanwhile (an abort during the write
// discards it once the write ended). The JobMaster asks on its mailbox
// right before it records the checkpoint in the HA store, so that store
// never holds a checkpoint the coordinator aborted. Does not block.
func (c *Coordinator) Writing(id int64) bool {
	p := c.pending[id]
	return p != nil && p.writing
}

// HasReady reports whether Ready has actions.
func (c *Coordinator) HasReady() bool { return !c.ready.Empty() }

// Ready returns and clears the actions accumulated since the last call.
func (c *Coordinator) Ready() Ready {
	r := c.ready
	c.ready = Ready{}
	if w, ok := c.wakeAt(); ok {
		r.WakeAt, r.HasWakeAt = w, true
	}
	return r
}

// Step applies ev at logical time now (never going back). The error is the
// coordinator's verdict on a malformed event; the state is unchanged then.
func (c *Coordinator) Step(now time.Duration, ev Event) error {
	if now > c.now {
		c.now = now
	}
	if !c.started {
		c.started = true
		c.nextPeriodic = c.now + c.cfg.Interval
	}
	if c.ended {
		if sp, ok := ev.(TriggerSavepoint); ok {
			c.ready.Savepoints = append(c.ready.Savepoints, SavepointResult{RequestID: sp.RequestID, Err: ErrJobEnded})
		}
		if ack, ok := ev.(Acknowledge); ok {
			c.lateAck(ack)
		}
		if w, ok := ev.(MetadataWritten); ok {
			c.discardAfterWrite(w.ID)
		}
		return nil
	}
	switch ev := ev.(type) {
	case Tick:
	case TasksChanged:
		c.tasksChanged(ev)
	case TriggerSavepoint:
		c.triggerSavepoint(ev)
	case Acknowledge:
		c.acknowledge(ev)
	case EndOfData:
		// The notice can overtake the task's RUNNING state (they travel
		// separate streams from the runner): a current attempt's counts.
		if t, ok := c.tasks[subtask{ev.Attempt.JobVertex, ev.Attempt.Subtask}]; ok && t.Attempt == ev.Attempt && !t.State.IsTerminal() && t.State != eg.Canceling {
			c.endOfData[ev.Attempt] = true
			c.updateAllEnded()
		}
	case Decline:
		if p := c.pending[ev.ID]; p != nil && !p.writing {
			reason := ev.Reason
			if reason == nil {
				reason = errors.New("no reason given")
			}
			c.abort(p, fmt.Errorf("%w: %s: %w", ErrDeclined, ev.Attempt, reason), true)
		}
	case Failover:
		for _, p := range c.pendingInOrder() {
			cause := ErrFailover
			if ev.Cause != nil {
				cause = fmt.Errorf("%w: %w", ErrFailover, ev.Cause)
			}
			c.abort(p, cause, false)
		}
	case MetadataWritten:
		c.discardAfterWrite(ev.ID)
		c.metadataWritten(ev)
	case JobEnded:
		c.jobEnded(ev.Status)
		return nil
	default:
		return fmt.Errorf("checkpoint: unknown event %T", ev)
	}
	c.advance()
	return nil
}

// ---- triggering ----

func (c *Coordinator) advance() {
	for _, p := range c.pendingInOrder() {
		if !p.writing && c.now >= p.deadline {
			c.abort(p, fmt.Errorf("%w: checkpoint %d after %v", ErrTimeout, p.id, c.cfg.Timeout), true)
		}
	}
	if !c.cfg.Enabled() || c.ended {
		return
	}
	at, ok := c.nextTriggerAt()
	if !ok || c.now < at {
		return
	}
	c.finalDue = false
	if err := c.trigger(pb.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT, "", ""); err != nil {
		// Not all tasks run (deploying, restarting, finishing): try again
		// an interval later, as Flink does; not a checkpoint failure.
		c.nextPeriodic = c.now + c.cfg.Interval
		return
	}
	c.nextPeriodic = c.now + c.cfg.Interval
}

// nextTriggerAt is when the next periodic checkpoint may start; false
// while max-concurrent-checkpoints (or a min-pause's one at a time) are
// in progress: a completion or abort makes room.
func (c *Coordinator) nextTriggerAt() (time.Duration, bool) {
	n := 0
	for _, p := range c.pending {
		if !p.savepoint() {
			n++
		}
	}
	if n >= c.cfg.MaxConcurrent || (c.cfg.MinPause > 0 && n > 0) {
		return 0, false
	}
	at := c.nextPeriodic
	if c.finalDue {
		at = min(at, c.now)
	}
	if c.hasCompletion && c.lastCompletion+c.cfg.MinPause > at {
		at = c.lastCompletion + c.cfg.MinPause
	}
	return at, true
}

func (c *Coordinator) wakeAt() (time.Duration, bool) {
	var w time.Duration
	ok := false
	set := func(t time.Duration) {
		if !ok || t < w {
			w, ok = t, true
		}
	}
	for _, p := range c.pending {
		if !p.writing {
			set(p.deadline)
		}
	}
	if c.cfg.Enabled() && !c.ended {
		if at, can := c.nextTriggerAt(); can {
			set(max(at, c.now))
		}
	}
	return w, ok
}

func (c *Coordinator) triggerSavepoint(ev TriggerSavepoint) {
	dir := ev.Dir
	if dir == "" {
		dir = c.cfg.SavepointsDir
	}
	typ := ev.Type
	if typ == pb.CheckpointType_CHECKPOINT_TYPE_UNSPECIFIED || typ == pb.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT {
		typ = pb.CheckpointType_CHECKPOINT_TYPE_SAVEPOINT
	}
	if dir == "" {
		c.ready.Savepoints = append(c.ready.Savepoints, SavepointResult{RequestID: ev.RequestID, Err: ErrNoSavepointDir})
		return
	}
	if err := c.trigger(typ, dir, ev.RequestID); err != nil {
		c.ready.Savepoints = append(c.ready.Savepoints, SavepointResult{RequestID: ev.RequestID, Err: err})
	}
}

// trigger starts a checkpoint (dir empty) or savepoint (into dir) when
// every task is RUNNING or FINISHED and at least one runs.
func (c *Coordinator) trigger(typ pb.CheckpointType, dir, requestID string) error {
	var running, finished []eg.ExecutionAttemptID
	for _, t := range c.sortedTasks() {
		switch t.State {
		case eg.Running:
			running = append(running, t.Attempt)
		case eg.Finished:
			finished = append(finished, t.Attempt)
		default:
			return fmt.Errorf("%w: %s is %s", ErrNotAllRunning, t.Attempt, t.State)
		}
	}
	if len(running) == 0 {
		if len(c.tasks) == 0 {
			return fmt.Errorf("%w: no tasks yet", ErrNotAllRunning)
		}
		return fmt.Errorf("%w: every task has finished", ErrNotAllRunning)
	}
	id := c.nextID
	c.nextID++
	savepoint := typ != pb.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT
	var location string
	if savepoint {
		location = SavepointLocation(dir, c.jobID, c.random())
	} else {
		location = CheckpointLocation(c.cfg.CheckpointsDir, c.jobID, id)
	}
	p := &pending{id: id, typ: typ, requestID: requestID, location: location, deadline: c.now + c.cfg.Timeout,
		waiting: map[eg.ExecutionAttemptID]bool{}, acks: map[eg.ExecutionAttemptID]Acknowledge{}, finished: finished}
	for _, a := range running {
		p.waiting[a] = true
	}
	c.pending[id] = p
	opts := &pb.CheckpointOptions{Type: typ, TargetLocation: location, ExactlyOnce: !c.cfg.AtLeastOnce || savepoint}
	if !savepoint && c.cfg.Unaligned {
		opts.Unaligned = c.cfg.AlignedTimeout == 0
		opts.AlignedTimeoutMs = c.cfg.AlignedTimeout.Milliseconds()
	}
	p.stats = c.stats.triggered(id, typ, c.wall(c.now), len(running)+len(finished), len(finished), location)
	c.ready.Triggers = append(c.ready.Triggers, Trigger{ID: id, TimestampMs: c.wall(c.now), Options: opts,
		Attempts: c.triggerTasks(running)})
	return nil
}

// triggerTasks are the running attempts none of whose upstream subtasks is
// unfinished: the sources, and (FLIP-147) tasks whose inputs all finished.
func (c *Coordinator) triggerTasks(running []eg.ExecutionAttemptID) []eg.ExecutionAttemptID {
	var out []eg.ExecutionAttemptID
	for _, a := range running {
		if !c.hasUnfinishedUpstream(a) {
			out = append(out, a)
		}
	}
	return out
}

func (c *Coordinator) hasUnfinishedUpstream(a eg.ExecutionAttemptID) bool {
	v := c.jg.Vertex(a.JobVertex)
	for _, e := range c.upstream[a.JobVertex] {
		up := c.jg.Vertex(e.Source)
		if up == nil || v == nil {
			continue
		}
		lo, hi := 0, up.Parallelism
		if e.Distribution == jobgraph.Pointwise {
			lo, hi = pointwiseProducers(int(a.Subtask), up.Parallelism, v.Parallelism)
		}
		for i := lo; i < hi; i++ {
			if t, ok := c.tasks[subtask{up.ID, int32(i)}]; !ok || t.State != eg.Finished {
				return true
			}
		}
	}
	return false
}

// pointwiseProducers are the producer subtasks [lo, hi) a pointwise
// consumer subtask reads.
func pointwiseProducers(consumer, producers, consumers int) (int, int) {
	if producers >= consumers {
		return consumer * producers / consumers, (consumer + 1) * producers / consumers
	}
	lo := consumer * producers / consumers
	return lo, lo + 1
}

// ---- acknowledgements ----

func (c *Coordinator) acknowledge(ev Acknowledge) {
	p := c.pending[ev.ID]
	if p == nil {
		c.lateAck(ev)
		return
	}
	if _, dup := p.acks[ev.Attempt]; dup {
		return
	}
	if !p.waiting[ev.Attempt] {
		// An attempt the checkpoint does not wait for (an old one): its
		// state belongs to nothing.
		c.shared.Orphan(p.id, ev.Operators)
		c.discardFiles(p.location, ev.Operators)
		return
	}
	delete(p.waiting, ev.Attempt)
	p.acks[ev.Attempt] = ev
	c.stats.acknowledged(p.stats, ev.Metrics, c.wall(c.now))
	if len(p.waiting) == 0 && !p.writing {
		p.writing = true
		c.ready.WriteMetadata = append(c.ready.WriteMetadata, MetadataWrite{ID: p.id, Location: p.location, Metadata: c.metadata(p)})
	}
}

// lateAck handles an acknowledgement of a checkpoint no longer pending: a
// completed one's state is in use (a resent ack), an aborted one's is not.
func (c *Coordinator) lateAck(ev Acknowledge) {
	o, ok := c.outcomes[ev.ID]
	if !ok || o.completed {
		return
	}
	c.shared.Orphan(ev.ID, ev.Operators)
	c.discardFiles(o.location, ev.Operators)
	if c.ended { // no task uploads any more
		c.discardShared("", c.shared.Sweep(c.nextID+1))
	}
}

func (c *Coordinator) discardFiles(location string, ops []*pb.OperatorSubtaskStateHandle) {
	var files []string
	for _, op := range ops {
		if f := op.GetFile().GetPath(); f != "" && !isAbsolute(f) && !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	if len(files) > 0 {
		c.ready.Discards = append(c.ready.Discards, Discard{Location: location, Files: files})
	}
}

func isAbsolute(p string) bool { return strings.HasPrefix(p, "/") || strings.Contains(p, "://") }

// metadata assembles the _metadata of a fully acknowledged checkpoint:
// every operator of the job, with the handles of its subtasks; subtasks
// that had FINISHED at trigger time are marked finished.
func (c *Coordinator) metadata(p *pending) *pb.CheckpointMetadata {
	md := &pb.CheckpointMetadata{Version: MetadataVersion, JobId: c.jobID, CheckpointId: p.id, Type: p.typ,
		TriggerTimestampMs: p.stats.TriggerTimestamp}
	byOp := map[string]*pb.OperatorState{}
	for _, v := range c.jg.Vertices {
		for _, op := range v.Operators {
			st := &pb.OperatorState{OperatorId: op.ID, OperatorName: op.Name, Parallelism: int32(v.Parallelism), MaxParallelism: int32(v.EffectiveMaxParallelism())}
			byOp[op.ID] = st
			md.Operators = append(md.Operators, st)
		}
	}
	for _, ack := range p.acks {
		for _, h := range ack.Operators {
			if st := byOp[h.OperatorId]; st != nil {
				st.Subtasks = append(st.Subtasks, h)
			}
		}
	}
	for _, a := range p.finished {
		v := c.jg.Vertex(a.JobVertex)
		if v == nil {
			continue
		}
		for _, op := range v.Operators {
			byOp[op.ID].Subtasks = append(byOp[op.ID].Subtasks, &pb.OperatorSubtaskStateHandle{OperatorId: op.ID,
				SubtaskIndex: a.Subtask, Parallelism: int32(v.Parallelism), MaxParallelism: int32(v.EffectiveMaxParallelism()), Finished: true})
		}
	}
	for _, st := range md.Operators {
		slices.SortFunc(st.Subtasks, func(a, b *pb.OperatorSubtaskStateHandle) int { return int(a.SubtaskIndex - b.SubtaskIndex) })
	}
	return md
}

func (c *Coordinator) metadataWritten(ev MetadataWritten) {
	p := c.pending[ev.ID]
	if p == nil || !p.writing {
		return
	}
	if ev.Err != nil {
		p.writing = false // ended: its directory can go now
		c.abort(p, fmt.Errorf("%w: %s: %w", ErrMetadataWrite, p.location, ev.Err), true)
		return
	}
	delete(c.pending, p.id)
	c.remember(p.id, outcome{location: p.location, completed: true})
	md := c.metadata(p)
	md.CompletionTimestampMs = c.wall(c.now)
	done := Completed{ID: p.id, Location: p.location, Metadata: md, Savepoint: p.savepoint()}
	c.latest = &done
	c.lastCompletion, c.hasCompletion = c.now, true
	c.stats.completed(p.stats, c.wall(c.now))
	if p.savepoint() {
		c.ready.Savepoints = append(c.ready.Savepoints, SavepointResult{RequestID: p.requestID, ID: p.id, Location: p.location})
	} else {
		c.failures = 0
		c.store = append(c.store, done)
		c.shared.Register(md)
		for len(c.store) > c.cfg.NumRetained {
			gone := c.shared.Unregister(c.store[0].Metadata)
			c.ready.Discards = append(c.ready.Discards, Discard{Location: c.store[0].Location, SharedFiles: gone})
			c.stats.discarded(c.store[0].ID)
			c.store = c.store[1:]
		}
		c.discardShared("", c.shared.Sweep(p.id))
	}
	c.ready.Notifications = append(c.ready.Notifications, Notification{ID: p.id, Complete: true, LastCompleted: p.id, Attempts: c.runningAttempts(nil)})
	// Older periodic checkpoints in progress are subsumed.
	for _, q := range c.pendingInOrder() {
		if q.id < p.id && !q.savepoint() {
			c.abort(q, fmt.Errorf("%w: %d", ErrSubsumed, p.id), false)
		}
	}
}

// abort ends p unsuccessfully: its tasks hear of it, its directory goes,
// a savepoint request gets the cause, and a counted failure may fail the
// job.
func (c *Coordinator) abort(p *pending, cause error, counted bool) {
	delete(c.pending, p.id)
	c.remember(p.id, outcome{location: p.location})
	c.stats.failed(p.stats, c.wall(c.now), cause)
	waited := make(map[eg.ExecutionAttemptID]bool, len(p.waiting)+len(p.acks))
	for a := range p.waiting {
		waited[a] = true
	}
	for a := range p.acks {
		waited[a] = true
	}
	if att := c.runningAttempts(waited); len(att) > 0 {
		c.ready.Notifications = append(c.ready.Notifications, Notification{ID: p.id, Attempts: att})
	}
	for _, ack := range p.acks {
		c.shared.Orphan(p.id, ack.Operators)
	}
	if p.writing {
		c.afterWrite[p.id] = p.location
	} else {
		c.ready.Discards = append(c.ready.Discards, Discard{Location: p.location})
	}
	if p.savepoint() {
		c.ready.Savepoints = append(c.ready.Savepoints, SavepointResult{RequestID: p.requestID, ID: p.id, Err: cause})
		return
	}
	if !counted {
		return
	}
	c.failures++
	if c.failures > c.cfg.TolerableFailures && c.ready.FailJob == nil {
		c.ready.FailJob = fmt.Errorf("%w (%d failed in a row, %d tolerated): %w", ErrTooManyFailures, c.failures, c.cfg.TolerableFailures, cause)
		c.failures = 0
	}
}

// discardAfterWrite discards an aborted checkpoint whose metadata write
// just ended.
func (c *Coordinator) discardAfterWrite(id int64) {
	if loc, ok := c.afterWrite[id]; ok {
		delete(c.afterWrite, id)
		c.ready.Discards = append(c.ready.Discards, Discard{Location: loc})
	}
}

func (c *Coordinator) remember(id int64, o outcome) {
	c.outcomes[id] = o
	c.oldest = append(c.oldest, id)
	if len(c.oldest) > outcomesKept {
		delete(c.outcomes, c.oldest[0])
		c.oldest = c.oldest[1:]
	}
}

// ---- tasks ----

func (c *Coordinator) tasksChanged(ev TasksChanged) {
	c.tasks = make(map[subtask]Task, len(ev.Tasks))
	for _, t := range ev.Tasks {
		c.tasks[subtask{t.Attempt.JobVertex, t.Attempt.Subtask}] = t
	}
	for a := range c.endOfData {
		if t, ok := c.tasks[subtask{a.JobVertex, a.Subtask}]; !ok || t.Attempt != a || t.State.IsTerminal() || t.State == eg.Canceling {
			delete(c.endOfData, a)
		}
	}
	c.updateAllEnded()
	for _, p := range c.pendingInOrder() {
		if p.writing {
			continue
		}
		for _, a := range sortedAttempts(p.waiting) {
			if t, ok := c.tasks[subtask{a.JobVertex, a.Subtask}]; !ok || t.Attempt != a || t.State != eg.Running {
				c.abort(p, fmt.Errorf("%w: %s", ErrTaskNotRunning, a), false)
				break
			}
		}
	}
}

// updateAllEnded makes the next checkpoint due at once when every
// unfinished task has just ended its data: it is their final checkpoint.
func (c *Coordinator) updateAllEnded() {
	all, running := true, 0
	for _, t := range c.tasks {
		switch {
		case t.State == eg.Finished:
		case t.State == eg.Running && c.endOfData[t.Attempt]:
			running++
		default:
			all = false
		}
	}
	all = all && running > 0
	if all && !c.allEnded {
		c.finalDue = true
	}
	c.allEnded = all
}

// runningAttempts are the current RUNNING attempts, only those in among
// when it is not nil, sorted.
func (c *Coordinator) runningAttempts(among map[eg.ExecutionAttemptID]bool) []eg.ExecutionAttemptID {
	var out []eg.ExecutionAttemptID
	for _, t := range c.sortedTasks() {
		if t.State == eg.Running && (among == nil || among[t.Attempt]) {
			out = append(out, t.Attempt)
		}
	}
	return out
}

func (c *Coordinator) sortedTasks() []Task {
	out := make([]Task, 0, len(c.tasks))
	for _, t := range c.tasks {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Task) int { return compareAttempts(a.Attempt, b.Attempt) })
	return out
}

func sortedAttempts(m map[eg.ExecutionAttemptID]bool) []eg.ExecutionAttemptID {
	out := make([]eg.ExecutionAttemptID, 0, len(m))
	for a := range m {
		out = append(out, a)
	}
	slices.SortFunc(out, compareAttempts)
	return out
}

func compareAttempts(a, b eg.ExecutionAttemptID) int {
	if c := strings.Compare(string(a.JobVertex), string(b.JobVertex)); c != 0 {
		return c
	}
	if a.Subtask != b.Subtask {
		return int(a.Subtask - b.Subtask)
	}
	return int(a.Attempt - b.Attempt)
}

func (c *Coordinator) pendingInOrder() []*pending {
	out := make([]*pending, 0, len(c.pending))
	for _, p := range c.pending {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *pending) int { return int(a.id - b.id) })
	return out
}

// ---- the end ----

func (c *Coordinator) jobEnded(st JobEndStatus) {
	for _, p := range c.pendingInOrder() {
		c.abort(p, ErrJobEnded, false)
	}
	c.ended = true
	discard := false
	switch st {
	case JobFinished:
		discard = true
	case JobCanceled:
		discard = c.cfg.Retention != conf.RetainOnCancellation
	case JobFailed:
		discard = c.cfg.Retention == conf.NoExternalizedCheckpoints
	}
	sharedDir := SharedLocation(c.cfg.CheckpointsDir, c.jobID)
	var gone []string
	if discard {
		for _, cp := range c.store {
			gone = append(gone, c.shared.Unregister(cp.Metadata)...)
			c.ready.Discards = append(c.ready.Discards, Discard{Location: cp.Location})
			c.stats.discarded(cp.ID)
		}
		c.store = nil
	}
	gone = append(gone, c.shared.Sweep(c.nextID+1)...)
	switch {
	case !c.shared.seen:
	case discard && c.cfg.CheckpointsDir != "" && !c.shared.Referenced(sharedDir):
		// Nothing needs the job's shared files any more.
		c.ready.Discards = append(c.ready.Discards, Discard{Location: sharedDir})
	default:
		slices.Sort(gone)
		c.discardShared("", slices.Compact(gone))
	}
}

// discardShared deletes shared files no checkpoint references (nothing
// when files is empty).
func (c *Coordinator) discardShared(location string, files []string) {
	if len(files) > 0 {
		c.ready.Discards = append(c.ready.Discards, Discard{Location: location, SharedFiles: files})
	}
}

func (c *Coordinator) wall(t time.Duration) int64 { return c.cfg.StartTime.Add(t).UnixMilli() }

func (c *Coordinator) random() uint64 {
	if c.cfg.Rand != nil {
		return c.cfg.Rand()
	}
	c.randSeq++
	return c.randSeq * 0x9e3779b97f4a7c15
}
