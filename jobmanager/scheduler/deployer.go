package scheduler

import (
	"fmt"
	"slices"
	"time"

	eg "github.com/gofl/gofl/jobmanager/executiongraph"
)

// bulk is a set of executions scheduled together: they are deployed only
// once every one of them has a slot (Flink's physical slot request bulk).
type bulk struct {
	vertices []eg.VertexIndex // ascending: topological order
	slots    []*sharedSlot    // distinct shared slots the bulk needs
	waiting  int              // slots without a physical slot yet
	// strict bulks fail when not fulfilled within slot.request.timeout;
	// others only when they could not be fulfilled even with every slot of
	// the pool (Flink's bulk checker and batch slot requests).
	strict bool
	queued bool // in deployer.complete
	done   bool
}

type pendingRestart struct {
	vertices []eg.VertexIndex
	versions []uint32
	waiting  int // vertices this restart owns that are not terminal yet
	due      bool
	done     bool
}

// deployer is Flink's DefaultScheduler deployment path: it takes bulks from
// the strategy, allocates their slots, and deploys them when complete. It
// also runs restarts once their backoff has passed.
type deployer struct {
	s         *Scheduler
	bulkOf    []*bulk // per vertex while SCHEDULED
	restarts  []*pendingRestart
	restartOf []*pendingRestart // the newest restart owning each vertex
	// complete holds bulks whose slots are all there. They are deployed at
	// the end of the Step, so a bulk completed halfway through cancelling
	// many executions never deploys executions about to be cancelled.
	complete []*bulk
}

func newDeployer(s *Scheduler) *deployer {
	return &deployer{s: s, bulkOf: make([]*bulk, len(s.g.Vertices)), restartOf: make([]*pendingRestart, len(s.g.Vertices))}
}

// AllocateSlotsAndDeploy implements SchedulerOperations. Every vertex must
// be CREATED.
func (d *deployer) AllocateSlotsAndDeploy(vs []eg.VertexIndex, strict bool) {
	s := d.s
	if len(vs) == 0 || s.status != JobRunning {
		return
	}
	b := &bulk{vertices: slices.Clone(vs), strict: strict}
	slices.Sort(b.vertices)
	b.vertices = slices.DeleteFunc(b.vertices, func(v eg.VertexIndex) bool {
		if st := s.g.Vertices[v].Current.State; st != eg.Created {
			s.illegal(fmt.Errorf("strategy scheduled %s in state %s, want CREATED", s.g.AttemptID(v), st))
			return true
		}
		return false
	})
	if len(b.vertices) == 0 {
		return
	}
	for _, v := range b.vertices {
		s.transition(v, eg.Scheduled)
		d.bulkOf[v] = b
	}
	s.alloc.allocate(b)
	if b.waiting == 0 {
		d.queue(b)
		return
	}
	s.timers.add(s.now+s.cfg.SlotRequestTimeout, timerBulk, b)
}

// slotFulfilled is called when a shared slot of b got its physical slot.
func (d *deployer) slotFulfilled(b *bulk) {
	if b.done {
		return
	}
	if b.waiting--; b.waiting == 0 {
		d.queue(b)
	}
}

func (d *deployer) queue(b *bulk) {
	if !b.queued {
		b.queued = true
		d.complete = append(d.complete, b)
	}
}

// deployComplete deploys the bulks completed during this Step, in order.
func (d *deployer) deployComplete() {
	for i := 0; i < len(d.complete); i++ {
		if b := d.complete[i]; !b.done {
			d.deploy(b)
		}
		d.complete[i] = nil
	}
	d.complete = d.complete[:0]
}

func (d *deployer) deploy(b *bulk) {
	s := d.s
	b.done = true
	for _, v := range b.vertices {
		if d.bulkOf[v] != b {
			continue
		}
		d.bulkOf[v] = nil
		ex := &s.g.Vertices[v].Current
		if ex.State != eg.Scheduled {
			continue // canceled while waiting
		}
		slot := s.alloc.slotOf[v]
		ex.Allocation, ex.Location = slot.physical.id, slot.physical.tm.loc
		s.transition(v, eg.Deploying)
		s.tracker.startTracking(v)
		s.ready.Deployments = append(s.ready.Deployments, Deployment{TaskManager: ex.Location, Descriptor: s.tdds.build(v)})
	}
}

