package resourcemanager

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSlotManagerScenarios runs the slot manager through scenarios. Each is
// a script: a command per line, followed by the lines ("> ...") it must
// output, exactly. Commands:
//
//	tm TM                   a TaskManager registers (no usable slots yet)
//	lose TM                 it is removed (heartbeat timeout, disconnect)
//	report TM SLOT...       its slot report; SLOT is "free" or JOB/ALLOC, index = position
//	snapshot                remember the version (a heartbeat request is sent)
//	late-report TM SLOT...  a report requested at the snapshot arrives now
//	require JOB N           the job declares N slots
//	drop JOB                the job's JobMaster disconnects
//	match                   allocate + notices, as the RM does after every change:
//	                        > request TM/INDEX JOB ALLOC
//	                        > notify JOB acquired=A required=R available=V [timed out]
//	ok ALLOC | fail ALLOC   a RequestSlot call returned
//	tick                    heartbeat tick: failed slots may be requested again
//	after DURATION          time passes (slot.request.timeout is 1m)
//	slots TM                > total=T free=F
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
report tm2 free free
report tm3 free free free free
require a 4
match
> request tm2/0 a a1
> request tm3/0 a a2
> request tm1/1 a a3
> request tm3/1 a a4
`},
		{name: "a failed request frees the slot, which waits for the next tick", script: `
tm tm1
report tm1 free
require a 1
match
> request tm1/0 a a1
fail a1
match
slots tm1
> total=1 free=1
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
slots tm1
> total=2 free=0
ok a1
report tm1 a/a1 free
slots tm1
> total=2 free=1
report tm1 free free free
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
slots tm1
> total=1 free=1
`},
		{name: "never reclaims: a lower requirement leaves slots allocated", script: `
tm tm1
report tm1 a/x1 a/x2 free
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
	sm := newSlotManager(evenly, func() string { n++; return fmt.Sprintf("a%d", n) })
	now := time.Unix(1_000_000, 0)
	var snapshot uint64
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
		case "report":
			if !sm.applySlotReport(f[1], parseReport(f[2:]), sm.Version()) {
				emit("unknown")
			}
		case "snapshot":
			snapshot = sm.Version()
		case "late-report":
			sm.applySlotReport(f[1], parseReport(f[2:]), snapshot)
		case "require":
			k, _ := strconv.Atoi(f[2])
			sm.setRequirement(f[1], k)
		case "drop":
			sm.removeJob(f[1])
		case "match":
			for _, r := range sm.allocate() {
				emit("request %s/%d %s %s", r.ResourceID, r.SlotIndex, r.JobID, r.AllocationID)
			}
			for _, x := range sm.notices(now, time.Minute) {
				s := fmt.Sprintf("notify %s acquired=%d required=%d available=%d", x.JobID, x.Acquired, x.Required, x.Available)
				if x.TimedOut {
					s += " timed out"
				}
				emit("%s", s)
			}
		case "ok", "fail":
			sm.requestDone(f[1], f[0] == "ok")
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
				sm := newSlotManager(evenly, func() string { n++; return strconv.Itoa(n) })
				free := make([]reportedSlot, 10)
				for k := range free {
					free[k].Index = int32(k)
				}
				for tm := 0; tm < 1000; tm++ {
					id := "tm" + strconv.Itoa(tm)
					sm.addTaskManager(id)
					sm.applySlotReport(id, free, sm.Version())
				}
				sm.setRequirement("job", 10000)
				now := time.Unix(0, 0)
				reqs := sm.allocate()
				sm.notices(now, time.Minute)
				if len(reqs) != 10000 {
					b.Fatalf("%d requests", len(reqs))
				}
				for _, r := range reqs {
					sm.requestDone(r.AllocationID, true)
					sm.allocate()
					sm.notices(now, time.Minute)
				}
			}
		})
	}
}
