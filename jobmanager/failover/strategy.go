package failover

import (
	"fmt"
	"math"
	"time"
)

// RestartBackoffTimeStrategy decides whether a failed job may restart and how
// long to wait before restarting it, like Flink's interface of the same name.
//
// Contract shared by every method of every implementation:
//   - Non-blocking and pure: no goroutines, no clock, no I/O. Time enters only
//     as the now argument of NotifyFailure, a logical monotonic duration since
//     an arbitrary epoch; callers pass non-decreasing values.
//   - Not safe for concurrent use: a strategy is owned by the scheduler and
//     called only from the scheduler's single goroutine.
type RestartBackoffTimeStrategy interface {
	// NotifyFailure records a failure at logical time now. Returns true if this failure
	// is counted as a new one (Flink 1.19+: exponential-delay counts concurrent failures
	// within the current backoff as one; others always return true).
	//
	// It is not idempotent: every call is one more failure (except the merged
	// ones of exponential-delay), so call it exactly once per failure. The
	// now of the latest call is the reference time of the queries below.
	NotifyFailure(now time.Duration, cause error) bool
	// CanRestart reports whether another restart is allowed after the failures so far.
	//
	// It is a query: no side effects, the same answer until the next
	// NotifyFailure. Before any failure it is true for every strategy but
	// none.
	CanRestart() bool
	// BackoffTime is the delay before the next restart.
	//
	// It is a query: no side effects, the same answer until the next
	// NotifyFailure (jitter is drawn in NotifyFailure, not here). It is only
	// meaningful after NotifyFailure and when CanRestart is true, and never
	// negative.
	BackoffTime() time.Duration
	// String describes the strategy and its settings, e.g. for the job's exception history.
	//
	// It describes configuration only, never mutable state, so it is stable
	// over the strategy's lifetime.
	String() string
}

// Compile-time checks.
var (
	_ RestartBackoffTimeStrategy = NoRestartStrategy{}
	_ RestartBackoffTimeStrategy = (*FixedDelayStrategy)(nil)
	_ RestartBackoffTimeStrategy = (*FailureRateStrategy)(nil)
	_ RestartBackoffTimeStrategy = (*ExponentialDelayStrategy)(nil)
)

// NoRestartStrategy never restarts (restart-strategy.type "none", "off" or
// "disable"). It is stateless; the zero value is ready to use.
type NoRestartStrategy struct{}

// NotifyFailure records nothing and returns true.
func (NoRestartStrategy) NotifyFailure(time.Duration, error) bool { return true }

// CanRestart is always false.
func (NoRestartStrategy) CanRestart() bool { return false }

// BackoffTime is always 0.
func (NoRestartStrategy) BackoffTime() time.Duration { return 0 }

// String returns "none".
func (NoRestartStrategy) String() string { return RestartTypeNone }

// FixedDelayStrategy restarts up to a fixed number of times, waiting a fixed
// delay before each restart (restart-strategy.type "fixed-delay"). With
// attempts = N, failures 1..N may restart and failure N+1 may not.
type FixedDelayStrategy struct {
	attempts int
	delay    time.Duration
	failures int
}

// NewFixedDelayStrategy returns a fixed-delay strategy allowing attempts
// restarts (>= 0) with delay (>= 0) before each. Flink's defaults are 1
// attempt and 1 s. A *ConfigError lists every invalid argument.
func NewFixedDelayStrategy(attempts int, delay time.Duration) (*FixedDelayStrategy, error) {
	if err := newConfigError(validateFixedDelay(attempts, delay)); err != nil {
		return nil, err
	}
	return &FixedDelayStrategy{attempts: attempts, delay: delay}, nil
}

// NotifyFailure counts one more failure and returns true.
func (s *FixedDelayStrategy) NotifyFailure(time.Duration, error) bool {
	if s.failures < math.MaxInt {
		s.failures++
	}
	return true
}

// CanRestart reports whether at most attempts failures have happened.
func (s *FixedDelayStrategy) CanRestart() bool { return s.failures <= s.attempts }

// BackoffTime is the fixed delay.
func (s *FixedDelayStrategy) BackoffTime() time.Duration { return s.delay }

