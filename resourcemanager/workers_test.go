package resourcemanager

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func plannerConfig() workerPlannerConfig {
	return workerPlannerConfig{
		SlotsPerWorker:      4,
		IdleTimeout:         30 * time.Second,
		RegistrationTimeout: 5 * time.Minute,
		MaxFailedStarts:     3,
		RetryInterval:       time.Second,
		MaxRetryInterval:    5 * time.Second,
		Rand:                func() float64 { return 0.5 }, // the middle of the jitter band: exact pauses
	}
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// cluster state the planner sees, kept by the test.
type plannerWorld struct {
	missing, free, total int
	idle                 map[string]bool
}

func (w *plannerWorld) plan(p *workerPlanner, now time.Time) workerActions {
	return p.plan(now, w.missing, w.free, w.total, func(id string) bool { return w.idle[id] })
}

// readyBoth has the requested workers "a" and "b" (4 slots each) start
// and register at t0, all the job needs.
func (w *plannerWorld) readyBoth(p *workerPlanner) {
	for _, id := range []string{"a", "b"} {
		p.requestDone(t0, id, nil)
		p.ready(t0, id)
	}
	w.missing, w.total = 0, 8
}

func TestWorkerPlannerRequests(t *testing.T) {
	tests := []struct {
		name                 string
		missing, free, total int
		minSlots             int
		pending              int // RequestWorker calls already in flight
		starting             int // started, not ready
		want                 int
	}{
		{name: "nothing missing", want: 0},
		{name: "one slot → one worker", missing: 1, want: 1},
		{name: "exactly one worker's slots", missing: 4, want: 1},
		{name: "burst of 9 slots → ceil(9/4)", missing: 9, want: 3},
		{name: "free slots count (blocked ones)", missing: 9, free: 2, want: 2},
		{name: "free slots cover it", missing: 3, free: 3, want: 0},
		{name: "in-flight requests count", missing: 9, pending: 2, want: 1},
		{name: "starting workers count", missing: 9, starting: 3, want: 0},
		{name: "more pending than needed: no release, no request", missing: 1, pending: 3, want: 0},
		{name: "minimum slots without jobs", minSlots: 6, want: 2},
		{name: "minimum reached", minSlots: 6, total: 8, want: 0},
		{name: "minimum with pending", minSlots: 9, total: 4, pending: 1, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := plannerConfig()
			cfg.MinSlots = tt.minSlots
			p := newWorkerPlanner(cfg)
			p.inFlight = tt.pending
			for i := range tt.starting {
				p.workers[fmt.Sprint("s", i)] = &plannedWorker{id: fmt.Sprint("s", i), phase: workerStarting, claimed: true, since: t0}
			}
			w := &plannerWorld{missing: tt.missing, free: tt.free, total: tt.total}
			a := w.plan(p, t0)
			if a.Request != tt.want {
				t.Fatalf("Request = %d, want %d", a.Request, tt.want)
			}
			// Asking again at once requests nothing more: the new requests are pending.
			if a := w.plan(p, t0); a.Request != 0 {
				t.Fatalf("second plan requests %d more", a.Request)
			}
		})
	}
}

// TestWorkerPlannerBurst: requirements arriving one by one while workers
// start never start more than ceil(total/slots) workers.
func TestWorkerPlannerBurst(t *testing.T) {
	p := newWorkerPlanner(plannerConfig())
	w := &plannerWorld{}
	requested := 0
	for i := 1; i <= 10; i++ { // ten jobs of one slot each, declared one after another
		w.missing = i
		requested += w.plan(p, t0).Request
	}
	if requested != 3 {
		t.Fatalf("requested %d workers for 10 slots of 4-slot workers, want 3", requested)
	}
	// The workers come up one by one; nothing more is requested meanwhile.
	for i := range 3 {
		id := fmt.Sprint("w", i)
		p.started(t0, id) // ahead of its RequestWorker result
		p.requestDone(t0, id, nil)
		if a := w.plan(p, t0); a.Request != 0 {
			t.Fatalf("after %s was started: Request = %d", id, a.Request)
		}
		p.ready(t0, id)
		w.missing -= 4
		w.missing = max(w.missing, 0)
		w.total += 4
		if a := w.plan(p, t0); a.Request != 0 {
			t.Fatalf("after %s became ready: Request = %d", id, a.Request)
		}
	}
}

