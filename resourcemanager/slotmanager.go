package resourcemanager

import (
	"cmp"
	"slices"
	"time"

	"github.com/gofl/gofl/internal/backoff"
)

// slotManager is the ResourceManager's bookkeeping, Flink's
// DeclarativeSlotManager without the I/O: which slots the registered
// TaskManagers have, which are free, pending (a RequestSlot call in flight)
// or allocated to a job, what each job requires, and which RequestSlot calls
// to make next. It has no goroutines, no clock and no I/O: time comes in as
// arguments and RequestSlot calls go out as return values. The
// ResourceManager owns it on its mailbox.
//
// Slot reports are level-triggered: every report (a heartbeat's answer or a
// TaskExecutor's own SendSlotReport) is compared with the RM's view, and
// the TaskExecutor is the truth about what it holds, except where the RM
// knows better: a slot with a RequestSlot in flight, and a slot that
// changed after the report was requested (see applySlotReport). Only
// heartbeat answers, at most one in flight per TaskExecutor and each
// stamped with the version it was requested at, change the view; a pushed
// report that disagrees with it, or a failed RequestSlot, makes the RM ask
// for one at once (wantReports). So reports that come late, twice or out of
// order cost at most a heartbeat, and the view converges to the
// TaskExecutor's once the RM stops changing its slots.
type slotManager struct {
	cfg slotManagerConfig
	// version is bumped on every change to a slot (by the RM, or by a
	// report) and when a report disagrees with a slot it cannot override;
	// a report requested at version v only overrides slots unchanged since.
	version uint64

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

	stale map[string]*tmSlots // TaskManagers whose reports disagreed with a kept slot
}

// slotManagerConfig configures a slotManager. Zero fields take the
// defaults noted.
type slotManagerConfig struct {
	// EvenlySpreadOut: cluster.evenly-spread-out-slots.
	EvenlySpreadOut bool
	// NewID returns a new allocation ID; required.
	NewID func() string
	// RejectWindow: a slot this RM allocated to a job that a report shows
	// free again within this time, while the job has not declared since,
	// was refused by the job (the TaskExecutor freed it after a rejected
	// offer). Default 20 s (two default heartbeat intervals).
	RejectWindow time.Duration
	// RejectBackoff is the pause in requesting slots for a job after such
	// rejections, growing with each consecutive one.
	RejectBackoff backoff.Config
	// Rand draws the pause's jitter, uniform in [0, 1); nil: math/rand/v2.
	Rand func() float64
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
	// changed is the slotManager version of the slot's last change.
	changed uint64
	gone    bool // removed with its TaskManager or from its slot report
	// allocatedAt is when this RM's RequestSlot for the current allocation
	// succeeded, and declared the job's declaration count then; zero until
	// a report shows the allocation held past the reject window, and for
	// allocations adopted from reports. See slotManagerConfig.RejectWindow.
	allocatedAt time.Time
	declared    uint64
}

