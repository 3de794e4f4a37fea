package resourcemanager

import (
	"fmt"
	"slices"
	"time"

	"github.com/gofl/gofl/internal/backoff"
)

// workerPlanner is the active ResourceManager's decision logic about
// workers (TaskManagers a provider starts), pure like slotManager: no
// goroutines, no clock, no I/O. Events go in as method calls with the time;
// plan returns what to do: how many workers to request, which to release,
// whether starting workers has failed too often, and when to wake up.
//
// Counting. A worker is pending from its RequestWorker call until its slots
// are usable (its TaskExecutor registered and reported them: ready), so a
// burst of requirements never over-provisions: with M the slots the jobs
// miss (beyond what they hold and what is in flight), F the free slots and
// P the pending workers, plan requests ceil((M − F − P·slots)/slots)
// workers, and enough to reach the minimum number of slots.
//
// Failures. A failed start is a rejected RequestWorker, a worker that ends
// before it is ready, or one not ready within the registration timeout
// (which is then released). After a failure no worker is requested before
// the backoff passed (internal/backoff: the retry interval, doubled with
// each consecutive failure up to the maximum, ±20% jitter) and then only one at a time until a worker
// becomes ready, which resets the count. Failures that arrive during a
// backoff pause belong to the attempt that started it, so a burst failing
// together counts once. When the count reaches maxFailedStarts, plan
// reports Exhausted (again after each further failure) so the RM fails the
// jobs waiting for slots; it keeps probing at the maximum interval, so a
// repaired environment recovers.
//
// Idle release. A ready worker whose slots are all free for idleTimeout is
// released, unless that would leave fewer slots than the minimum.
type workerPlanner struct {
	cfg workerPlannerConfig

	inFlight int // RequestWorker calls without a result yet
	workers  map[string]*plannedWorker

	failures    int       // consecutive failed starts
	retryAt     time.Time // no request before this
	lastFailure string
	exhausted   bool // a failure at or past the maximum awaits reporting
}

type workerPlannerConfig struct {
	SlotsPerWorker      int           // taskmanager.numberOfTaskSlots
	MinSlots            int           // slotmanager.number-of-slots.min
	InitialSlots        int           // ActiveConfig.InitialSlots: asked for once, at the first plan
	IdleTimeout         time.Duration // resourcemanager.taskmanager-timeout
	RegistrationTimeout time.Duration // resourcemanager.taskmanager-registration.timeout
	MaxFailedStarts     int           // resourcemanager.start-worker.max-attempts
	RetryInterval       time.Duration // resourcemanager.start-worker.retry-interval
	MaxRetryInterval    time.Duration // resourcemanager.start-worker.max-retry-interval
	// Rand draws the backoff's jitter, uniform in [0, 1); nil: math/rand/v2.
	Rand func() float64
}

type workerPhase int

const (
	// workerStarting: requested or running, slots not usable yet.
	workerStarting workerPhase = iota
	// workerReady: its slots are in the slot manager.
	workerReady
	// workerGone: it terminated before its RequestWorker returned; kept
	// until then (or the registration timeout) so the result counts it as
	// a failed start.
	workerGone
)

type plannedWorker struct {
	id        string
	phase     workerPhase
	claimed   bool      // its RequestWorker returned it
	since     time.Time // when it entered its phase
	idleSince time.Time // ready with all slots free since; zero: busy
	releasing bool      // a release was decided
}

// workerRelease is a worker to release and why.
type workerRelease struct {
	ID, Reason string
}

// workerActions is what plan decided.
type workerActions struct {
	// Request is how many RequestWorker calls to make now.
	Request int
	// Release are the workers to stop.
	Release []workerRelease
	// Exhausted: starting workers failed maxFailedStarts times in a row;
	// Cause says how, for the jobs waiting for slots.
	Exhausted bool
	Cause     string
	// WakeAt: call plan again at this time (zero: no timer needed).
	WakeAt time.Time
}

func newWorkerPlanner(cfg workerPlannerConfig) *workerPlanner {
	if cfg.SlotsPerWorker < 1 {
		cfg.SlotsPerWorker = 1
	}
	if cfg.MaxFailedStarts < 1 {
		cfg.MaxFailedStarts = 1
	}
	if cfg.MaxRetryInterval < cfg.RetryInterval {
		cfg.MaxRetryInterval = cfg.RetryInterval
	}
	return &workerPlanner{cfg: cfg, workers: map[string]*plannedWorker{}}
}

// requestDone records a RequestWorker result: the new worker's ID, or the
// error that started none.
func (p *workerPlanner) requestDone(now time.Time, id string, err error) {
	if p.inFlight > 0 {
		p.inFlight--
	}
	if err != nil {
		p.failed(now, fmt.Sprintf("the provider could not start a TaskManager: %v", err))
		return
	}
	w, ok := p.workers[id]
	switch {
	case !ok:
		p.workers[id] = &plannedWorker{id: id, phase: workerStarting, claimed: true, since: now}
	case w.phase == workerGone:
		delete(p.workers, id)
		p.failed(now, fmt.Sprintf("TaskManager %s ended right after it was started", id))
	default:
		w.claimed = true
	}
}

// started records a WorkerStarted event.
func (p *workerPlanner) started(now time.Time, id string) {
	if _, ok := p.workers[id]; ok || p.inFlight == 0 {
		return // known, or not ours
	}
	// Ahead of its RequestWorker result: inFlight still counts it.
	p.workers[id] = &plannedWorker{id: id, phase: workerStarting, since: now}
}

