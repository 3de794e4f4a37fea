package failover

import (
	"errors"
	"math"
	"testing"
	"time"
)

const (
	ms  = time.Millisecond
	sec = time.Second
)

var errTask = errors.New("task failed")

// step is one failure in a script and what the strategy must answer after it.
type step struct {
	at         time.Duration // logical now of the failure
	counted    bool          // NotifyFailure's result
	canRestart bool
	backoff    time.Duration
}

// runScript feeds the failures to s in order and checks every answer. The
// queries are asked twice to check that they have no side effects.
func runScript(t *testing.T, s RestartBackoffTimeStrategy, steps []step) {
	t.Helper()
	for i, st := range steps {
		if got := s.NotifyFailure(st.at, errTask); got != st.counted {
			t.Errorf("step %d (failure at %v): NotifyFailure = %v, want %v", i, st.at, got, st.counted)
		}
		for range 2 {
			if got := s.CanRestart(); got != st.canRestart {
				t.Errorf("step %d (failure at %v): CanRestart = %v, want %v", i, st.at, got, st.canRestart)
			}
			if got := s.BackoffTime(); got != st.backoff {
				t.Errorf("step %d (failure at %v): BackoffTime = %v, want %v", i, st.at, got, st.backoff)
			}
		}
	}
}

func TestNoRestart(t *testing.T) {
	var s NoRestartStrategy
	if s.CanRestart() {
		t.Error("none must refuse even before any failure")
	}
	runScript(t, s, []step{
		{at: 0, counted: true, canRestart: false, backoff: 0},
		{at: time.Hour, counted: true, canRestart: false, backoff: 0},
	})
	if s.String() != "none" {
		t.Errorf("String() = %q", s.String())
	}
}

func TestFixedDelay(t *testing.T) {
	tests := []struct {
		name     string
		attempts int
		delay    time.Duration
		steps    []step
	}{
		{
			name: "Flink default: one restart", attempts: 1, delay: sec,
			steps: []step{
				{at: 0, counted: true, canRestart: true, backoff: sec},
				{at: 10 * sec, counted: true, canRestart: false, backoff: sec},
			},
		},
		{
			name: "three attempts, then refuse for good", attempts: 3, delay: 10 * sec,
			steps: []step{
				{at: 0, counted: true, canRestart: true, backoff: 10 * sec},
				{at: time.Hour, counted: true, canRestart: true, backoff: 10 * sec},
				{at: 2 * time.Hour, counted: true, canRestart: true, backoff: 10 * sec},
				{at: 3 * time.Hour, counted: true, canRestart: false, backoff: 10 * sec},
				{at: 99 * time.Hour, counted: true, canRestart: false, backoff: 10 * sec},
			},
		},
		{
			name: "zero attempts refuses the first failure", attempts: 0, delay: 0,
			steps: []step{
				{at: 0, counted: true, canRestart: false, backoff: 0},
			},
		},
		{
			name: "concurrent failures are each counted", attempts: 2, delay: sec,
			steps: []step{
				{at: 5 * sec, counted: true, canRestart: true, backoff: sec},
				{at: 5 * sec, counted: true, canRestart: true, backoff: sec},
				{at: 5 * sec, counted: true, canRestart: false, backoff: sec},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewFixedDelayStrategy(tt.attempts, tt.delay)
			if err != nil {
				t.Fatal(err)
			}
			if !s.CanRestart() {
				t.Error("CanRestart before any failure = false, want true")
			}
			runScript(t, s, tt.steps)
		})
	}
}

