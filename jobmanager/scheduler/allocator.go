package scheduler

import (
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
)

// slotKey names the slot an execution runs in. Executions with equal keys
// share one physical slot.
type slotKey struct {
	group   string
	subtask int32
	vertex  eg.VertexIndex // set only for executions that share with nobody
}

// sharedSlot is one physical slot as seen by the executions in it (Flink's
// SharedSlot with its logical slots).
type sharedSlot struct {
	key      slotKey
	physical *poolSlot // nil while the request is pending
	members  int       // executions holding a logical slot in it
	waiting  []*bulk   // bulks waiting for the physical slot
	lastBulk *bulk
	profile  slotProfile
	pending  bool // queued in the pool
	released bool
}

// slotAllocator is the ExecutionSlotAllocator. In slot-sharing mode the
// subtasks with the same index of one slot sharing group share a slot; in
// simple mode every execution gets its own slot, except co-located ones.
type slotAllocator struct {
	s       *Scheduler
	sharing bool
	shared  map[slotKey]*sharedSlot
	slotOf  []*sharedSlot // per vertex, while it holds a logical slot
}

func newSlotAllocator(s *Scheduler, mode string) *slotAllocator {
	return &slotAllocator{s: s, sharing: mode == AllocatorSlotSharing, shared: map[slotKey]*sharedSlot{}, slotOf: make([]*sharedSlot, len(s.g.Vertices))}
}

func (a *slotAllocator) keyOf(v eg.VertexIndex) slotKey {
	jv := a.s.g.JobVertexOf(v).Vertex
	sub := a.s.g.Vertices[v].Subtask
	switch {
	case a.sharing && jv.SlotSharingGroup != "":
		return slotKey{group: "s/" + jv.SlotSharingGroup, subtask: sub, vertex: -1}
	case jv.CoLocationGroup != "":
		return slotKey{group: "c/" + jv.CoLocationGroup, subtask: sub, vertex: -1}
	}
	return slotKey{vertex: v}
}

// allocate gives every execution of b a logical slot and requests the
// physical slots that are missing. The bulk is deployed by the deployer once
// b.waiting drops to zero.
func (a *slotAllocator) allocate(b *bulk) {
	var fresh []*sharedSlot
	for _, v := range b.vertices {
		key := a.keyOf(v)
		ss := a.shared[key]
		if ss == nil {
			ss = &sharedSlot{key: key}
			a.shared[key] = ss
			fresh = append(fresh, ss)
		}
		ss.members++
		a.slotOf[v] = ss
		if ss.physical == nil {
			ss.profile.addVertex(a.s, v)
		}
		if ss.lastBulk != b {
			ss.lastBulk = b
			b.slots = append(b.slots, ss)
			if ss.physical == nil {
				b.waiting++
				ss.waiting = append(ss.waiting, b)
			}
		}
	}
	for _, ss := range fresh {
		a.s.pool.request(ss)
	}
	a.s.pool.declare()
}

// fulfilled is called by the pool when ss got its physical slot.
func (a *slotAllocator) fulfilled(ss *sharedSlot) {
	ss.profile = slotProfile{}
	waiting := ss.waiting
	ss.waiting = nil
	for _, b := range waiting {
		a.s.deployer.slotFulfilled(b)
	}
}

// release returns v's logical slot; the last one out returns the physical
// slot to the pool (or withdraws its request).
func (a *slotAllocator) release(v eg.VertexIndex) {
	ss := a.slotOf[v]
	if ss == nil {
		return
	}
	a.slotOf[v] = nil
	if ss.members--; ss.members > 0 {
		return
	}
	ss.released = true
	if a.shared[ss.key] == ss {
		delete(a.shared, ss.key)
	}
	if ss.physical != nil {
		a.s.pool.free(ss.physical)
	} else {
		a.s.pool.withdraw(ss)
	}
}

// requiredSlots is the number of slots the job's scheduled executions need.
func (a *slotAllocator) requiredSlots() int { return len(a.shared) }
