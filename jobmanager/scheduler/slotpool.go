package scheduler

import (
	"slices"

	eg "github.com/gofl/gofl/jobmanager/executiongraph"
)

// poolSlot is a slot the pool holds from a TaskManager.
type poolSlot struct {
	id        eg.AllocationID
	tm        *tmSlots
	owner     *sharedSlot // nil while free
	freeGen   uint64      // bumped whenever the slot becomes free
	lost      bool
	freeIndex int // position in tm.free, or -1
}

// tmSlots is the pool's view of one TaskManager.
type tmSlots struct {
	loc      eg.TaskManagerLocation
	order    int // registration order, for deterministic tie-breaks
	slots    []*poolSlot
	free     []*poolSlot
	withFree int // position in slotPool.withFree, or -1
}

// slotPool is Flink's declarative slot pool: it declares how many slots the
// job needs, accepts offered slots that match outstanding requests, hands
// free slots to new requests through the slot selection strategy, and
// returns slots idle for slot.idle.timeout.
type slotPool struct {
	s        *Scheduler
	sel      slotSelection
	slots    map[eg.AllocationID]*poolSlot
	tms      map[string]*tmSlots
	withFree []*tmSlots
	pending  []*sharedSlot // FIFO; withdrawn entries are skipped
	inUse    int
	queued   int // pending requests not withdrawn
	declared int
	nextTM   int
}

func newSlotPool(s *Scheduler, sel slotSelection) *slotPool {
	return &slotPool{s: s, sel: sel, slots: map[eg.AllocationID]*poolSlot{}, tms: map[string]*tmSlots{}}
}

func (p *slotPool) numSlots() int { return len(p.slots) }

// declare publishes the requirement when it changed.
func (p *slotPool) declare() {
	if n := p.inUse + p.queued; n != p.declared {
		p.declared = n
		p.s.ready.ResourceRequirements = &n
	}
}

// request finds a physical slot for ss now, or queues it.
func (p *slotPool) request(ss *sharedSlot) {
	if len(p.withFree) > 0 {
		if slot := p.sel.selectSlot(p, &ss.profile); slot != nil {
			p.assign(slot, ss)
			return
		}
	}
	ss.pending = true
	p.pending = append(p.pending, ss)
	p.queued++
}

// withdraw drops the pending request of a shared slot nobody needs anymore.
func (p *slotPool) withdraw(ss *sharedSlot) {
	if ss.pending {
		ss.pending = false
		p.queued--
		p.declare()
	}
}

func (p *slotPool) popPending() *sharedSlot {
	for len(p.pending) > 0 {
		ss := p.pending[0]
		p.pending[0] = nil
		p.pending = p.pending[1:]
		if ss.pending {
			ss.pending = false
			p.queued--
			return ss
		}
	}
	p.pending = nil
	return nil
}

// popPendingFor takes the pending request an offered slot of the
// TaskManager at loc suits best: the oldest that prefers that TaskManager
// (its inputs run there) or has loc's host as its first preferred host (a
// source's data), else the oldest of all.
func (p *slotPool) popPendingFor(loc eg.TaskManagerLocation) *sharedSlot {
	for i, ss := range p.pending {
		if ss == nil || !ss.pending {
			continue
		}
		prof := &ss.profile
		if prof.preferred[loc.ID] > 0 || (len(prof.hosts) > 0 && loc.Host != "" && prof.hosts[0] == loc.Host) {
			p.pending = slices.Delete(p.pending, i, i+1)
			ss.pending = false
			p.queued--
			return ss
		}
	}
	return p.popPending()
}

func (p *slotPool) assign(slot *poolSlot, ss *sharedSlot) {
	p.takeFree(slot)
	slot.owner = ss
	ss.physical = slot
	p.inUse++
	p.s.alloc.fulfilled(ss)
}

// free takes a slot back from its last execution: it serves the oldest
// pending request, or waits idle for reuse.
func (p *slotPool) free(slot *poolSlot) {
	slot.owner = nil
	p.inUse--
	if slot.lost {
		p.declare()
		return
	}
	if ss := p.popPending(); ss != nil {
		slot.owner = ss
		ss.physical = slot
		p.inUse++
		p.s.alloc.fulfilled(ss)
		p.declare()
		return
	}
	p.putFree(slot)
	p.declare()
}

func (p *slotPool) putFree(slot *poolSlot) {
	slot.freeGen++
	tm := slot.tm
	slot.freeIndex = len(tm.free)
	tm.free = append(tm.free, slot)
	if tm.withFree < 0 {
		tm.withFree = len(p.withFree)
		p.withFree = append(p.withFree, tm)
	}
	p.s.timers.addGen(p.s.now+p.s.cfg.SlotIdleTimeout, timerIdleSlot, slot, slot.freeGen)
}

func (p *slotPool) takeFree(slot *poolSlot) {
	tm := slot.tm
	i := slot.freeIndex
	if i < 0 {
		return
	}
	last := len(tm.free) - 1
	tm.free[i] = tm.free[last]
	tm.free[i].freeIndex = i
	tm.free = tm.free[:last]
	slot.freeIndex = -1
	if len(tm.free) == 0 {
		j := tm.withFree
		lastTM := len(p.withFree) - 1
		p.withFree[j] = p.withFree[lastTM]
		p.withFree[j].withFree = j
		p.withFree = p.withFree[:lastTM]
		tm.withFree = -1
	}
}

