package resourcemanager

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/internal/backoff"
)

// TestSlotManagerScenarios runs the slot manager through scenarios. Each is
// a script: a command per line, followed by the lines ("> ...") it must
// output, exactly. Commands:
//
//	tm TM                   a TaskManager registers (no usable slots yet)
//	lose TM                 it is removed (heartbeat timeout, disconnect)
//	report TM SLOT...       a heartbeat's slot report, requested just now; SLOT is
//	                        "free" or JOB/ALLOC, index = position
//	snapshot                remember the version (a heartbeat request is sent)
//	late-report TM SLOT...  a heartbeat's report requested at the snapshot arrives now
//	push TM SLOT...         a report the TaskExecutor sent on its own (SendSlotReport):
//	                        applied if it is the first, else a hint
//	                        every report prints what it changed:
//	                        > adopted TM/INDEX JOB/ALLOC
//	                        > freed TM/INDEX JOB/ALLOC
//	                        > rejected JOB hold DURATION
//	require JOB N           the job declares N slots
//	drop JOB                the job's JobMaster disconnects
//	match                   allocate + notices, as the RM does after every change:
//	                        > request TM/INDEX JOB ALLOC
//	                        > notify JOB acquired=A required=R available=V [timed out]
//	                        > sync TM       (a heartbeat to settle a disagreeing report)
//	                        > wake +DURATION (the next end of a job's hold)
//	ok ALLOC | fail ALLOC   a RequestSlot call returned
//	tick                    heartbeat tick: failed slots may be requested again
//	after DURATION          time passes (slot.request.timeout is 1m, the reject
//	                        window 20s, holds 1s doubling up to 8s)
//	slots TM                > total=T free=F
//	state TM                > each slot: free, JOB/ALLOC or pending:JOB/ALLOC
//	missing                 > slots an active provider would start workers for
func TestSlotManagerScenarios(t *testing.T) {
	tests := []struct {
		name   string
		evenly bool
		script string
	}{
		{name: "slots become usable with the first report", script: `
tm tm1
require a 1
match
> notify a acquired=0 required=1 available=0
report tm1 free free
match
> request tm1/0 a a1
slots tm1
> total=2 free=1
ok a1
match
slots tm1
> total=2 free=1
`},
		{name: "two jobs are matched in declaration order, first TaskManager first", script: `
tm tm1
tm tm2
report tm1 free free
report tm2 free free
require a 3
require b 1
match
> request tm1/0 a a1
> request tm1/1 a a2
> request tm2/0 a a3
> request tm2/1 b a4
ok a1
ok a2
ok a3
ok a4
match
missing
> 0
`},
		{name: "evenly spread out picks the least used TaskManager", evenly: true, script: `
tm tm1
tm tm2
tm tm3
report tm1 x/old free free free
> adopted tm1/0 x/old
report tm2 free free
report tm3 free free free free
require a 4
match
> request tm2/0 a a1
> request tm3/0 a a2
> request tm1/1 a a3
> request tm3/1 a a4
`},
		{name: "a failed request frees the slot, which waits for the next tick, and asks for a report", script: `
tm tm1
report tm1 free
require a 1
match
> request tm1/0 a a1
fail a1
match
> sync tm1
slots tm1
> total=1 free=1
report tm1 free
match
tick
match
> request tm1/0 a a2
ok a2
match
`},
		{name: "a failed request moves on to another free slot", script: `
tm tm1
report tm1 free free
require a 1
match
> request tm1/0 a a1
fail a1
match
> request tm1/1 a a2
`},
		{name: "the report is the truth, except for a slot with a call in flight", script: `
tm tm1
report tm1 free free
require a 1
match
> request tm1/0 a a1
report tm1 free other/x
> adopted tm1/1 other/x
slots tm1
> total=2 free=0
ok a1
report tm1 a/a1 free
> freed tm1/1 other/x
slots tm1
> total=2 free=1
after 21s
report tm1 free free free
> freed tm1/0 a/a1
match
> request tm1/0 a a2
`},
		{name: "a report requested before a RequestSlot returned does not undo it", script: `
tm tm1
report tm1 free
require a 1
match
> request tm1/0 a a1
snapshot
ok a1
late-report tm1 free
slots tm1
> total=1 free=0
report tm1 free
> freed tm1/0 a/a1
> rejected a hold 1s
slots tm1
> total=1 free=1
`},
		{name: "never reclaims: a lower requirement leaves slots allocated", script: `
tm tm1
report tm1 a/x1 a/x2 free
> adopted tm1/0 a/x1
> adopted tm1/1 a/x2
require a 1
match
slots tm1
> total=3 free=1
require a 3
match
> request tm1/2 a a1
`},
		{name: "not enough resources is notified at once, once per change", script: `
tm tm1
report tm1 free free
require a 3
match
> request tm1/0 a a1
> request tm1/1 a a2
> notify a acquired=2 required=3 available=2
ok a1
ok a2
match
tick
match
fail a9
lose tm1
match
> notify a acquired=0 required=3 available=0
tm tm2
report tm2 free free free
match
> request tm2/0 a a3
> request tm2/1 a a4
> request tm2/2 a a5
require a 4
match
> notify a acquired=3 required=4 available=3
`},
		{name: "an unfulfilled requirement is notified after the slot request timeout", script: `
tm tm1
report tm1 free
require a 1
match
> request tm1/0 a a1
fail a1
match
> sync tm1
report tm1 free
after 30s
match
after 30s
match
> notify a acquired=0 required=1 available=1 timed out
after 59s
match
after 1s
match
> notify a acquired=0 required=1 available=1 timed out
tick
match
> request tm1/0 a a2
ok a2
after 2m
match
`},
		{name: "losing a TaskManager forgets its calls in flight and re-matches", script: `
tm tm1
tm tm2
report tm1 free
report tm2 free
require a 1
match
> request tm1/0 a a1
lose tm1
ok a1
match
> request tm2/0 a a2
missing
> 0
`},
		{name: "a dropped job is no longer matched; its slots stay until reported free", script: `
tm tm1
report tm1 free free
require a 2
match
> request tm1/0 a a1
> request tm1/1 a a2
ok a1
drop a
ok a2
match
slots tm1
> total=2 free=0
require b 1
match
> notify b acquired=0 required=1 available=0
report tm1 free a/a2
> freed tm1/0 a/a1
match
> request tm1/0 b a3
`},
		{name: "blocked slots that disappear are forgotten", script: `
tm tm1
tm tm2
report tm1 free free
report tm2 free
require a 2
match
> request tm1/0 a a1
> request tm1/1 a a2
fail a1
match
> request tm2/0 a a3
fail a3
lose tm2
report tm1 free
slots tm1
> total=2 free=1
ok a2
tick
match
> request tm1/0 a a4
`},
		{name: "the first pushed report makes the slots usable; later ones are hints", script: `
tm tm1
push tm1 free x/x1
> adopted tm1/1 x/x1
slots tm1
> total=2 free=1
push tm1 free x/x1
match
push tm1 free free
state tm1
> free x/x1
match
> sync tm1
report tm1 free free
> freed tm1/1 x/x1
match
`},
		{name: "duplicated and reordered pushes cost a heartbeat, never a wrong view", script: `
tm tm1
report tm1 free free
require a 1
match
> request tm1/0 a a1
ok a1
push tm1 free free
push tm1 x/x1 free
push tm1 free free
state tm1
> a/a1 free
match
> sync tm1
report tm1 a/a1 free
match
state tm1
> a/a1 free
`},
		{name: "a push crossing a call in flight asks for a heartbeat once the call returned", script: `
tm tm1
report tm1 free free
require a 1
match
> request tm1/0 a a1
push tm1 free free
match
ok a1
match
> sync tm1
report tm1 free free
> freed tm1/0 a/a1
> rejected a hold 1s
match
> wake +1s
after 1s
match
> request tm1/0 a a2
`},
		{name: "a push that agrees changes nothing, unless a heartbeat answer may predate it", script: `
tm tm1
report tm1 free free
push tm1 free free
match
snapshot
push tm1 free free
late-report tm1 free free
match
> sync tm1
report tm1 free free
match
`},
		{name: "a heartbeat answer older than a push that arrived meanwhile does not settle it", script: `
tm tm1
report tm1 free free
require a 2
match
> request tm1/0 a a1
> request tm1/1 a a2
ok a1
ok a2
drop a
snapshot
push tm1 free free
late-report tm1 free a/a2
> freed tm1/0 a/a1
match
> sync tm1
report tm1 free free
> freed tm1/1 a/a2
match
state tm1
> free free
`},
		{name: "a late heartbeat answer does not undo a newer failure; the next one adopts what the TaskExecutor holds", script: `
tm tm1
report tm1 free
require a 1
snapshot
match
> request tm1/0 a a1
fail a1
late-report tm1 a/a1
state tm1
> free
match
> sync tm1
report tm1 a/a1
> adopted tm1/0 a/a1
match
state tm1
> a/a1
`},
		{name: "a slot the TaskExecutor gave to another allocation is adopted, whatever the RM believed", script: `
tm tm1
report tm1 free
require a 1
match
> request tm1/0 a a1
ok a1
after 30s
report tm1 b/x9
> adopted tm1/0 b/x9
> freed tm1/0 a/a1
match
> notify a acquired=0 required=1 available=0
`},
		{name: "rejected slots pause the job's requests, doubling, until it declares again", script: `
tm tm1
report tm1 free free
require a 1
match
> request tm1/0 a a1
ok a1
report tm1 free free
> freed tm1/0 a/a1
> rejected a hold 1s
match
> wake +1s
after 999ms
match
> wake +1ms
after 1ms
match
> request tm1/0 a a2
ok a2
report tm1 free free
> freed tm1/0 a/a2
> rejected a hold 2s
match
> wake +2s
require a 1
match
> request tm1/0 a a3
ok a3
report tm1 free free
> freed tm1/0 a/a3
> rejected a hold 1s
`},
		{name: "other jobs are matched while one is on hold", script: `
tm tm1
report tm1 free
require a 1
match
> request tm1/0 a a1
ok a1
report tm1 free
> freed tm1/0 a/a1
> rejected a hold 1s
require b 1
match
> request tm1/0 b a2
> notify a acquired=0 required=1 available=0
> wake +1s
`},
		{name: "slots refused together count as one rejection", script: `
tm tm1
report tm1 free free free
require a 3
match
> request tm1/0 a a1
> request tm1/1 a a2
> request tm1/2 a a3
ok a1
ok a2
ok a3
report tm1 free a/a2 free
> freed tm1/0 a/a1
> freed tm1/2 a/a3
> rejected a hold 1s
report tm1 free free free
> freed tm1/1 a/a2
match
> wake +1s
`},
		{name: "no rejection: freed after the window, after a new declaration, or adopted", script: `
tm tm1
report tm1 free free x/x1
> adopted tm1/2 x/x1
require a 1
require x 1
match
> request tm1/0 a a1
ok a1
after 21s
report tm1 free free x/x1
> freed tm1/0 a/a1
match
> request tm1/0 a a2
ok a2
require a 1
report tm1 free free free
> freed tm1/0 a/a2
> freed tm1/2 x/x1
match
> request tm1/0 a a3
> request tm1/1 x a4
`},
		{name: "a slot kept past the window ends the run of rejections", script: `
tm tm1
report tm1 free free
require a 2
match
> request tm1/0 a a1
> request tm1/1 a a2
ok a1
ok a2
report tm1 free a/a2
> freed tm1/0 a/a1
> rejected a hold 1s
after 1s
match
> request tm1/0 a a3
ok a3
after 21s
report tm1 a/a3 a/a2
report tm1 free a/a2
> freed tm1/0 a/a3
after 1s
report tm1 free a/a2
match
> request tm1/0 a a4
ok a4
report tm1 free a/a2
> freed tm1/0 a/a4
> rejected a hold 1s
`},
		{name: "missing slots count what neither holdings nor calls in flight cover", script: `
tm tm1
report tm1 free
require a 2
require b 3
match
> request tm1/0 a a1
> notify a acquired=1 required=2 available=1
> notify b acquired=0 required=3 available=0
missing
> 4
`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := runSlotScript(t, tc.evenly, tc.script)
			if want := strings.TrimSpace(tc.script); got != want {
				t.Errorf("script diverged\n--- got\n%s\n--- want\n%s", got, want)
			}
		})
	}
}