type tmSlots struct {
	resourceID string
	reported   bool    // a first slot report arrived: the slots are usable
	slots      []*slot // ascending index
	free       int     // free slots
	blocked    int     // free slots that are blocked
	// stale: a report disagreed with a slot whose state it could not
	// override (call in flight, or changed after the report was
	// requested), at version staleAt; a solicited report requested after
	// that which agrees with every slot it cannot override settles it.
	stale   bool
	staleAt uint64
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
	// declared counts the job's declarations; rejections counts the slots
	// it refused in a row (see slotManagerConfig.RejectWindow), and no slot
	// is requested for it before holdUntil.
	declared   uint64
	rejections int
	holdUntil  time.Time
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

// reportOutcome is what applying a slot report changed, for the log.
type reportOutcome struct {
	// Adopted: allocations the TaskExecutor holds that the RM did not know.
	Adopted []reportedSlot
	// Freed: allocations the RM believed in that the TaskExecutor no
	// longer holds.
	Freed []reportedSlot
	// Rejected: jobs that refused a slot just allocated to them and are now
	// on hold.
	Rejected []rejection
	// Kept counts slots the report could not override.
	Kept int
}

// rejection is a job put on hold after refusing a slot.
type rejection struct {
	JobID, AllocationID string
	Index               int32
	Hold                time.Duration
	InARow              int
}

func newSlotManager(cfg slotManagerConfig) *slotManager {
	if cfg.RejectWindow <= 0 {
		cfg.RejectWindow = 20 * time.Second
	}
	return &slotManager{
		cfg:     cfg,
		tmByID:  map[string]*tmSlots{},
		jobByID: map[string]*jobRequirement{},
		pending: map[string]*slot{},
		tallies: map[string]*tally{},
		stale:   map[string]*tmSlots{},
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
	delete(sm.stale, resourceID)
	for i, t := range sm.tms {
		if t == tm {
			sm.tms = append(sm.tms[:i:i], sm.tms[i+1:]...)
			break
		}
	}
}

// applySlotReport applies a solicited report: the answer to a heartbeat
// requested when the version was asOf. The report is the truth for the
// TaskExecutor's slots: the set of slots, each free or allocated (an
// allocation the RM did not know is adopted, one it believed in that the
// TaskExecutor no longer reports is freed). Two exceptions keep what the RM
// knows better: a slot with a RequestSlot in flight stays pending until the
// call returns, and a slot changed after asOf (by the RM, or by a newer
// report) keeps its state: the report may predate the change. It reports
// false for an unknown TaskManager.
func (sm *slotManager) applySlotReport(resourceID string, report []reportedSlot, asOf uint64, now time.Time) (reportOutcome, bool) {
	tm, ok := sm.tmByID[resourceID]
	if !ok {
		return reportOutcome{}, false
	}
	out, disagrees := sm.apply(tm, report, asOf, now)
	switch {
	case disagrees:
		sm.markStale(tm)
	case asOf >= tm.staleAt:
		// Requested after the last disagreement: settled.
		tm.stale = false
		delete(sm.stale, tm.resourceID)
	}
	return out, true
}

// applyPushedReport takes a report the TaskExecutor sent on its own
// (SendSlotReport). The first report of a TaskManager makes its slots
// usable. Later ones are hints only: nothing tells when they were sent, so
// one that arrives late, twice or out of order could undo newer knowledge.
// If it disagrees with the RM's view, or hbInFlight (the answer of a
// heartbeat sent before it arrived may predate it, and must not settle
// it), wantReports asks for a heartbeat, whose answer is applied. The cost
// of a stale push is thus one heartbeat, never a wrong view. (A sequence
// number in slot reports would let pushes be applied directly.)
func (sm *slotManager) applyPushedReport(resourceID string, report []reportedSlot, hbInFlight bool, now time.Time) (reportOutcome, bool) {
	tm, ok := sm.tmByID[resourceID]
	if !ok {
		return reportOutcome{}, false
	}
	if !tm.reported {
		// Nothing happened to its slots yet that the report could predate.
		out, _ := sm.apply(tm, report, sm.version, now)
		return out, true
	}
	if hbInFlight || !tm.agrees(report) {
		sm.markStale(tm)
	}
	return reportOutcome{}, true
}

// agrees reports whether a report shows every slot as the RM sees it.
func (tm *tmSlots) agrees(report []reportedSlot) bool {
	if len(report) != len(tm.slots) {
		return false
	}
	for _, r := range report {
		i, found := slices.BinarySearchFunc(tm.slots, r.Index, func(s *slot, i int32) int { return cmp.Compare(s.index, i) })
		if !found || tm.slots[i].allocationID != r.AllocationID {
			return false
		}
	}
	return true
}

// markStale records that the TaskManager's slots need a report requested
// from now on (see wantReports).
func (sm *slotManager) markStale(tm *tmSlots) {
	sm.version++
	tm.stale, tm.staleAt = true, sm.version
	sm.stale[tm.resourceID] = tm
}

// apply makes the report the truth for tm's slots but those pending or
// changed after asOf; it reports whether it disagreed with any of those.
func (sm *slotManager) apply(tm *tmSlots, report []reportedSlot, asOf uint64, now time.Time) (out reportOutcome, disagrees bool) {
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
			out.Kept++
			if r.AllocationID != s.allocationID {
				disagrees = true
			}
			continue
		}
		sm.applySlot(s, r, now, &out)
	}
	// A slot missing from the report is gone, unless a call for it is in flight.
	for _, s := range tm.slots {
		switch {
		case seen[s.index]:
		case s.state == slotPending:
			next = append(next, s)
			out.Kept++
			disagrees = true
		default:
			sm.account(s, -1)
			s.gone = true
		}
	}
	slices.SortFunc(next, func(a, b *slot) int { return cmp.Compare(a.index, b.index) })
	tm.slots = next
	tm.reported = true
	return out, disagrees
}