func TestFailureRate(t *testing.T) {
	tests := []struct {
		name        string
		maxFailures int
		interval    time.Duration
		delay       time.Duration
		steps       []step
	}{
		{
			name: "Flink default: 2nd failure within a minute refuses, allowed again after the interval", maxFailures: 1, interval: time.Minute, delay: sec,
			steps: []step{
				{at: 0, counted: true, canRestart: true, backoff: sec},
				{at: 30 * sec, counted: true, canRestart: false, backoff: sec},    // window [0, 30s]
				{at: 90 * sec, counted: true, canRestart: false, backoff: sec},    // window [30s, 90s]: exactly 60s is still within
				{at: 150*sec + ms, counted: true, canRestart: true, backoff: sec}, // window [90s, 150.001s]
			},
		},
		{
			name: "max 2 per 10s", maxFailures: 2, interval: 10 * sec, delay: 3 * sec,
			steps: []step{
				{at: 0, counted: true, canRestart: true, backoff: 3 * sec},
				{at: 1 * sec, counted: true, canRestart: true, backoff: 3 * sec},
				{at: 2 * sec, counted: true, canRestart: false, backoff: 3 * sec},             // 3 failures in [0, 2s]
				{at: 11 * sec, counted: true, canRestart: false, backoff: 3 * sec},            // [1s, 11s] is exactly 10s
				{at: 12500 * ms, counted: true, canRestart: true, backoff: 3 * sec},           // [2s, 12.5s] spans more than 10s
				{at: 13 * sec, counted: true, canRestart: false, backoff: 3 * sec},            // [11s, 13s]
				{at: 13*sec + 10*sec + ms, counted: true, canRestart: true, backoff: 3 * sec}, // [12.5s, 23.001s]
			},
		},
		{
			name: "steady failures slower than the rate never refuse", maxFailures: 1, interval: 10 * sec, delay: 0,
			steps: []step{
				{at: 0, counted: true, canRestart: true},
				{at: 11 * sec, counted: true, canRestart: true},
				{at: 22 * sec, counted: true, canRestart: true},
				{at: 33 * sec, counted: true, canRestart: true},
			},
		},
		{
			name: "a burst at one instant", maxFailures: 3, interval: sec, delay: sec,
			steps: []step{
				{at: 7 * sec, counted: true, canRestart: true, backoff: sec},
				{at: 7 * sec, counted: true, canRestart: true, backoff: sec},
				{at: 7 * sec, counted: true, canRestart: true, backoff: sec},
				{at: 7 * sec, counted: true, canRestart: false, backoff: sec},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewFailureRateStrategy(tt.maxFailures, tt.interval, tt.delay)
			if err != nil {
				t.Fatal(err)
			}
			if !s.CanRestart() {
				t.Error("CanRestart before any failure = false, want true")
			}
			runScript(t, s, tt.steps)
		})
	}
}