func runSlotScript(t *testing.T, evenly bool, script string) string {
	t.Helper()
	n := 0
	sm := newSlotManager(scriptConfig(evenly, func() string { n++; return fmt.Sprintf("a%d", n) }))
	now := time.Unix(1_000_000, 0)
	var snapshot uint64
	inFlight := false // a heartbeat was sent (snapshot) and not answered (late-report)
	var out []string
	emit := func(format string, args ...any) { out = append(out, "> "+fmt.Sprintf(format, args...)) }
	parseReport := func(fields []string) []reportedSlot {
		var r []reportedSlot
		for i, f := range fields {
			s := reportedSlot{Index: int32(i)}
			if f != "free" {
				job, alloc, ok := strings.Cut(f, "/")
				if !ok {
					t.Fatalf("bad slot %q", f)
				}
				s.JobID, s.AllocationID = job, alloc
			}
			r = append(r, s)
		}
		return r
	}
	for _, line := range strings.Split(strings.TrimSpace(script), "\n") {
		if strings.HasPrefix(line, "> ") {
			continue
		}
		out = append(out, line)
		f := strings.Fields(line)
		switch f[0] {
		case "tm":
			sm.addTaskManager(f[1])
		case "lose":
			sm.removeTaskManager(f[1])
		case "report", "late-report", "push":
			var out reportOutcome
			var ok bool
			switch f[0] {
			case "report":
				out, ok = sm.applySlotReport(f[1], parseReport(f[2:]), sm.Version(), now)
			case "late-report":
				out, ok = sm.applySlotReport(f[1], parseReport(f[2:]), snapshot, now)
				inFlight = false
			default:
				out, ok = sm.applyPushedReport(f[1], parseReport(f[2:]), inFlight, now)
			}
			if !ok {
				emit("unknown")
			}
			for _, a := range out.Adopted {
				emit("adopted %s/%d %s/%s", f[1], a.Index, a.JobID, a.AllocationID)
			}
			for _, x := range out.Freed {
				emit("freed %s/%d %s/%s", f[1], x.Index, x.JobID, x.AllocationID)
			}
			for _, r := range out.Rejected {
				emit("rejected %s hold %s", r.JobID, r.Hold)
			}
		case "snapshot":
			snapshot, inFlight = sm.Version(), true
		case "require":
			k, _ := strconv.Atoi(f[2])
			sm.setRequirement(f[1], k)
		case "drop":
			sm.removeJob(f[1])
		case "match":
			for _, r := range sm.allocate(now) {
				emit("request %s/%d %s %s", r.ResourceID, r.SlotIndex, r.JobID, r.AllocationID)
			}
			for _, x := range sm.notices(now, time.Minute) {
				s := fmt.Sprintf("notify %s acquired=%d required=%d available=%d", x.JobID, x.Acquired, x.Required, x.Available)
				if x.TimedOut {
					s += " timed out"
				}
				emit("%s", s)
			}
			for _, id := range sm.wantReports() {
				emit("sync %s", id)
			}
			if w := sm.nextWake(now); !w.IsZero() {
				emit("wake +%s", w.Sub(now))
			}
		case "ok", "fail":
			sm.requestDone(f[1], f[0] == "ok", now)
		case "tick":
			sm.endBackoff()
		case "after":
			d, err := time.ParseDuration(f[1])
			if err != nil {
				t.Fatal(err)
			}
			now = now.Add(d)
		case "slots":
			total, free, _ := sm.slotsOf(f[1])
			emit("total=%d free=%d", total, free)
		case "state":
			emit("%s", sm.describe(f[1]))
		case "missing":
			emit("%d", sm.missingSlots())
		default:
			t.Fatalf("unknown command %q", line)
		}
		if err := sm.checkCounters(); err != nil {
			t.Fatalf("after %q: %v", line, err)
		}
	}
	return strings.Join(out, "\n")
}

