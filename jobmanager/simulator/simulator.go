package simulator

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/gofl/gofl/jobgraph"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/jobmanager/scheduler"
)

// ErrInvariant is wrapped by violations of the simulated cluster's rules,
// which point at scheduler bugs.
var ErrInvariant = errors.New("simulator: invariant violated")

// Options describe the simulated cluster and its faults.
type Options struct {
	TaskManagers     int
	SlotsPerTM       int
	Seed             uint64
	MinTaskDuration  time.Duration
	MaxTaskDuration  time.Duration
	HeartbeatTimeout time.Duration // until a dead TaskManager is noticed
	// KillAt kills one TaskManager that runs tasks at each of these times;
	// a replacement registers ReplaceAfter later.
	KillAt       []time.Duration
	ReplaceAfter time.Duration
	// Limit stops a simulation that does not end (a scheduler bug).
	Limit time.Duration
	// Observe, if set, sees every Ready the scheduler produced.
	Observe func(now time.Duration, r *scheduler.Ready)
	// Log, if set, hears about simulated cluster events (kills, new TaskManagers).
	Log func(now time.Duration, msg string)
}

// Result summarizes a run.
type Result struct {
	Status      scheduler.JobStatus
	Elapsed     time.Duration // logical
	Deployments int
	Restarts    int
	Killed      []string
	Failures    []scheduler.FailureRecord
}

type task struct {
	attempt eg.ExecutionAttemptID
	tm      string
	slot    eg.AllocationID
	readyAt time.Duration // done with its own work
	state   eg.ExecutionState
}

type simTM struct {
	id    string
	alive bool
	slots []eg.AllocationID
	tasks map[eg.ExecutionAttemptID]*task
}

type sim struct {
	opts  Options
	s     *scheduler.Scheduler
	rng   *rand.Rand
	now   time.Duration
	queue eventQueue
	tms   map[string]*simTM
	order []string
	// slotHolder is who holds each slot: "" free at the RM, "jm" offered to
	// or held by the job.
	slotHolder map[eg.AllocationID]string
	slotTM     map[eg.AllocationID]string
	required   int
	held       int
	nextTM     int
	wakeAt     time.Duration
	hasWake    bool
	res        Result
	err        error
}

// Run simulates jg under cfg until the job ends or opts.Limit passes.
func Run(cfg scheduler.Config, jg *jobgraph.JobGraph, opts Options) (Result, error) {
	if opts.TaskManagers < 1 || opts.SlotsPerTM < 1 {
		return Result{}, fmt.Errorf("simulator: need at least one TaskManager with one slot")
	}
	if opts.MaxTaskDuration < opts.MinTaskDuration {
		opts.MaxTaskDuration = opts.MinTaskDuration
	}
	if opts.Limit <= 0 {
		opts.Limit = time.Hour
	}
	cfg.StrictTransitions = true // a bug of the core panics here
	s, err := scheduler.New(cfg, jg, opts.Seed+1)
	if err != nil {
		return Result{}, err
	}
	m := &sim{opts: opts, s: s, rng: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		tms: map[string]*simTM{}, slotHolder: map[eg.AllocationID]string{}, slotTM: map[eg.AllocationID]string{}}
	for i := 0; i < opts.TaskManagers; i++ {
		m.addTM()
	}
	for _, at := range opts.KillAt {
		m.at(at, m.killOne)
	}
	m.step(scheduler.StartScheduling{})
	for m.err == nil && !s.Status().IsGloballyTerminal() {
		ev, ok := m.queue.pop()
		if !ok {
			m.err = fmt.Errorf("%w: nothing left to happen but the job is %s", ErrInvariant, s.Status())
			break
		}
		if ev.at > opts.Limit {
			m.err = fmt.Errorf("%w: job still %s at the %v limit", ErrInvariant, s.Status(), opts.Limit)
			break
		}
		m.now = ev.at
		ev.fn()
	}
	m.res.Status = s.Status()
	m.res.Elapsed = m.now
	m.res.Restarts = s.NumRestarts()
	m.res.Failures = s.ExceptionHistory()
	return m.res, m.err
}

func (m *sim) at(t time.Duration, fn func()) { m.queue.push(t, fn) }

func (m *sim) addTM() *simTM {
	tm := &simTM{id: fmt.Sprintf("tm-%d", m.nextTM), alive: true, tasks: map[eg.ExecutionAttemptID]*task{}}
	m.nextTM++
	for i := 0; i < m.opts.SlotsPerTM; i++ {
		id := eg.AllocationID(fmt.Sprintf("%s/%d", tm.id, i))
		tm.slots = append(tm.slots, id)
		m.slotHolder[id] = ""
		m.slotTM[id] = tm.id
	}
	m.tms[tm.id] = tm
	m.order = append(m.order, tm.id)
	return tm
}