// TestWorkerPlannerInitialSlots: a per-job cluster's initial slots are
// requested at the first plan, before any job declared them; the job's
// requirement arriving while they start asks for nothing more, and once
// idle they are released (no minimum).
func TestWorkerPlannerInitialSlots(t *testing.T) {
	cfg := plannerConfig()
	cfg.InitialSlots = 6
	p := newWorkerPlanner(cfg)
	w := &plannerWorld{}
	if a := w.plan(p, t0); a.Request != 2 {
		t.Fatalf("first plan: Request = %d, want 2 (6 slots of 4-slot workers)", a.Request)
	}
	w.missing = 6 // the job declares what the cluster started for it
	if a := w.plan(p, t0); a.Request != 0 {
		t.Fatalf("the job's requirement while they start: Request = %d, want 0", a.Request)
	}
	w.readyBoth(p)
	w.idle = map[string]bool{"a": true, "b": true}
	if a := w.plan(p, t0); a.Request != 0 || len(a.Release) != 0 {
		t.Fatalf("idle from t0: %+v", a)
	}
	if a := w.plan(p, t0.Add(cfg.IdleTimeout)); len(a.Release) != 2 || a.Request != 0 {
		t.Fatalf("idle past the timeout: %+v, want both released and none requested", a)
	}
}

func TestWorkerPlannerIdleRelease(t *testing.T) {
	cfg := plannerConfig()
	cfg.MinSlots = 4
	p := newWorkerPlanner(cfg)
	w := &plannerWorld{missing: 8}
	if a := w.plan(p, t0); a.Request != 2 {
		t.Fatalf("Request = %d", a.Request)
	}
	w.readyBoth(p)
	if a := w.plan(p, t0); a.Request != 0 || len(a.Release) != 0 || !a.WakeAt.IsZero() {
		t.Fatalf("busy workers: %+v", a)
	}
	// The job ends: both idle from t0+1m.
	w.idle = map[string]bool{"a": true, "b": true}
	t1 := t0.Add(time.Minute)
	a := w.plan(p, t1)
	if len(a.Release) != 0 || !a.WakeAt.Equal(t1.Add(30*time.Second)) {
		t.Fatalf("idle just now: %+v", a)
	}
	// b gets a slot allocated for a while: its idle time restarts.
	w.idle["b"] = false
	w.plan(p, t1.Add(10*time.Second))
	w.idle["b"] = true
	w.plan(p, t1.Add(20*time.Second))
	a = w.plan(p, t1.Add(30*time.Second))
	if len(a.Release) != 1 || a.Release[0].ID != "a" || !strings.Contains(a.Release[0].Reason, "idle for 30s") {
		t.Fatalf("after the timeout: %+v", a)
	}
	if !a.WakeAt.Equal(t1.Add(50 * time.Second)) {
		t.Fatalf("WakeAt = %v, want b's deadline", a.WakeAt)
	}
	p.terminated(t1.Add(31*time.Second), "a", "released")
	w.total = 4
	// b is idle long enough but is the minimum.
	if a := w.plan(p, t1.Add(time.Hour)); len(a.Release) != 0 || a.Request != 0 {
		t.Fatalf("the minimum's worker: %+v", a)
	}
	if p.failures != 0 {
		t.Fatalf("a released worker counted as a failure")
	}
}

