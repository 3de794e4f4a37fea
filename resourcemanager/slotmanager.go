package resourcemanager

import (
	"cmp"
	"slices"
	"time"
)

// slotManager is the ResourceManager's bookkeeping, Flink's
// DeclarativeSlotManager without the I/O: which slots the registered
// TaskManagers have, which are free, pending (a RequestSlot call in flight)
// or allocated to a job, what each job requires, and which RequestSlot calls
// to make next. It has no goroutines, no clock and no I/O: time comes in as
// arguments and RequestSlot calls go out as return values. The
// ResourceManager owns it on its mailbox.
type slotManager struct {
	evenly  bool
	newID   func() string // allocation IDs
	version uint64        // bumped on every change the RM itself makes to a slot

	tms    []*tmSlots // registration order: the default slot selection order
	tmByID map[string]*tmSlots

	jobs    []*jobRequirement // declaration order: the matching order
	jobByID map[string]*jobRequirement

	pending map[string]*slot // allocation ID → slot with that RequestSlot in flight
	blocked []*slot          // free slots whose RequestSlot failed, until endBackoff

	// Counters kept in step by account, so matching is O(TaskManagers) per
	// slot and a reconcile is O(jobs), not O(slots).
	free    int               // free slots (blocked ones included)
	tallies map[string]*tally // by job ID, only non-zero ones
}

type slotState int

const (
	slotFree slotState = iota
	slotPending
	slotAllocated
)

type slot struct {
	tm    *tmSlots
	index int32
	state slotState
	// allocationID and jobID: of the allocation (allocated) or of the
	// RequestSlot in flight (pending); empty while free.
	allocationID, jobID string
	// blocked: a RequestSlot for this slot failed; it is not picked again
	// until the next endBackoff (heartbeat tick), so failures never loop hot.
	blocked bool
	// changed is the slotManager version of the RM's last own change.
	changed uint64
	gone    bool // removed with its TaskManager or from its slot report
}

type tmSlots struct {
	resourceID string
	reported   bool    // a first slot report arrived: the slots are usable
	slots      []*slot // ascending index
	free       int     // free slots
	blocked    int     // free slots that are blocked
}

type jobRequirement struct {
	id       string
	required int
	// noticed/noticedAcquired: a not-enough-resources notice was sent for the
	// current shortage with that acquired count.
	noticed         bool
	noticedAcquired int
	// unfulfilledSince is when the job last went from fulfilled (allocated ≥
	// required) to not; zero while fulfilled. It restarts after each timeout
	// notice.
	unfulfilledSince time.Time
}

// reportedSlot is one slot of a TaskExecutor's slot report.
type reportedSlot struct {
	Index        int32
	AllocationID string // empty: free
	JobID        string
}

// slotRequest is a RequestSlot call to make.
type slotRequest struct {
	AllocationID string
	ResourceID   string
	SlotIndex    int32
	JobID        string
}

// notice says a job's requirement cannot be met.
type notice struct {
	JobID     string
	Acquired  int // allocated to the job plus RequestSlot calls in flight for it
	Required  int
	Available int // free slots in the cluster plus Acquired: the most the job can get
	// TimedOut: the requirement stayed unfulfilled for slot.request.timeout
	// (otherwise: the registered slots cannot satisfy it).
	TimedOut bool
}

// tally is what a job holds.
type tally struct{ allocated, pending int }

func newSlotManager(evenly bool, newID func() string) *slotManager {
	return &slotManager{
		evenly:  evenly,
		newID:   newID,
		tmByID:  map[string]*tmSlots{},
		jobByID: map[string]*jobRequirement{},
		pending: map[string]*slot{},
		tallies: map[string]*tally{},
	}
}

// account adds (sign +1) or removes (sign -1) a slot's contribution to the
// counters. Every change to a slot's state, job or blocked flag goes through
// update, which calls it around the change.
func (sm *slotManager) account(s *slot, sign int) {
	switch s.state {
	case slotFree:
		s.tm.free += sign
		sm.free += sign
		if s.blocked {
			s.tm.blocked += sign
		}
	case slotAllocated, slotPending:
		t := sm.tallies[s.jobID]
		if t == nil {
			t = &tally{}
			sm.tallies[s.jobID] = t
		}
		if s.state == slotAllocated {
			t.allocated += sign
		} else {
			t.pending += sign
		}
		if *t == (tally{}) {
			delete(sm.tallies, s.jobID)
		}
	}
}

// update applies change to s, keeping the counters in step.
func (sm *slotManager) update(s *slot, change func()) {
	sm.account(s, -1)
	change()
	sm.account(s, +1)
}

func (sm *slotManager) tallyOf(jobID string) tally {
	if t := sm.tallies[jobID]; t != nil {
		return *t
	}
	return tally{}
}

// Version is the current change counter; pass it back to applySlotReport
// for a report requested now (see applySlotReport).
func (sm *slotManager) Version() uint64 { return sm.version }