// applySlot makes s what the report r says (s is neither pending nor
// changed after the report was requested). A change counts as a change
// of the slot (changed), so a report requested before it, arriving later,
// cannot undo it.
func (sm *slotManager) applySlot(s *slot, r reportedSlot, now time.Time, out *reportOutcome) {
	if s.state == slotAllocated && r.AllocationID == s.allocationID {
		if !s.allocatedAt.IsZero() && now.Sub(s.allocatedAt) > sm.cfg.RejectWindow {
			// Held past the window: the job took it, so its run of
			// rejections (if any) is over.
			if j := sm.jobByID[s.jobID]; j != nil {
				j.rejections = 0
			}
			s.allocatedAt = time.Time{}
		}
		return
	}
	if s.state == slotFree && r.AllocationID == "" {
		return
	}
	if s.state == slotAllocated {
		out.Freed = append(out.Freed, reportedSlot{Index: s.index, AllocationID: s.allocationID, JobID: s.jobID})
		sm.rejected(s, now, out)
	}
	if r.AllocationID != "" {
		out.Adopted = append(out.Adopted, r)
	}
	sm.version++
	sm.update(s, func() {
		s.changed = sm.version
		s.allocatedAt, s.declared = time.Time{}, 0
		if r.AllocationID == "" {
			s.state, s.allocationID, s.jobID = slotFree, "", ""
		} else {
			s.state, s.allocationID, s.jobID = slotAllocated, r.AllocationID, r.JobID
			s.blocked = false
		}
	})
}

// rejected handles a slot the RM allocated that a report shows gone: if it
// went within the reject window and its job has not declared since, the
// job refused it (a rejected offer), and requesting slots for the job
// pauses, longer with each rejection in a row, until it declares again.
// Without this, a JobMaster that keeps refusing (e.g. still counting a dead
// TaskManager's slots) and the RM that keeps re-requesting trade offers as
// fast as the network allows. Rejections during a pause count as one.
func (sm *slotManager) rejected(s *slot, now time.Time, out *reportOutcome) {
	j := sm.jobByID[s.jobID]
	if j == nil || s.allocatedAt.IsZero() || s.declared != j.declared || now.Sub(s.allocatedAt) > sm.cfg.RejectWindow {
		return
	}
	if now.Before(j.holdUntil) {
		return
	}
	d := sm.cfg.RejectBackoff.Delay(j.rejections, sm.cfg.Rand)
	j.rejections++
	j.holdUntil = now.Add(d)
	out.Rejected = append(out.Rejected, rejection{JobID: j.id, AllocationID: s.allocationID, Index: s.index, Hold: d, InARow: j.rejections})
}

// wantReports lists, in registration order, the TaskManagers whose last
// reports disagreed with slots the RM changed and that have no RequestSlot
// in flight: a heartbeat now brings a report that settles them.
func (sm *slotManager) wantReports() []string {
	if len(sm.stale) == 0 {
		return nil
	}
	var out []string
	for _, tm := range sm.tms {
		if !tm.stale || slices.ContainsFunc(tm.slots, func(s *slot) bool { return s.state == slotPending }) {
			continue
		}
		out = append(out, tm.resourceID)
	}
	return out
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
	// A declaration ends a pause after rejected slots: the job says anew
	// what it needs.
	j.declared++
	j.rejections, j.holdUntil = 0, time.Time{}
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
// RequestSlot calls to make. Jobs on hold after rejected slots are skipped
// until now reaches their holdUntil (see nextWake). Never reclaims: a job
// holding more than it requires keeps its slots until the TaskExecutor
// reports them free.
func (sm *slotManager) allocate(now time.Time) []slotRequest {
	var out []slotRequest
	for _, j := range sm.jobs {
		if now.Before(j.holdUntil) {
			continue
		}
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
				s.state, s.allocationID, s.jobID, s.changed = slotPending, sm.cfg.NewID(), j.id, sm.version
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
		if !sm.cfg.EvenlySpreadOut {
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

// requestDone records a RequestSlot result at now: on success the slot is
// allocated to the job, on failure it is free again but blocked until
// endBackoff. It reports false for a call it no longer tracks (its
// TaskManager was removed).
func (sm *slotManager) requestDone(allocationID string, ok bool, now time.Time) bool {
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
			s.allocatedAt, s.declared = now, 0
			if j := sm.jobByID[s.jobID]; j != nil {
				s.declared = j.declared
			}
		} else {
			s.state, s.allocationID, s.jobID, s.blocked = slotFree, "", "", true
		}
	})
	if !ok {
		sm.blocked = append(sm.blocked, s)
		// The TaskExecutor may hold the slot after all (the call timed out
		// after it arrived), or another allocation took it: ask.
		sm.markStale(s.tm)
	}
	return true
}

// endBackoff makes slots whose RequestSlot failed eligible again; the RM
// calls it on every heartbeat tick, so a slot failing for good is tried at
// most once per heartbeat interval.
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

// nextWake is the earliest end of a job's hold after now (zero: none):
// allocate must run again then.
func (sm *slotManager) nextWake(now time.Time) time.Time {
	var t time.Time
	for _, j := range sm.jobs {
		if now.Before(j.holdUntil) && (t.IsZero() || j.holdUntil.Before(t)) {
			t = j.holdUntil
		}
	}
	return t
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