func scriptConfig(evenly bool, newID func() string) slotManagerConfig {
	return slotManagerConfig{
		EvenlySpreadOut: evenly,
		NewID:           newID,
		RejectWindow:    20 * time.Second,
		RejectBackoff:   backoff.Config{Initial: time.Second, Max: 8 * time.Second, Jitter: -1},
	}
}

// describe is a TaskManager's slots as the RM sees them.
func (sm *slotManager) describe(resourceID string) string {
	tm, ok := sm.tmByID[resourceID]
	if !ok {
		return "unknown"
	}
	var out []string
	for _, s := range tm.slots {
		switch s.state {
		case slotFree:
			out = append(out, "free")
		case slotAllocated:
			out = append(out, s.jobID+"/"+s.allocationID)
		case slotPending:
			out = append(out, "pending:"+s.jobID+"/"+s.allocationID)
		}
	}
	return strings.Join(out, " ")
}

// checkCounters recomputes the incremental counters from the slots.
func (sm *slotManager) checkCounters() error {
	free := 0
	tallies := map[string]tally{}
	for _, tm := range sm.tms {
		tmFree, tmBlocked := 0, 0
		for _, s := range tm.slots {
			switch s.state {
			case slotFree:
				tmFree++
				if s.blocked {
					tmBlocked++
				}
			case slotAllocated:
				x := tallies[s.jobID]
				x.allocated++
				tallies[s.jobID] = x
			case slotPending:
				x := tallies[s.jobID]
				x.pending++
				tallies[s.jobID] = x
				if sm.pending[s.allocationID] != s {
					return fmt.Errorf("pending slot %s/%d not tracked under %s", tm.resourceID, s.index, s.allocationID)
				}
			}
		}
		if tmFree != tm.free || tmBlocked != tm.blocked {
			return fmt.Errorf("%s: free=%d blocked=%d, counted %d and %d", tm.resourceID, tmFree, tmBlocked, tm.free, tm.blocked)
		}
		free += tmFree
	}
	if free != sm.free {
		return fmt.Errorf("free=%d, counted %d", free, sm.free)
	}
	if len(tallies) != len(sm.tallies) {
		return fmt.Errorf("tallies %v, counted %d jobs", tallies, len(sm.tallies))
	}
	for job, x := range tallies {
		if sm.tallyOf(job) != x {
			return fmt.Errorf("job %s: %+v, counted %+v", job, x, sm.tallyOf(job))
		}
	}
	n := 0
	for _, tm := range sm.tms {
		for _, s := range tm.slots {
			if s.state == slotPending {
				n++
			}
		}
	}
	if n != len(sm.pending) {
		return fmt.Errorf("%d pending slots, %d tracked calls", n, len(sm.pending))
	}
	return nil
}

// BenchmarkMatch10000Slots matches one job to 1,000 TaskManagers × 10 slots
// and completes every RequestSlot, reconciling after each as the RM does.
func BenchmarkMatch10000Slots(b *testing.B) {
	for _, evenly := range []bool{false, true} {
		b.Run(fmt.Sprintf("evenly=%v", evenly), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				n := 0
				sm := newSlotManager(scriptConfig(evenly, func() string { n++; return strconv.Itoa(n) }))
				free := make([]reportedSlot, 10)
				for k := range free {
					free[k].Index = int32(k)
				}
				for tm := 0; tm < 1000; tm++ {
					id := "tm" + strconv.Itoa(tm)
					sm.addTaskManager(id)
					sm.applySlotReport(id, free, sm.Version(), time.Unix(0, 0))
				}
				sm.setRequirement("job", 10000)
				now := time.Unix(0, 0)
				reqs := sm.allocate(now)
				sm.notices(now, time.Minute)
				if len(reqs) != 10000 {
					b.Fatalf("%d requests", len(reqs))
				}
				for _, r := range reqs {
					sm.requestDone(r.AllocationID, true, now)
					sm.allocate(now)
					sm.notices(now, time.Minute)
				}
			}
		})
	}
}