func (m *sim) step(ev scheduler.Event) {
	if m.err != nil {
		return
	}
	if err := m.s.Step(m.now, ev); err != nil {
		m.err = fmt.Errorf("%w: scheduler rejected %T: %v", ErrInvariant, ev, err)
		return
	}
	r := m.s.Ready()
	if m.opts.Observe != nil {
		m.opts.Observe(m.now, &r)
	}
	m.handle(&r)
}

func (m *sim) handle(r *scheduler.Ready) {
	for _, rep := range r.SlotOfferReplies {
		for _, id := range rep.Rejected {
			m.returnSlot(id)
		}
	}
	for _, rel := range r.SlotReleases {
		m.returnSlot(rel.Allocation)
	}
	if r.ResourceRequirements != nil {
		m.required = *r.ResourceRequirements
	}
	m.offerSlots()
	for _, d := range r.Deployments {
		m.deploy(d)
	}
	for _, c := range r.Cancellations {
		m.cancel(c)
	}
	if r.HasWakeAt && (!m.hasWake || r.WakeAt != m.wakeAt) {
		m.hasWake, m.wakeAt = true, r.WakeAt
		at := r.WakeAt
		m.at(at, func() {
			if m.hasWake && m.wakeAt == at {
				m.hasWake = false
				m.step(scheduler.Tick{})
			}
		})
	}
}

func (m *sim) returnSlot(id eg.AllocationID) {
	if m.slotHolder[id] == "jm" {
		m.slotHolder[id] = ""
		m.held--
	}
}

// offerSlots is the ResourceManager's SlotManager: it offers free slots of
// live TaskManagers while the job needs more than it holds.
func (m *sim) offerSlots() {
	for _, tmID := range m.order {
		tm := m.tms[tmID]
		if !tm.alive || m.held >= m.required {
			continue
		}
		ev := scheduler.SlotsOffered{TaskManager: eg.TaskManagerLocation{ID: tm.id, Host: "sim", DataAddress: tm.id + ":0"}}
		for i, id := range tm.slots {
			if m.held >= m.required {
				break
			}
			if m.slotHolder[id] == "" {
				m.slotHolder[id] = "jm"
				m.held++
				ev.Slots = append(ev.Slots, scheduler.SlotOffer{Allocation: id, SlotIndex: i})
			}
		}
		if len(ev.Slots) > 0 {
			m.at(m.now+time.Millisecond, func() {
				if m.tms[ev.TaskManager.ID].alive {
					m.step(ev)
				}
			})
		}
	}
}

func (m *sim) deploy(d scheduler.Deployment) {
	m.res.Deployments++
	a := d.Descriptor.Attempt
	id := eg.ExecutionAttemptID{Graph: a.Graph, JobVertex: jobgraph.VertexID(a.JobVertexId), Subtask: a.SubtaskIndex, Attempt: a.AttemptNumber}
	tm := m.tms[d.TaskManager.ID]
	slot := eg.AllocationID(d.Descriptor.AllocationId)
	if m.slotHolder[slot] != "jm" || m.slotTM[slot] != d.TaskManager.ID {
		m.err = fmt.Errorf("%w: %s deployed to slot %s the job does not hold", ErrInvariant, id, slot)
		return
	}
	if !tm.alive {
		m.at(m.now+time.Millisecond, func() {
			m.step(scheduler.DeploymentFailed{Attempt: id, TaskManager: d.TaskManager, Cause: fmt.Errorf("TaskManager %s unreachable", tm.id)})
		})
		return
	}
	for _, other := range m.tms {
		for _, o := range other.tasks {
			if other.alive && o.attempt.JobVertex == id.JobVertex && o.attempt.Subtask == id.Subtask {
				m.err = fmt.Errorf("%w: %s deployed while %s still runs on %s", ErrInvariant, id, o.attempt, other.id)
				return
			}
		}
	}
	t := &task{attempt: id, tm: tm.id, slot: slot, state: eg.Deploying}
	span := m.opts.MaxTaskDuration - m.opts.MinTaskDuration
	t.readyAt = m.now + m.opts.MinTaskDuration
	if span > 0 {
		t.readyAt += time.Duration(m.rng.Int64N(int64(span)))
	}
	tm.tasks[id] = t
	m.at(m.now+time.Millisecond, func() { m.report(tm, t, eg.Initializing) })
	m.at(m.now+2*time.Millisecond, func() { m.report(tm, t, eg.Running) })
	m.at(t.readyAt, func() { m.tryFinish(tm, t) })
}

func (m *sim) report(tm *simTM, t *task, state eg.ExecutionState) {
	if !tm.alive || tm.tasks[t.attempt] != t || t.state.IsTerminal() || t.state == eg.Canceling {
		return
	}
	t.state = state
	if state.IsTerminal() {
		delete(tm.tasks, t.attempt)
	}
	m.step(scheduler.TaskStateChanged{Attempt: t.attempt, State: state})
	if state == eg.Finished {
		m.retryWaiting()
	}
}