// String returns e.g. "fixed-delay(attempts=3, delay=10s)".
func (s *FixedDelayStrategy) String() string {
	return fmt.Sprintf("%s(attempts=%d, delay=%v)", RestartTypeFixedDelay, s.attempts, s.delay)
}

// FailureRateStrategy restarts as long as the failure rate stays low enough
// (restart-strategy.type "failure-rate"): it refuses once more than
// maxFailuresPerInterval failures fall within one interval, and waits a fixed
// delay before each restart.
//
// Like Flink, it keeps the timestamps of the last maxFailuresPerInterval+1
// failures. Restarting is refused when all of them lie within interval of
// the latest failure (latest - oldest <= interval). Because only the window
// matters, a failure that comes more than interval after the oldest
// remembered one is allowed again.
type FailureRateStrategy struct {
	maxFailures int
	interval    time.Duration
	delay       time.Duration
	// ring buffer of the last maxFailures+1 failure times, oldest first
	// starting at head.
	times []time.Duration
	head  int
	count int
}

// NewFailureRateStrategy returns a failure-rate strategy. maxFailuresPerInterval
// and interval must be positive, delay non-negative. Flink's defaults are 1
// failure per 1 min and a 1 s delay. A *ConfigError lists every invalid
// argument.
func NewFailureRateStrategy(maxFailuresPerInterval int, interval, delay time.Duration) (*FailureRateStrategy, error) {
	if err := newConfigError(validateFailureRate(maxFailuresPerInterval, interval, delay)); err != nil {
		return nil, err
	}
	return &FailureRateStrategy{
		maxFailures: maxFailuresPerInterval,
		interval:    interval,
		delay:       delay,
	}, nil
}

// NotifyFailure records the failure time now, forgetting the oldest one
// once maxFailuresPerInterval+1 are remembered, and returns true.
func (s *FailureRateStrategy) NotifyFailure(now time.Duration, _ error) bool {
	capacity := s.maxFailures + 1
	if s.times == nil {
		// Allocate lazily; cap the initial size so a huge limit costs nothing
		// until failures actually happen.
		s.times = make([]time.Duration, 0, min(capacity, 64))
	}
	if s.count < capacity {
		// Not full yet: nothing was ever overwritten, so head is 0 and the
		// times are in order.
		s.times = append(s.times, now)
		s.count++
		return true
	}
	// Full: overwrite the oldest.
	s.times[s.head] = now
	s.head = (s.head + 1) % capacity
	return true
}

// CanRestart reports false when the last maxFailuresPerInterval+1 failures
// all fell within interval, measured at the latest failure.
func (s *FailureRateStrategy) CanRestart() bool {
	if s.count <= s.maxFailures {
		return true
	}
	capacity := s.maxFailures + 1
	oldest := s.times[s.head]
	latest := s.times[(s.head+s.count-1)%capacity]
	return latest-oldest > s.interval
}

// BackoffTime is the fixed delay.
func (s *FailureRateStrategy) BackoffTime() time.Duration { return s.delay }

// String returns e.g. "failure-rate(maxFailuresPerInterval=1, interval=1m0s, delay=1s)".
func (s *FailureRateStrategy) String() string {
	return fmt.Sprintf("%s(maxFailuresPerInterval=%d, interval=%v, delay=%v)",
		RestartTypeFailureRate, s.maxFailures, s.interval, s.delay)
}

func validateFixedDelay(attempts int, delay time.Duration) []string {
	var p []string
	if attempts < 0 {
		p = append(p, fmt.Sprintf("fixed-delay attempts must be >= 0, got %d", attempts))
	}
	if delay < 0 {
		p = append(p, fmt.Sprintf("fixed-delay delay must be >= 0, got %v", delay))
	}
	return p
}

func validateFailureRate(maxFailures int, interval, delay time.Duration) []string {
	var p []string
	if maxFailures <= 0 {
		p = append(p, fmt.Sprintf("failure-rate max failures per interval must be > 0, got %d", maxFailures))
	} else if maxFailures == math.MaxInt {
		p = append(p, fmt.Sprintf("failure-rate max failures per interval must be < %d", maxFailures))
	}
	if interval <= 0 {
		p = append(p, fmt.Sprintf("failure-rate interval must be > 0, got %v", interval))
	}
	if delay < 0 {
		p = append(p, fmt.Sprintf("failure-rate delay must be >= 0, got %v", delay))
	}
	return p
}