// ready records that a worker's slots are usable (its TaskExecutor
// registered and reported them). Unknown workers are ignored.
func (p *workerPlanner) ready(now time.Time, id string) {
	w, ok := p.workers[id]
	if !ok || w.phase != workerStarting {
		return
	}
	w.phase, w.since = workerReady, now
	p.failures, p.retryAt, p.exhausted = 0, time.Time{}, false
}

// terminated records that a worker ended (a WorkerTerminated event).
// why describes it for the failure message.
func (p *workerPlanner) terminated(now time.Time, id, why string) {
	w, ok := p.workers[id]
	if !ok {
		if p.inFlight > 0 {
			p.workers[id] = &plannedWorker{id: id, phase: workerGone, since: now}
		}
		return
	}
	if w.phase == workerGone {
		return
	}
	delete(p.workers, id)
	if w.phase == workerStarting && !w.releasing {
		if !w.claimed {
			// Its RequestWorker result is still to come: let it count.
			p.workers[id] = &plannedWorker{id: id, phase: workerGone, since: now}
			return
		}
		p.failed(now, fmt.Sprintf("TaskManager %s ended before it registered: %s", id, why))
	}
}

// failed counts a failed start and schedules the backoff.
func (p *workerPlanner) failed(now time.Time, why string) {
	p.lastFailure = why
	if now.Before(p.retryAt) {
		return // part of the attempt already backing off
	}
	p.failures++
	bo := backoff.Config{Initial: p.cfg.RetryInterval, Max: p.cfg.MaxRetryInterval, Multiplier: 2, Jitter: 0.2}
	p.retryAt = now.Add(bo.Delay(p.failures-1, p.cfg.Rand))
	if p.failures >= p.cfg.MaxFailedStarts {
		p.exhausted = true
	}
}

// pending counts workers whose slots are not usable yet and that are not
// being released: requests in flight and claimed starting workers.
func (p *workerPlanner) pending() int {
	n := p.inFlight
	for _, w := range p.workers {
		if w.phase == workerStarting && w.claimed && !w.releasing {
			n++
		}
	}
	return n
}

// startingIDs lists the workers not ready yet, for the RM to check whether
// their slots became usable.
func (p *workerPlanner) startingIDs() []string {
	var out []string
	for id, w := range p.workers {
		if w.phase == workerStarting {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// owns reports whether the planner knows the worker (started by the provider
// for this RM and not yet terminated).
func (p *workerPlanner) owns(id string) bool {
	w, ok := p.workers[id]
	return ok && w.phase != workerGone
}

// plan decides. missing is the slot manager's missing slots (after
// matching), free its free slots, idle tells whether a ready worker has all
// its slots free, and total the slots of all registered TaskManagers.
func (p *workerPlanner) plan(now time.Time, missing, free, total int, idle func(id string) bool) workerActions {
	var a workerActions
	wake := func(t time.Time) {
		if a.WakeAt.IsZero() || t.Before(a.WakeAt) {
			a.WakeAt = t
		}
	}
	ids := make([]string, 0, len(p.workers))
	for id := range p.workers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	spw := p.cfg.SlotsPerWorker

	// Registration timeouts and stale tombstones.
	for _, id := range ids {
		w := p.workers[id]
		switch {
		case w.phase == workerGone:
			if now.Sub(w.since) >= p.cfg.RegistrationTimeout {
				delete(p.workers, id)
			}
		case w.phase == workerStarting && w.claimed && !w.releasing:
			deadline := w.since.Add(p.cfg.RegistrationTimeout)
			if !now.Before(deadline) {
				w.releasing = true
				reason := fmt.Sprintf("did not register within %s (resourcemanager.taskmanager-registration.timeout)", p.cfg.RegistrationTimeout)
				a.Release = append(a.Release, workerRelease{ID: id, Reason: reason})
				p.failed(now, fmt.Sprintf("TaskManager %s %s", id, reason))
			} else {
				wake(deadline)
			}
		}
	}

	// Idle release, never below the minimum and never while slots are missing.
	keep := total - p.cfg.MinSlots
	for _, id := range ids {
		w, ok := p.workers[id]
		if !ok || w.phase != workerReady || w.releasing {
			continue
		}
		if !idle(id) || missing > 0 {
			w.idleSince = time.Time{}
			continue
		}
		if w.idleSince.IsZero() {
			w.idleSince = now
		}
		deadline := w.idleSince.Add(p.cfg.IdleTimeout)
		if now.Before(deadline) {
			wake(deadline)
			continue
		}
		if keep < spw {
			continue // needed for the minimum; looked at again on the next change
		}
		keep -= spw
		w.releasing = true
		a.Release = append(a.Release, workerRelease{ID: id, Reason: fmt.Sprintf("idle for %s (resourcemanager.taskmanager-timeout)", p.cfg.IdleTimeout)})
	}

	if p.exhausted {
		a.Exhausted, a.Cause = true, p.lastFailure
		p.exhausted = false
	}

	// Requests.
	pending := p.pending()
	need := max(missing-free, p.cfg.MinSlots-total, p.cfg.InitialSlots-total) - pending*spw
	p.cfg.InitialSlots = 0 // once: later needs are the jobs'
	if need > 0 {
		n := (need + spw - 1) / spw
		switch {
		case now.Before(p.retryAt):
			wake(p.retryAt)
			n = 0
		case p.failures > 0:
			// Probing after failures: one at a time.
			n = min(n, max(0, 1-pending))
		}
		p.inFlight += n
		a.Request = n
	}
	return a
}

// release records that the RM decided to stop a worker (e.g. its
// TaskExecutor was lost); its termination is then no failed start.
func (p *workerPlanner) release(id string) {
	if w, ok := p.workers[id]; ok {
		w.releasing = true
	}
}