// addTaskManager starts tracking a TaskManager. Its slots become usable
// with its first slot report. Adding a known one is a no-op.
func (sm *slotManager) addTaskManager(resourceID string) {
	if _, ok := sm.tmByID[resourceID]; ok {
		return
	}
	tm := &tmSlots{resourceID: resourceID}
	sm.tms = append(sm.tms, tm)
	sm.tmByID[resourceID] = tm
}

// removeTaskManager forgets a TaskManager and its slots; RequestSlot calls
// in flight to it are forgotten too (their results are ignored).
func (sm *slotManager) removeTaskManager(resourceID string) {
	tm, ok := sm.tmByID[resourceID]
	if !ok {
		return
	}
	for _, s := range tm.slots {
		if s.state == slotPending {
			delete(sm.pending, s.allocationID)
		}
		sm.account(s, -1)
		s.gone = true
	}
	delete(sm.tmByID, resourceID)
	for i, t := range sm.tms {
		if t == tm {
			sm.tms = append(sm.tms[:i:i], sm.tms[i+1:]...)
			break
		}
	}
}

// applySlotReport makes a TaskExecutor's report the truth for its slots:
// the reported set of slots, each free or allocated. Two exceptions keep
// what the RM knows better: a slot with a RequestSlot in flight stays
// pending until the call returns, and a slot the RM changed after asOf (the
// Version when the report was requested, e.g. a heartbeat that crossed a
// RequestSlot) keeps its state. It reports false for an unknown TaskManager.
func (sm *slotManager) applySlotReport(resourceID string, report []reportedSlot, asOf uint64) bool {
	tm, ok := sm.tmByID[resourceID]
	if !ok {
		return false
	}
	old := make(map[int32]*slot, len(tm.slots))
	for _, s := range tm.slots {
		old[s.index] = s
	}
	seen := make(map[int32]bool, len(report))
	next := make([]*slot, 0, len(report))
	for _, r := range report {
		if r.Index < 0 || seen[r.Index] {
			continue
		}
		seen[r.Index] = true
		s := old[r.Index]
		if s == nil {
			s = &slot{tm: tm, index: r.Index}
			sm.account(s, +1)
		}
		next = append(next, s)
		if s.state == slotPending || s.changed > asOf {
			continue
		}
		sm.update(s, func() {
			if r.AllocationID == "" {
				s.state, s.allocationID, s.jobID = slotFree, "", ""
			} else {
				s.state, s.allocationID, s.jobID = slotAllocated, r.AllocationID, r.JobID
				s.blocked = false
			}
		})
	}
	// A slot missing from the report is gone, unless a call for it is in flight.
	for _, s := range tm.slots {
		switch {
		case seen[s.index]:
		case s.state == slotPending:
			next = append(next, s)
		default:
			sm.account(s, -1)
			s.gone = true
		}
	}
	slices.SortFunc(next, func(a, b *slot) int { return cmp.Compare(a.index, b.index) })
	tm.slots = next
	tm.reported = true
	return true
}

// setRequirement records that jobID needs slots slots in total (0: none).
// A change of requirement re-arms the not-enough-resources notice.
func (sm *slotManager) setRequirement(jobID string, slots int) {
	j, ok := sm.jobByID[jobID]
	if !ok {
		j = &jobRequirement{id: jobID}
		sm.jobs = append(sm.jobs, j)
		sm.jobByID[jobID] = j
	}
	if j.required != slots {
		j.noticed = false
	}
	j.required = slots
}

// removeJob drops a job's requirement. Slots stay allocated to it until
// their TaskExecutors report them free.
func (sm *slotManager) removeJob(jobID string) {
	j, ok := sm.jobByID[jobID]
	if !ok {
		return
	}
	delete(sm.jobByID, jobID)
	for i, x := range sm.jobs {
		if x == j {
			sm.jobs = append(sm.jobs[:i:i], sm.jobs[i+1:]...)
			break
		}
	}
}

// requirement is jobID's declared requirement (0 if none).
func (sm *slotManager) requirement(jobID string) int {
	if j, ok := sm.jobByID[jobID]; ok {
		return j.required
	}
	return 0
}

// allocate matches free slots to jobs short of their requirement, in
// declaration order, marks the chosen slots pending and returns the
// RequestSlot calls to make. Never reclaims: a job holding more than it
// requires keeps its slots until the TaskExecutor reports them free.
func (sm *slotManager) allocate() []slotRequest {
	var out []slotRequest
	for _, j := range sm.jobs {
		for {
			x := sm.tallyOf(j.id)
			if j.required <= x.allocated+x.pending {
				break
			}
			s := sm.pickFree()
			if s == nil {
				return out
			}
			sm.version++
			sm.update(s, func() {
				s.state, s.allocationID, s.jobID, s.changed = slotPending, sm.newID(), j.id, sm.version
			})
			sm.pending[s.allocationID] = s
			out = append(out, slotRequest{AllocationID: s.allocationID, ResourceID: s.tm.resourceID, SlotIndex: s.index, JobID: j.id})
		}
	}
	return out
}

