package failover

import (
	"fmt"
	"math"
	"time"
)

// ExponentialDelayStrategy waits longer after each consecutive failure
// (restart-strategy.type "exponential-delay"), with Flink 1.19+ semantics:
//
//   - The n-th counted failure (n = 1, 2, ...) schedules a restart after
//     initialBackoff * multiplier^(n-1), plus a jitter drawn uniformly from
//     [-jitterFactor*b, +jitterFactor*b] where b is that un-jittered backoff,
//     and the result is clamped to [initialBackoff, maxBackoff].
//   - Failures that arrive while a restart is still pending (now before the
//     scheduled restart time) are merged into the pending attempt:
//     NotifyFailure returns false and nothing changes. This is how Flink
//     counts a burst of concurrent task failures as one.
//   - If the job ran at least resetBackoffThreshold since the last scheduled
//     restart without failing, the backoff and the attempt counter go back to
//     their initial values.
//   - CanRestart turns false once more than attemptsBeforeResetBackoff
//     failures were counted since the last reset.
//
// BackoffTime is the time left until the scheduled restart, measured from
// the now of the latest NotifyFailure, so for a merged failure it is the
// remainder of the pending backoff.
type ExponentialDelayStrategy struct {
	initialBackoff        time.Duration
	maxBackoff            time.Duration
	multiplier            float64
	resetBackoffThreshold time.Duration
	jitterFactor          float64
	attemptsBeforeReset   int
	rnd                   func() float64

	attempt       int           // counted failures since the last reset
	failed        bool          // whether any failure was counted yet
	nextRestartAt time.Duration // when the pending/last restart is scheduled
	lastNow       time.Duration // now of the latest NotifyFailure
}

// NewExponentialDelayStrategy returns an exponential-delay strategy. Flink's
// defaults are initialBackoff 1 s, maxBackoff 1 min, multiplier 1.5,
// resetBackoffThreshold 1 h, jitterFactor 0.1 and attemptsBeforeResetBackoff
// 2147483647 (see [DefaultRestartConfig]).
//
// Requirements, as in Flink: 0 < initialBackoff <= maxBackoff, multiplier > 1,
// resetBackoffThreshold > 0, 0 <= jitterFactor <= 1 and
// attemptsBeforeResetBackoff >= 1. A *ConfigError lists every violation.
//
// rnd is the only randomness source: it must return values in [0, 1) (values
// outside are clamped) and is called once per counted failure when
// jitterFactor > 0. A nil rnd means no jitter.
func NewExponentialDelayStrategy(
	initialBackoff, maxBackoff time.Duration,
	multiplier float64,
	resetBackoffThreshold time.Duration,
	jitterFactor float64,
	attemptsBeforeResetBackoff int,
	rnd func() float64,
) (*ExponentialDelayStrategy, error) {
	if err := newConfigError(validateExponentialDelay(initialBackoff, maxBackoff, multiplier,
		resetBackoffThreshold, jitterFactor, attemptsBeforeResetBackoff)); err != nil {
		return nil, err
	}
	return &ExponentialDelayStrategy{
		initialBackoff:        initialBackoff,
		maxBackoff:            maxBackoff,
		multiplier:            multiplier,
		resetBackoffThreshold: resetBackoffThreshold,
		jitterFactor:          jitterFactor,
		attemptsBeforeReset:   attemptsBeforeResetBackoff,
		rnd:                   rnd,
	}, nil
}

// NotifyFailure records a failure at now. It returns false, changing
// nothing but the reference time of BackoffTime, if a restart is still
// pending (now before the scheduled restart time; the scheduler restarts at
// that time, so a failure reported then is one of the new attempts);
// otherwise it resets the
// backoff if the job ran for resetBackoffThreshold since the last restart,
// schedules the next restart, counts one attempt and returns true.
func (s *ExponentialDelayStrategy) NotifyFailure(now time.Duration, _ error) bool {
	s.lastNow = now
	if s.failed && now < s.nextRestartAt {
		return false
	}
	if !s.failed || now-s.nextRestartAt >= s.resetBackoffThreshold {
		s.attempt = 0
	}
	s.nextRestartAt = now + s.backoffFor(s.attempt)
	if s.attempt < math.MaxInt {
		s.attempt++
	}
	s.failed = true
	return true
}