// TestWorkerPlannerBackoff: failed starts back off exponentially (1s, 2s,
// 4s, capped at 5s), probe one worker at a time, and after the third
// report exhaustion; a worker that registers resets all that.
func TestWorkerPlannerBackoff(t *testing.T) {
	p := newWorkerPlanner(plannerConfig())
	w := &plannerWorld{missing: 12}
	now := t0
	a := w.plan(p, now)
	if a.Request != 3 {
		t.Fatalf("Request = %d", a.Request)
	}
	// The burst fails together: one failure.
	for range 3 {
		p.requestDone(now, "", errors.New("binary not found"))
	}
	if p.failures != 1 {
		t.Fatalf("failures = %d after a burst failing together", p.failures)
	}
	type step struct {
		at      time.Duration // since t0
		request int
		wake    time.Duration
		fail    string // how the probe fails: "reject", "exit", "timeout"
		exhaust bool
	}
	steps := []step{
		{at: 0, request: 0, wake: time.Second},
		{at: 999 * time.Millisecond, request: 0, wake: time.Second},
		{at: time.Second, request: 1, fail: "exit"}, // failure 2 → 2s
		{at: 2 * time.Second, request: 0, wake: 3 * time.Second},
		{at: 3 * time.Second, request: 1, fail: "reject", exhaust: true},  // failure 3 → 4s, exhausted
		{at: 7 * time.Second, request: 1, fail: "timeout", exhaust: true}, // failure 4 → 5s (cap), still exhausted
	}
	var log []string
	for _, s := range steps {
		now = t0.Add(s.at)
		a := w.plan(p, now)
		if a.Request != s.request || (s.wake != 0 && !a.WakeAt.Equal(t0.Add(s.wake))) {
			t.Fatalf("at %s: %+v, want Request %d WakeAt +%s", s.at, a, s.request, s.wake)
		}
		var timedOut *workerActions
		switch s.fail {
		case "reject":
			p.requestDone(now, "", errors.New("quota exceeded"))
		case "exit":
			p.requestDone(now, "x", nil)
			p.started(now, "x")
			p.terminated(now, "x", "exit status 2")
		case "timeout":
			p.requestDone(now, "slow", nil)
			a := w.plan(p, now.Add(5*time.Minute))
			if len(a.Release) != 1 || a.Release[0].ID != "slow" || !strings.Contains(a.Release[0].Reason, "did not register") {
				t.Fatalf("registration timeout: %+v", a)
			}
			timedOut = &a
			now = now.Add(5 * time.Minute)
			p.terminated(now, "slow", "released") // no second failure
		}
		if s.fail != "" {
			a := w.plan(p, now)
			if timedOut != nil { // the failure was found by that plan
				a = *timedOut
			}
			if a.Exhausted != s.exhaust {
				t.Fatalf("at %s: Exhausted = %v (%s)", s.at, a.Exhausted, a.Cause)
			}
			log = append(log, fmt.Sprintf("%d %s", p.failures, p.retryAt.Sub(now)))
			if a.Exhausted {
				if a.Cause == "" {
					t.Fatal("exhausted without a cause")
				}
				// Reported once per failure.
				if a := w.plan(p, now); a.Exhausted {
					t.Fatal("Exhausted reported twice for one failure")
				}
			}
		}
	}
	if got, want := strings.Join(log, ", "), "2 2s, 3 4s, 4 5s"; got != want {
		t.Fatalf("failures and backoffs = %s, want %s", got, want)
	}
	// A worker that registers resets the count: requests go out in bulk again.
	now = now.Add(5 * time.Second)
	if a := w.plan(p, now); a.Request != 1 {
		t.Fatalf("probe: %+v", a)
	}
	p.requestDone(now, "good", nil)
	p.ready(now, "good")
	w.missing, w.total = 8, 4
	if a := w.plan(p, now); a.Request != 2 || p.failures != 0 {
		t.Fatalf("after a success: %+v, failures %d", a, p.failures)
	}
}

// TestWorkerPlannerBackoffJitter: pauses vary by ±20%, so RMs restarted
// together do not retry in step, and never exceed the maximum.
func TestWorkerPlannerBackoffJitter(t *testing.T) {
	for _, tc := range []struct {
		rnd        float64
		first, cap time.Duration
	}{{0, 800 * time.Millisecond, 4 * time.Second}, {0.999999, 1200 * time.Millisecond, 5 * time.Second}} {
		cfg := plannerConfig()
		cfg.Rand = func() float64 { return tc.rnd }
		p := newWorkerPlanner(cfg)
		now := t0
		var pauses []time.Duration
		for range 5 {
			p.failed(now, "x")
			pauses = append(pauses, p.retryAt.Sub(now).Round(time.Millisecond))
			now = p.retryAt
		}
		if pauses[0] != tc.first || pauses[4] != tc.cap {
			t.Fatalf("rnd %v: pauses %v, want first %v, last %v", tc.rnd, pauses, tc.first, tc.cap)
		}
	}
}

// TestWorkerPlannerEventOrder: events for a worker may overtake its
// RequestWorker result.
func TestWorkerPlannerEventOrder(t *testing.T) {
	p := newWorkerPlanner(plannerConfig())
	w := &plannerWorld{missing: 4}
	w.plan(p, t0)
	// Terminated before the result: still one failure, counted on the result.
	p.started(t0, "fast")
	p.terminated(t0, "fast", "exit status 1")
	if p.failures != 0 || p.pending() != 1 {
		t.Fatalf("before the result: failures %d, pending %d", p.failures, p.pending())
	}
	p.requestDone(t0, "fast", nil)
	if p.failures != 1 || p.pending() != 0 || p.owns("fast") {
		t.Fatalf("after the result: failures %d, pending %d", p.failures, p.pending())
	}
	// Events of workers that are not ours are ignored.
	p.started(t0, "manual")
	p.terminated(t0, "manual", "exit")
	p.ready(t0, "manual")
	if p.owns("manual") || p.failures != 1 {
		t.Fatal("an unknown worker was adopted")
	}
	// A ready worker that dies is no failed start.
	now := t0.Add(time.Second)
	w.plan(p, now)
	p.requestDone(now, "ok", nil)
	p.ready(now, "ok")
	p.terminated(now, "ok", "exit status 137")
	if p.failures != 0 {
		t.Fatalf("failures = %d", p.failures)
	}
}