// pickFree selects a free, unblocked slot: by default the lowest slot of the
// first registered TaskManager that has one; spreading evenly, of the
// TaskManager with the lowest fraction of slots in use (ties: registration
// order).
func (sm *slotManager) pickFree() *slot {
	var best *tmSlots
	for _, tm := range sm.tms {
		if tm.free-tm.blocked == 0 {
			continue
		}
		if !sm.evenly {
			return tm.firstPickable()
		}
		// used/total < best's used/total
		if best == nil || (len(tm.slots)-tm.free)*len(best.slots) < (len(best.slots)-best.free)*len(tm.slots) {
			best = tm
		}
	}
	if best == nil {
		return nil
	}
	return best.firstPickable()
}

func (tm *tmSlots) firstPickable() *slot {
	for _, s := range tm.slots {
		if s.state == slotFree && !s.blocked {
			return s
		}
	}
	return nil
}

// requestDone records a RequestSlot result: on success the slot is
// allocated to the job, on failure it is free again but blocked until
// endBackoff. It reports false for a call it no longer tracks (its
// TaskManager was removed).
func (sm *slotManager) requestDone(allocationID string, ok bool) bool {
	s, found := sm.pending[allocationID]
	if !found {
		return false
	}
	delete(sm.pending, allocationID)
	sm.version++
	sm.update(s, func() {
		s.changed = sm.version
		if ok {
			s.state = slotAllocated
		} else {
			s.state, s.allocationID, s.jobID, s.blocked = slotFree, "", "", true
		}
	})
	if !ok {
		sm.blocked = append(sm.blocked, s)
	}
	return true
}

// endBackoff makes slots whose RequestSlot failed eligible again; the RM
// calls it on every heartbeat tick.
func (sm *slotManager) endBackoff() {
	for _, s := range sm.blocked {
		if s.blocked && !s.gone {
			sm.update(s, func() { s.blocked = false })
		}
	}
	sm.blocked = sm.blocked[:0]
}

// notices returns the jobs to tell that their requirement cannot be met:
//   - at once when the free slots plus what the job holds fall short of its
//     requirement, once per change of the acquired count (or requirement);
//   - when the requirement stayed unfulfilled (allocated < required) for
//     timeout, and again after every further timeout.
//
// Call it after allocate, so free slots are already matched.
func (sm *slotManager) notices(now time.Time, timeout time.Duration) []notice {
	var out []notice
	for _, j := range sm.jobs {
		x := sm.tallyOf(j.id)
		acquired := x.allocated + x.pending
		available := sm.free + acquired
		n := notice{JobID: j.id, Acquired: acquired, Required: j.required, Available: available}
		if j.required > 0 && available < j.required {
			if !j.noticed || j.noticedAcquired != acquired {
				out = append(out, n)
				j.noticed, j.noticedAcquired = true, acquired
			}
		} else {
			j.noticed = false
		}
		switch {
		case x.allocated >= j.required:
			j.unfulfilledSince = time.Time{}
		case j.unfulfilledSince.IsZero():
			j.unfulfilledSince = now
		case timeout > 0 && now.Sub(j.unfulfilledSince) >= timeout:
			n.TimedOut = true
			out = append(out, n)
			j.unfulfilledSince = now
		}
	}
	return out
}

// missingSlots is how many slots the jobs need beyond what they hold and
// what is in flight: what an active provider would start workers for.
func (sm *slotManager) missingSlots() int {
	missing := 0
	for _, j := range sm.jobs {
		x := sm.tallyOf(j.id)
		if d := j.required - x.allocated - x.pending; d > 0 {
			missing += d
		}
	}
	return missing
}

// slotsOf reports a TaskManager's slot count and free slots, and whether it
// has reported yet.
func (sm *slotManager) slotsOf(resourceID string) (total, free int, reported bool) {
	tm, ok := sm.tmByID[resourceID]
	if !ok {
		return 0, 0, false
	}
	return len(tm.slots), tm.free, tm.reported
}

// idle reports whether a TaskManager has reported slots and all are free
// (none pending or allocated): an active ResourceManager may release it.
func (sm *slotManager) idle(resourceID string) bool {
	tm, ok := sm.tmByID[resourceID]
	return ok && tm.reported && len(tm.slots) > 0 && tm.free == len(tm.slots)
}

// freeSlots is the number of free slots (blocked ones included).
func (sm *slotManager) freeSlots() int { return sm.free }

// totalSlots is the number of slots of all TaskManagers.
func (sm *slotManager) totalSlots() int {
	n := 0
	for _, tm := range sm.tms {
		n += len(tm.slots)
	}
	return n
}

// shortJobs lists the jobs whose requirement exceeds what they hold
// (allocated plus in flight), in declaration order.
func (sm *slotManager) shortJobs() []notice {
	var out []notice
	for _, j := range sm.jobs {
		x := sm.tallyOf(j.id)
		acquired := x.allocated + x.pending
		if j.required > acquired {
			out = append(out, notice{JobID: j.id, Acquired: acquired, Required: j.required, Available: sm.free + acquired})
		}
	}
	return out
}