func (p *slotPool) offer(e SlotsOffered) {
	reply := SlotOfferReply{TaskManagerID: e.TaskManager.ID}
	defer func() { p.s.ready.SlotOfferReplies = append(p.s.ready.SlotOfferReplies, reply) }()
	if p.s.status.IsGloballyTerminal() {
		for _, o := range e.Slots {
			reply.Rejected = append(reply.Rejected, o.Allocation)
		}
		return
	}
	tm := p.tms[e.TaskManager.ID]
	if tm == nil {
		tm = &tmSlots{loc: e.TaskManager, order: p.nextTM, withFree: -1}
		p.nextTM++
		p.tms[tm.loc.ID] = tm
	}
	// Where it is now: a TaskManager that connected anew may serve the
	// job's data from a new runner, on a new data address.
	tm.loc = e.TaskManager
	for _, o := range e.Slots {
		if existing := p.slots[o.Allocation]; existing != nil {
			if existing.tm == tm {
				reply.Accepted = append(reply.Accepted, o.Allocation)
			} else {
				reply.Rejected = append(reply.Rejected, o.Allocation)
			}
			continue
		}
		ss := p.popPendingFor(tm.loc)
		if ss == nil {
			reply.Rejected = append(reply.Rejected, o.Allocation)
			continue
		}
		slot := &poolSlot{id: o.Allocation, tm: tm, freeIndex: -1}
		p.slots[slot.id] = slot
		tm.slots = append(tm.slots, slot)
		slot.owner = ss
		ss.physical = slot
		p.inUse++
		reply.Accepted = append(reply.Accepted, o.Allocation)
		p.s.alloc.fulfilled(ss)
	}
	p.declare()
}

func (p *slotPool) idleTimeout(slot *poolSlot, gen uint64) {
	if slot.owner != nil || slot.lost || slot.freeGen != gen || p.slots[slot.id] != slot {
		return
	}
	p.remove(slot)
	p.s.ready.SlotReleases = append(p.s.ready.SlotReleases, SlotRelease{TaskManagerID: slot.tm.loc.ID, Allocation: slot.id, Cause: "idle for slot.idle.timeout"})
}

// remove forgets a slot. A slot still owned is marked lost so its owner's
// release does not put it back.
func (p *slotPool) remove(slot *poolSlot) {
	p.takeFree(slot)
	delete(p.slots, slot.id)
	slot.lost = true
	tm := slot.tm
	for i, x := range tm.slots {
		if x == slot {
			tm.slots = append(tm.slots[:i], tm.slots[i+1:]...)
			break
		}
	}
	if len(tm.slots) == 0 {
		delete(p.tms, tm.loc.ID)
	}
}

// slotLost forgets a slot the pool can no longer use and returns the
// executions that ran in it, for the caller to fail.
func (p *slotPool) slotLost(id eg.AllocationID) []eg.VertexIndex {
	slot := p.slots[id]
	if slot == nil {
		return nil
	}
	return p.dropSlots([]*poolSlot{slot})
}

// taskManagerLost forgets every slot of the TaskManager and returns the
// executions that ran in them, for the caller to fail.
func (p *slotPool) taskManagerLost(id string) []eg.VertexIndex {
	tm := p.tms[id]
	if tm == nil {
		return nil
	}
	return p.dropSlots(append([]*poolSlot(nil), tm.slots...))
}

func (p *slotPool) dropSlots(slots []*poolSlot) []eg.VertexIndex {
	lost := map[*sharedSlot]bool{}
	for _, slot := range slots {
		if slot.owner != nil {
			lost[slot.owner] = true
		}
		p.remove(slot)
	}
	var victims []eg.VertexIndex
	if len(lost) > 0 {
		for v, ss := range p.s.alloc.slotOf {
			if ss != nil && lost[ss] {
				victims = append(victims, eg.VertexIndex(v))
			}
		}
	}
	p.declare()
	return victims
}

// releaseAll returns every slot, for the end of the job.
func (p *slotPool) releaseAll(cause string) {
	for _, tm := range p.sortedTMs() {
		for _, slot := range tm.slots {
			slot.lost = true
			p.s.ready.SlotReleases = append(p.s.ready.SlotReleases, SlotRelease{TaskManagerID: tm.loc.ID, Allocation: slot.id, Cause: cause})
		}
	}
	p.slots = map[eg.AllocationID]*poolSlot{}
	p.tms = map[string]*tmSlots{}
	p.withFree = nil
	for p.popPending() != nil {
	}
	p.inUse = 0
	p.declare()
}

func (p *slotPool) sortedTMs() []*tmSlots {
	out := make([]*tmSlots, 0, len(p.tms))
	for _, tm := range p.tms {
		out = append(out, tm)
	}
	slices.SortFunc(out, func(a, b *tmSlots) int { return a.order - b.order })
	return out
}

// location is where the TaskManager said it is when it last offered
// slots, or just its ID.
func (p *slotPool) location(tm string) eg.TaskManagerLocation {
	if t := p.tms[tm]; t != nil {
		return t.loc
	}
	return eg.TaskManagerLocation{ID: tm}
}