// CanRestart reports whether at most attemptsBeforeResetBackoff failures
// were counted since the last reset.
func (s *ExponentialDelayStrategy) CanRestart() bool {
	return s.attempt <= s.attemptsBeforeReset
}

// BackoffTime is the time from the latest NotifyFailure until the scheduled
// restart, never negative; 0 before the first failure.
func (s *ExponentialDelayStrategy) BackoffTime() time.Duration {
	if !s.failed {
		return 0
	}
	return max(0, s.nextRestartAt-s.lastNow)
}

// String returns the strategy's settings, e.g.
// "exponential-delay(initialBackoff=1s, maxBackoff=1m0s, multiplier=1.5,
// resetBackoffThreshold=1h0m0s, jitterFactor=0.1,
// attemptsBeforeResetBackoff=2147483647)".
func (s *ExponentialDelayStrategy) String() string {
	return fmt.Sprintf("%s(initialBackoff=%v, maxBackoff=%v, multiplier=%g, "+
		"resetBackoffThreshold=%v, jitterFactor=%g, attemptsBeforeResetBackoff=%d)",
		RestartTypeExponentialDelay, s.initialBackoff, s.maxBackoff, s.multiplier,
		s.resetBackoffThreshold, s.jitterFactor, s.attemptsBeforeReset)
}

// backoffFor returns the jittered, clamped backoff for the attempt-th
// counted failure since the last reset (0-based).
func (s *ExponentialDelayStrategy) backoffFor(attempt int) time.Duration {
	base := float64(s.initialBackoff) * math.Pow(s.multiplier, float64(attempt))
	// Far beyond any maxBackoff (or overflowed): the clamp decides. This also
	// keeps the integer arithmetic below from overflowing.
	if math.IsInf(base, 0) || math.IsNaN(base) || base >= 1<<62 {
		return s.maxBackoff
	}
	b := time.Duration(base)
	d := b + s.jitter(b)
	return min(max(d, s.initialBackoff), s.maxBackoff)
}

// jitter returns a value uniformly distributed over the integers in
// [-offset, offset], offset = jitterFactor*b, using the injected rnd.
func (s *ExponentialDelayStrategy) jitter(b time.Duration) time.Duration {
	if s.jitterFactor == 0 || s.rnd == nil {
		return 0
	}
	offset := time.Duration(float64(b) * s.jitterFactor)
	if offset <= 0 {
		return 0
	}
	r := s.rnd()
	if !(r >= 0) { // also catches NaN
		r = 0
	}
	if r >= 1 {
		r = math.Nextafter(1, 0)
	}
	j := time.Duration(r*float64(2*offset+1)) - offset
	return min(j, offset) // guard against float rounding up
}

func validateExponentialDelay(initial, maxBackoff time.Duration, multiplier float64,
	reset time.Duration, jitter float64, attempts int) []string {
	var p []string
	if initial <= 0 {
		p = append(p, fmt.Sprintf("exponential-delay initial backoff must be > 0, got %v", initial))
	}
	if maxBackoff <= 0 {
		p = append(p, fmt.Sprintf("exponential-delay max backoff must be > 0, got %v", maxBackoff))
	}
	if initial > 0 && maxBackoff > 0 && initial > maxBackoff {
		p = append(p, fmt.Sprintf("exponential-delay initial backoff %v must not exceed max backoff %v", initial, maxBackoff))
	}
	if !(multiplier > 1) || math.IsInf(multiplier, 0) {
		p = append(p, fmt.Sprintf("exponential-delay backoff multiplier must be > 1, got %g", multiplier))
	}
	if reset <= 0 {
		p = append(p, fmt.Sprintf("exponential-delay reset backoff threshold must be > 0, got %v", reset))
	}
	if !(jitter >= 0 && jitter <= 1) {
		p = append(p, fmt.Sprintf("exponential-delay jitter factor must be in [0, 1], got %g", jitter))
	}
	if attempts < 1 {
		p = append(p, fmt.Sprintf("exponential-delay attempts before reset backoff must be >= 1, got %d", attempts))
	}
	return p
}