// tryFinish ends a task whose work is done once all its PIPELINED producers
// have finished, as a streaming task ends when its inputs end.
func (m *sim) tryFinish(tm *simTM, t *task) {
	if t.state != eg.Running || !tm.alive {
		if t.state == eg.Initializing || t.state == eg.Deploying {
			m.at(m.now+time.Millisecond, func() { m.tryFinish(tm, t) })
		}
		return
	}
	g := m.s.Graph()
	v, err := g.Lookup(t.attempt)
	if err != nil {
		return
	}
	for _, gi := range g.Vertices[v].Inputs {
		if !g.IsBlocking(gi) && g.Groups[gi].UnfinishedPartitions > 0 {
			t.readyAt = -1 // waiting for producers; retried when tasks finish
			return
		}
	}
	m.report(tm, t, eg.Finished)
}

func (m *sim) retryWaiting() {
	for _, id := range m.order {
		tm := m.tms[id]
		var waiting []*task
		for _, t := range tm.tasks {
			if t.readyAt == -1 {
				waiting = append(waiting, t)
			}
		}
		sort.Slice(waiting, func(i, j int) bool { return waiting[i].attempt.String() < waiting[j].attempt.String() })
		for _, t := range waiting {
			t.readyAt = m.now
			m.at(m.now+time.Millisecond, func() { m.tryFinish(tm, t) })
		}
	}
}

func (m *sim) cancel(c scheduler.Cancellation) {
	tm := m.tms[c.TaskManager.ID]
	if tm == nil || !tm.alive {
		return // the TaskManager's loss is reported instead
	}
	t := tm.tasks[c.Attempt]
	if t == nil {
		// Already ended; a real TaskManager answers with the final state it sent.
		return
	}
	t.state = eg.Canceling
	m.at(m.now+time.Millisecond, func() {
		if tm.alive && tm.tasks[t.attempt] == t {
			delete(tm.tasks, t.attempt)
			t.state = eg.Canceled
			m.step(scheduler.TaskStateChanged{Attempt: t.attempt, State: eg.Canceled})
		}
	})
}

// killOne kills the TaskManager running the most tasks; the JobMaster hears
// after the heartbeat timeout, and a replacement registers later.
func (m *sim) killOne() {
	var victim *simTM
	for _, id := range m.order {
		tm := m.tms[id]
		if tm.alive && (victim == nil || len(tm.tasks) > len(victim.tasks)) {
			victim = tm
		}
	}
	if victim == nil {
		return
	}
	victim.alive = false
	m.res.Killed = append(m.res.Killed, victim.id)
	m.log("TaskManager %s killed with %d tasks", victim.id, len(victim.tasks))
	for _, id := range victim.slots {
		if m.slotHolder[id] == "jm" {
			m.held--
		}
		m.slotHolder[id] = "dead"
	}
	m.at(m.now+m.opts.HeartbeatTimeout, func() {
		m.step(scheduler.TaskManagerLost{TaskManagerID: victim.id, Cause: errors.New("heartbeat timeout")})
	})
	m.at(m.now+m.opts.ReplaceAfter, func() {
		tm := m.addTM()
		m.log("TaskManager %s registered with %d slots", tm.id, len(tm.slots))
		m.offerSlots()
	})
}

func (m *sim) log(format string, args ...any) {
	if m.opts.Log != nil {
		m.opts.Log(m.now, fmt.Sprintf(format, args...))
	}
}

type simEvent struct {
	at  time.Duration
	seq uint64
	fn  func()
}

type eventQueue struct {
	h   []simEvent
	seq uint64
}

func (q *eventQueue) Len() int { return len(q.h) }
func (q *eventQueue) Less(i, j int) bool {
	return q.h[i].at < q.h[j].at || (q.h[i].at == q.h[j].at && q.h[i].seq < q.h[j].seq)
}
func (q *eventQueue) Swap(i, j int) { q.h[i], q.h[j] = q.h[j], q.h[i] }
func (q *eventQueue) Push(x any)    { q.h = append(q.h, x.(simEvent)) }
func (q *eventQueue) Pop() any {
	e := q.h[len(q.h)-1]
	q.h = q.h[:len(q.h)-1]
	return e
}

func (q *eventQueue) push(at time.Duration, fn func()) {
	q.seq++
	heap.Push(q, simEvent{at: at, seq: q.seq, fn: fn})
}

func (q *eventQueue) pop() (simEvent, bool) {
	if len(q.h) == 0 {
		return simEvent{}, false
	}
	return heap.Pop(q).(simEvent), true
}
