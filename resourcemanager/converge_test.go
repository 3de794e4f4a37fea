package resourcemanager

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSlotReportsConverge drives the slot manager, as the ResourceManager
// does, against a model TaskExecutor over a network that delays, reorders
// and duplicates its reports, while the TaskExecutor frees slots at random
// (rejected offers, finished jobs) and jobs change their requirements.
// The RM must never request a slot the TaskExecutor holds (no report
// undoes a newer grant), and once the faults stop its view must become the
// TaskExecutor's and every job must get what it requires, with no pause
// that never ends, without periodic heartbeats: driven by the reports and
// the heartbeats they prompt alone.
func TestSlotReportsConverge(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		w := newConvergeWorld(seed)
		if err := w.run(); err != nil {
			t.Fatalf("seed %d: %v\nlast steps:\n%s", seed, err, strings.Join(w.trace[max(0, len(w.trace)-60):], "\n"))
		}
	}
}

type convergeWorld struct {
	rnd      *rand.Rand
	sm       *slotManager
	now      time.Time
	nextTick time.Time
	te       []reportedSlot // the TaskExecutor's truth
	required map[string]int
	faults   bool
	trace    []string

	queue     []slotRequest // the TaskExecutor's outbox
	inFlight  *slotRequest
	processed bool // the TaskExecutor handled the call in flight
	granted   bool

	hbInFlight, hbAnswered bool
	hbAsOf                 uint64
	hbReport               []reportedSlot

	pushes [][]reportedSlot // in the network, delivered in any order

	refusals int // RequestSlot calls for a slot the TaskExecutor held
}

const convergeSlots = 4

var convergeJobs = []string{"a", "b", "c"}

func newConvergeWorld(seed uint64) *convergeWorld {
	w := &convergeWorld{rnd: rand.New(rand.NewPCG(seed, 99)), now: t0, required: map[string]int{}}
	n := 0
	w.sm = newSlotManager(slotManagerConfig{
		NewID:         func() string { n++; return fmt.Sprint("x", n) },
		RejectWindow:  2 * time.Second,
		RejectBackoff: rejectBackoff(time.Second),
		Rand:          w.rnd.Float64,
	})
	w.nextTick = w.now.Add(time.Second)
	for i := range convergeSlots {
		w.te = append(w.te, reportedSlot{Index: int32(i)})
	}
	w.sm.addTaskManager("tm")
	w.sm.applyPushedReport("tm", w.teReport(), false, w.now)
	for _, j := range convergeJobs {
		w.declare(j, w.rnd.IntN(2))
	}
	return w
}

func (w *convergeWorld) log(format string, args ...any) {
	w.trace = append(w.trace, fmt.Sprintf("%6s ", w.now.Sub(t0).Round(time.Millisecond))+fmt.Sprintf(format, args...))
}

func (w *convergeWorld) teReport() []reportedSlot { return slices.Clone(w.te) }

// declare sets a requirement, keeping the total within the slots.
func (w *convergeWorld) declare(job string, n int) {
	total := 0
	for j, r := range w.required {
		if j != job {
			total += r
		}
	}
	n = min(n, convergeSlots-total)
	w.required[job] = n
	w.sm.setRequirement(job, n)
	w.log("declare %s %d", job, n)
	w.reconcile()
}

func (w *convergeWorld) reconcile() {
	for _, r := range w.sm.allocate(w.now) {
		w.log("request %d for %s (%s)", r.SlotIndex, r.JobID, r.AllocationID)
		w.queue = append(w.queue, r)
	}
	w.sm.notices(w.now, time.Minute)
	if len(w.sm.wantReports()) > 0 {
		w.heartbeat()
	}
	w.send()
}

func (w *convergeWorld) send() {
	if w.inFlight == nil && len(w.queue) > 0 {
		r := w.queue[0]
		w.queue = w.queue[1:]
		w.inFlight, w.processed = &r, false
	}
}

func (w *convergeWorld) heartbeat() {
	if !w.hbInFlight {
		w.hbInFlight, w.hbAnswered, w.hbAsOf = true, false, w.sm.Version()
		w.log("heartbeat sent at version %d", w.hbAsOf)
	}
}

// teFree frees a slot on the TaskExecutor and pushes a report, as after a
// rejected offer or a freed slot.
func (w *convergeWorld) teFree(i int) {
	w.log("TE frees %d (%s/%s)", i, w.te[i].JobID, w.te[i].AllocationID)
	w.te[i].AllocationID, w.te[i].JobID = "", ""
	w.pushes = append(w.pushes, w.teReport())
}