// noJitter builds an exponential-delay strategy with jitter off.
func noJitter(t *testing.T, initial, maxB time.Duration, mult float64, reset time.Duration, attempts int) *ExponentialDelayStrategy {
	t.Helper()
	s, err := NewExponentialDelayStrategy(initial, maxB, mult, reset, 0, attempts, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestExponentialDelay(t *testing.T) {
	tests := []struct {
		name  string
		s     func(t *testing.T) *ExponentialDelayStrategy
		steps []step
	}{
		{
			// The example of Flink's documentation: 1s, 2s, 4s, 8s, then capped at 10s.
			name: "grows by the multiplier and is capped at max",
			s: func(t *testing.T) *ExponentialDelayStrategy {
				return noJitter(t, sec, 10*sec, 2, time.Hour, math.MaxInt32)
			},
			steps: []step{
				{at: 0, counted: true, canRestart: true, backoff: 1 * sec},         // restart at 1s
				{at: 1500 * ms, counted: true, canRestart: true, backoff: 2 * sec}, // restart at 3.5s
				{at: 4 * sec, counted: true, canRestart: true, backoff: 4 * sec},   // restart at 8s
				{at: 9 * sec, counted: true, canRestart: true, backoff: 8 * sec},   // restart at 17s
				{at: 18 * sec, counted: true, canRestart: true, backoff: 10 * sec}, // 16s capped; restart at 28s
				{at: 29 * sec, counted: true, canRestart: true, backoff: 10 * sec},
			},
		},
		{
			name: "Flink default multiplier 1.5",
			s: func(t *testing.T) *ExponentialDelayStrategy {
				return noJitter(t, sec, time.Minute, 1.5, time.Hour, math.MaxInt32)
			},
			steps: []step{
				{at: 0, counted: true, canRestart: true, backoff: 1000 * ms},
				{at: 2 * sec, counted: true, canRestart: true, backoff: 1500 * ms},
				{at: 4 * sec, counted: true, canRestart: true, backoff: 2250 * ms},
				{at: 7 * sec, counted: true, canRestart: true, backoff: 3375 * ms},
			},
		},
		{
			name: "failures while a restart is pending count as one",
			s:    func(t *testing.T) *ExponentialDelayStrategy { return noJitter(t, sec, time.Minute, 2, time.Hour, 1) },
			steps: []step{
				{at: 0, counted: true, canRestart: true, backoff: sec},              // restart scheduled at 1s
				{at: 250 * ms, counted: false, canRestart: true, backoff: 750 * ms}, // merged: the rest of the pending backoff
				{at: 250 * ms, counted: false, canRestart: true, backoff: 750 * ms},
				{at: 1*sec - ms, counted: false, canRestart: true, backoff: ms},
				{at: 1 * sec, counted: true, canRestart: false, backoff: 2 * sec}, // at the restart instant the restart has happened
			},
		},
		{
			name: "backoff resets after running resetBackoffThreshold without failure",
			s: func(t *testing.T) *ExponentialDelayStrategy {
				return noJitter(t, sec, time.Minute, 2, time.Minute, math.MaxInt32)
			},
			steps: []step{
				{at: 0, counted: true, canRestart: true, backoff: 1 * sec},                        // restart at 1s
				{at: 2 * sec, counted: true, canRestart: true, backoff: 2 * sec},                  // restart at 4s
				{at: 5 * sec, counted: true, canRestart: true, backoff: 4 * sec},                  // restart at 9s
				{at: 9*sec + time.Minute - ms, counted: true, canRestart: true, backoff: 8 * sec}, // ran 59.999s: no reset; restart at 76.999s
				{at: 76999*ms + time.Minute, counted: true, canRestart: true, backoff: 1 * sec},   // ran exactly 60s: reset
				{at: 78*sec + time.Minute, counted: true, canRestart: true, backoff: 2 * sec},
			},
		},
		{
			name: "refuses once attempts exceed attemptsBeforeResetBackoff, allowed again after a reset",
			s:    func(t *testing.T) *ExponentialDelayStrategy { return noJitter(t, sec, time.Minute, 2, time.Minute, 2) },
			steps: []step{
				{at: 0, counted: true, canRestart: true, backoff: 1 * sec},
				{at: 2 * sec, counted: true, canRestart: true, backoff: 2 * sec},
				{at: 5 * sec, counted: true, canRestart: false, backoff: 4 * sec}, // 3rd attempt > 2
				{at: 6 * sec, counted: false, canRestart: false, backoff: 3 * sec},
				{at: 9*sec + time.Minute, counted: true, canRestart: true, backoff: 1 * sec}, // reset
			},
		},
		{
			name: "initial equals max",
			s: func(t *testing.T) *ExponentialDelayStrategy {
				return noJitter(t, 5*sec, 5*sec, 3, time.Hour, math.MaxInt32)
			},
			steps: []step{
				{at: 0, counted: true, canRestart: true, backoff: 5 * sec},
				{at: 6 * sec, counted: true, canRestart: true, backoff: 5 * sec},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.s(t)
			if !s.CanRestart() || s.BackoffTime() != 0 {
				t.Errorf("before any failure: CanRestart = %v, BackoffTime = %v; want true, 0", s.CanRestart(), s.BackoffTime())
			}
			runScript(t, s, tt.steps)
		})
	}
}

func fixedRnd(v float64) func() float64 { return func() float64 { return v } }

func TestExponentialDelayJitter(t *testing.T) {
	// initial 10s, multiplier 2, jitter 0.1: the first backoff is 10s ± 1s
	// (but never below initial), the second 20s ± 2s (but never above max).
	tests := []struct {
		name        string
		rnd         func() float64
		jitter      float64
		max         time.Duration
		first, next time.Duration
	}{
		{"rnd 0 gives the lowest value, clamped to initial", fixedRnd(0), 0.1, time.Minute, 10 * sec, 18 * sec},
		{"rnd 0.5 gives no jitter", fixedRnd(0.5), 0.1, time.Minute, 10 * sec, 20 * sec},
		{"rnd just below 1 gives the highest value", fixedRnd(1 - 1e-10), 0.1, time.Minute, 11 * sec, 22 * sec},
		{"rnd out of range is clamped", fixedRnd(7), 0.1, time.Minute, 11 * sec, 22 * sec},
		{"negative rnd is clamped", fixedRnd(-3), 0.1, time.Minute, 10 * sec, 18 * sec},
		{"jittered value is capped at max", fixedRnd(1 - 1e-10), 0.1, 21 * sec, 11 * sec, 21 * sec},
		{"nil rnd means no jitter", nil, 0.1, time.Minute, 10 * sec, 20 * sec},
		{"jitter factor 0 ignores rnd", fixedRnd(0), 0, time.Minute, 10 * sec, 20 * sec},
		{"jitter factor 1 can double", fixedRnd(1 - 1e-12), 1, time.Minute, 20 * sec, 40 * sec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewExponentialDelayStrategy(10*sec, tt.max, 2, time.Hour, tt.jitter, math.MaxInt32, tt.rnd)
			if err != nil {
				t.Fatal(err)
			}
			s.NotifyFailure(0, errTask)
			if got := s.BackoffTime(); got != tt.first {
				t.Errorf("first backoff = %v, want %v", got, tt.first)
			}
			at := s.BackoffTime() + ms // after the pending restart
			s.NotifyFailure(at, errTask)
			if got := s.BackoffTime(); got != tt.next {
				t.Errorf("second backoff = %v, want %v", got, tt.next)
			}
		})
	}
}

func TestExponentialDelayJitterBounds(t *testing.T) {
	// A deterministic sweep of rnd over [0, 1): every backoff stays within
	// ±jitter of the un-jittered value and within [initial, max].
	const (
		initial = 1 * sec
		maxB    = 30 * sec
		mult    = 1.5
		jitter  = 0.25
	)
	i := 0
	rnd := func() float64 { i++; return float64(i%97) / 97 }
	s, err := NewExponentialDelayStrategy(initial, maxB, mult, time.Hour, jitter, math.MaxInt32, rnd)
	if err != nil {
		t.Fatal(err)
	}
	var now time.Duration
	for n := range 40 {
		if !s.NotifyFailure(now, errTask) {
			t.Fatalf("failure %d at %v not counted", n, now)
		}
		got := s.BackoffTime()
		base := float64(initial) * math.Pow(mult, float64(n))
		lo := min(max(time.Duration(base*(1-jitter))-1, initial), maxB)
		hi := min(time.Duration(base*(1+jitter))+1, maxB)
		if got < lo || got > hi {
			t.Errorf("failure %d: backoff %v outside [%v, %v]", n, got, lo, hi)
		}
		now += got + ms
	}
}

func TestExponentialDelayManyAttemptsStayAtMax(t *testing.T) {
	s, err := NewExponentialDelayStrategy(sec, time.Minute, 1.5, 1000*time.Hour, 0.1, math.MaxInt32, fixedRnd(0.999))
	if err != nil {
		t.Fatal(err)
	}
	var now time.Duration
	for n := range 5000 {
		s.NotifyFailure(now, errTask)
		if n > 20 && s.BackoffTime() != time.Minute {
			t.Fatalf("failure %d: backoff %v, want the 1m cap", n, s.BackoffTime())
		}
		now += s.BackoffTime() + ms
	}
	if !s.CanRestart() {
		t.Error("default attempts must allow 5000 restarts")
	}
}

func TestStrategyStrings(t *testing.T) {
	fd, _ := NewFixedDelayStrategy(3, 10*sec)
	fr, _ := NewFailureRateStrategy(1, time.Minute, sec)
	ed, _ := NewExponentialDelayStrategy(sec, time.Minute, 1.5, time.Hour, 0.1, math.MaxInt32, nil)
	tests := []struct {
		s    RestartBackoffTimeStrategy
		want string
	}{
		{NoRestartStrategy{}, "none"},
		{fd, "fixed-delay(attempts=3, delay=10s)"},
		{fr, "failure-rate(maxFailuresPerInterval=1, interval=1m0s, delay=1s)"},
		{ed, "exponential-delay(initialBackoff=1s, maxBackoff=1m0s, multiplier=1.5, resetBackoffThreshold=1h0m0s, jitterFactor=0.1, attemptsBeforeResetBackoff=2147483647)"},
	}
	for _, tt := range tests {
		before := tt.s.String()
		tt.s.NotifyFailure(0, errTask)
		if got := tt.s.String(); got != tt.want || got != before {
			t.Errorf("String() = %q (before a failure %q), want %q", got, before, tt.want)
		}
	}
}