// checkBulk runs when a bulk's slot request timeout passes.
func (d *deployer) checkBulk(b *bulk) {
	s := d.s
	if b.done {
		return
	}
	if !b.strict && len(b.slots) <= s.pool.numSlots() {
		// Fulfillable once other tasks free their slots: keep waiting.
		s.timers.add(s.now+s.cfg.SlotRequestTimeout, timerBulk, b)
		return
	}
	d.failBulk(b, fmt.Errorf("%w: %d slots requested, %d in the pool, within slot.request.timeout (%v)",
		ErrNoResourceAvailable, len(b.slots), s.pool.numSlots(), s.cfg.SlotRequestTimeout))
}

func (d *deployer) failBulk(b *bulk, cause error) {
	b.done = true
	var vs []eg.VertexIndex
	for _, v := range b.vertices {
		if d.bulkOf[v] == b {
			d.bulkOf[v] = nil
			vs = append(vs, v)
		}
	}
	d.s.failExecutions(vs, cause)
}

func (d *deployer) failPendingBulks(cause error) {
	var pending []*bulk
	seen := map[*bulk]bool{}
	for _, b := range d.bulkOf {
		if b != nil && !b.done && !seen[b] {
			seen[b] = true
			pending = append(pending, b)
		}
	}
	for _, b := range pending {
		if !b.done {
			d.failBulk(b, cause)
		}
	}
}

// cancelExecution stops one execution: immediately if it never reached a
// TaskManager, else by asking its TaskManager.
func (d *deployer) cancelExecution(v eg.VertexIndex) {
	s := d.s
	ex := &s.g.Vertices[v].Current
	switch ex.State {
	case eg.Created, eg.Scheduled:
		d.bulkOf[v] = nil
		s.transition(v, eg.Canceled)
	case eg.Deploying, eg.Initializing, eg.Running:
		s.transition(v, eg.Canceling)
		s.ready.Cancellations = append(s.ready.Cancellations, Cancellation{TaskManager: ex.Location, Attempt: s.g.AttemptID(v)})
	}
}

// restartWithDelay cancels vs and restarts them once all are terminal and
// the backoff has passed.
func (d *deployer) restartWithDelay(vs []eg.VertexIndex, delay time.Duration) {
	s := d.s
	r := &pendingRestart{vertices: vs, versions: make([]uint32, len(vs))}
	for i, v := range vs {
		s.versions[v]++
		r.versions[i] = s.versions[v]
		terminal := s.g.Vertices[v].Current.State.IsTerminal()
		if old := d.restartOf[v]; old != nil && !terminal {
			old.waiting-- // the older restart no longer waits for v
		}
		d.restartOf[v] = r
		if !terminal {
			r.waiting++
		}
	}
	d.restarts = append(d.restarts, r)
	for _, v := range vs {
		d.cancelExecution(v)
	}
	if delay <= 0 {
		r.due = true
	} else {
		s.timers.add(s.now+delay, timerRestart, r)
	}
	d.tryRestarts()
}

// executionTerminated is called for every execution that becomes terminal.
func (d *deployer) executionTerminated(v eg.VertexIndex) {
	if r := d.restartOf[v]; r != nil {
		r.waiting--
	}
}

// tryRestarts runs every due restart whose executions have all stopped.
func (d *deployer) tryRestarts() {
	s := d.s
	for i := 0; i < len(d.restarts); i++ {
		r := d.restarts[i]
		if r.done || !r.due || r.waiting > 0 {
			continue
		}
		r.done = true
		var reset []eg.VertexIndex
		for j, v := range r.vertices {
			if s.versions[v] != r.versions[j] {
				continue // a newer failure handling owns this vertex now
			}
			d.restartOf[v] = nil
			st := s.g.Vertices[v].Current.State
			if !st.IsTerminal() {
				s.illegal(fmt.Errorf("restarting %s in state %s, want a terminal state", s.g.AttemptID(v), st))
				continue
			}
			s.tracker.releaseProducedBy(v)
			s.tdds.producerReset(v)
			if err := s.g.ResetVertex(v); err != nil {
				s.illegal(fmt.Errorf("restarting: %w", err))
				continue
			}
			wasFinished := st == eg.Finished
			if wasFinished {
				s.finished--
			}
			s.active++
			reset = append(reset, v)
		}
		s.restarts++
		if s.status == JobRestarting {
			s.setStatus(JobRunning, nil)
		}
		if len(reset) > 0 && s.status == JobRunning {
			s.strategy.RestartTasks(reset)
		}
	}
	d.restarts = slices.DeleteFunc(d.restarts, func(r *pendingRestart) bool { return r.done })
}

func (d *deployer) restartDue(r *pendingRestart) {
	if !r.done {
		r.due = true
		d.tryRestarts()
	}
}

func (d *deployer) dropPendingRestarts() {
	for _, r := range d.restarts {
		r.done = true
	}
	d.restarts = nil
	clear(d.restartOf)
}