// step takes one action chosen at random among those possible.
func (w *convergeWorld) step() {
	var actions []func()
	if w.inFlight != nil && !w.processed {
		actions = append(actions, func() {
			r := w.inFlight
			s := &w.te[r.SlotIndex]
			w.granted = s.AllocationID == "" || s.AllocationID == r.AllocationID
			if w.granted {
				s.AllocationID, s.JobID = r.AllocationID, r.JobID
			} else {
				w.refusals++
			}
			w.processed = true
			w.log("TE handles RequestSlot %d for %s: %v", r.SlotIndex, r.JobID, w.granted)
		})
	}
	if w.inFlight != nil && w.processed {
		actions = append(actions, func() {
			r := w.inFlight
			w.inFlight = nil
			w.log("RequestSlot %s returns %v", r.AllocationID, w.granted)
			w.sm.requestDone(r.AllocationID, w.granted, w.now)
			w.reconcile()
		})
	}
	if w.hbInFlight && !w.hbAnswered {
		actions = append(actions, func() {
			w.hbAnswered, w.hbReport = true, w.teReport()
			w.log("TE answers the heartbeat: %v", w.hbReport)
		})
	}
	if w.hbInFlight && w.hbAnswered {
		actions = append(actions, func() {
			w.hbInFlight = false
			w.log("heartbeat answer arrives (asOf %d)", w.hbAsOf)
			w.sm.applySlotReport("tm", w.hbReport, w.hbAsOf, w.now)
			w.reconcile()
		})
	}
	if len(w.pushes) > 0 {
		actions = append(actions, func() {
			i := w.rnd.IntN(len(w.pushes))
			p := w.pushes[i]
			if !w.faults || w.rnd.IntN(4) > 0 { // in faults, sometimes duplicated
				w.pushes = slices.Delete(w.pushes, i, i+1)
			}
			w.log("push arrives: %v", p)
			w.sm.applyPushedReport("tm", p, w.hbInFlight, w.now)
			w.reconcile()
		})
	}
	// The JobMaster refuses or frees slots: at random during the faults,
	// afterwards only what a job holds beyond its requirement.
	held := map[string][]int{}
	for i, s := range w.te {
		if s.AllocationID != "" {
			held[s.JobID] = append(held[s.JobID], i)
		}
	}
	for _, j := range convergeJobs {
		if len(held[j]) > 0 && (w.faults || len(held[j]) > w.required[j]) {
			actions = append(actions, func() { w.teFree(held[j][w.rnd.IntN(len(held[j]))]) })
		}
	}
	if w.faults {
		actions = append(actions, func() { w.declare(convergeJobs[w.rnd.IntN(len(convergeJobs))], w.rnd.IntN(3)) })
	}
	actions = append(actions, func() {
		w.now = w.now.Add(100 * time.Millisecond)
		if w.faults && !w.now.Before(w.nextTick) {
			w.nextTick = w.nextTick.Add(time.Second)
			w.log("tick")
			w.sm.endBackoff()
			w.heartbeat()
		}
		w.reconcile() // also the wake-up at a hold's end
	})
	actions[w.rnd.IntN(len(actions))]()
	if err := w.sm.checkCounters(); err != nil {
		panic(err)
	}
}

// settled: nothing in flight, the RM sees what the TaskExecutor holds and
// every job holds what it requires.
func (w *convergeWorld) settled() error {
	if w.inFlight != nil || len(w.queue) > 0 || w.hbInFlight || len(w.pushes) > 0 {
		return fmt.Errorf("messages in flight")
	}
	rm := w.sm.tmByID["tm"]
	held := map[string]int{}
	for i, s := range w.te {
		r := rm.slots[i]
		if r.state == slotPending || r.allocationID != s.AllocationID || r.jobID != s.JobID {
			return fmt.Errorf("slot %d: RM sees %s, TaskExecutor holds %s/%s", i, w.sm.describe("tm"), s.JobID, s.AllocationID)
		}
		if s.AllocationID != "" {
			held[s.JobID]++
		}
	}
	for _, j := range convergeJobs {
		if held[j] != w.required[j] {
			return fmt.Errorf("job %s holds %d slots, requires %d", j, held[j], w.required[j])
		}
	}
	return nil
}

func (w *convergeWorld) run() error {
	w.faults = true
	for range 300 {
		w.step()
		if w.refusals > 0 {
			return fmt.Errorf("the RM requested a slot the TaskExecutor held: a report undid a newer grant")
		}
	}
	w.faults = false
	w.log("faults stop")
	var err error
	for range 20000 {
		if err = w.settled(); err == nil {
			return nil
		}
		w.step()
		if w.refusals > 0 {
			return fmt.Errorf("the RM requested a slot the TaskExecutor held: a report undid a newer grant")
		}
	}
	return fmt.Errorf("did not converge: %v", err)
}
