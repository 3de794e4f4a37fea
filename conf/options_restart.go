package conf

import (
	"math"
	"time"
)

// Values of RestartStrategyType.
const (
	RestartNone             = "none"
	RestartFixedDelay       = "fixed-delay"
	RestartFailureRate      = "failure-rate"
	RestartExponentialDelay = "exponential-delay"
)

var (
	// RestartStrategyType picks the restart backoff strategy. Empty means
	// derived; read it with EffectiveRestartStrategy.
	RestartStrategyType = EnumOption("restart-strategy.type", "",
		[]string{RestartNone, RestartFixedDelay, RestartFailureRate, RestartExponentialDelay},
		"Restart backoff strategy after a recoverable failure. Unset means none, or exponential-delay when checkpointing is enabled. Flink's aliases off, disable, fixeddelay, failurerate and exponentialdelay are accepted.").
		WithAliases(map[string]string{
			"off": RestartNone, "disable": RestartNone,
			"fixeddelay": RestartFixedDelay, "failurerate": RestartFailureRate,
			"exponentialdelay": RestartExponentialDelay,
		})

	// FixedDelayAttempts is how often fixed-delay restarts before the job fails.
	FixedDelayAttempts = IntOption("restart-strategy.fixed-delay.attempts", 1,
		"fixed-delay: number of restart attempts before the job is declared failed.").
		WithCheck(atLeast(0))
	// FixedDelayDelay is the pause between fixed-delay restarts.
	FixedDelayDelay = DurationOption("restart-strategy.fixed-delay.delay", time.Second,
		"fixed-delay: pause between two consecutive restart attempts.")

	// FailureRateMaxFailuresPerInterval is how many failures failure-rate tolerates per interval.
	FailureRateMaxFailuresPerInterval = IntOption("restart-strategy.failure-rate.max-failures-per-interval", 1,
		"failure-rate: maximum number of restarts within one failure-rate-interval before the job fails.").
		WithCheck(atLeast(1))
	// FailureRateInterval is the window over which failure-rate counts failures.
	FailureRateInterval = DurationOption("restart-strategy.failure-rate.failure-rate-interval", time.Minute,
		"failure-rate: time window over which failures are counted.").
		WithCheck(positive)
	// FailureRateDelay is the pause between failure-rate restarts.
	FailureRateDelay = DurationOption("restart-strategy.failure-rate.delay", time.Second,
		"failure-rate: pause between two consecutive restart attempts.")

	// ExponentialDelayInitialBackoff is the first exponential-delay backoff.
	ExponentialDelayInitialBackoff = DurationOption("restart-strategy.exponential-delay.initial-backoff", time.Second,
		"exponential-delay: backoff before the first restart.").
		WithCheck(positive)
	// ExponentialDelayMaxBackoff caps the exponential-delay backoff.
	ExponentialDelayMaxBackoff = DurationOption("restart-strategy.exponential-delay.max-backoff", time.Minute,
		"exponential-delay: upper bound of the backoff; must be at least initial-backoff.").
		WithCheck(positive)
	// ExponentialDelayBackoffMultiplier grows the backoff after each failure.
	ExponentialDelayBackoffMultiplier = FloatOption("restart-strategy.exponential-delay.backoff-multiplier", 1.5,
		"exponential-delay: factor the backoff is multiplied by after each failure; at least 1.").
		WithCheck(floatAtLeast(1))
	// ExponentialDelayResetBackoffThreshold resets the backoff after this long without failures.
	ExponentialDelayResetBackoffThreshold = DurationOption("restart-strategy.exponential-delay.reset-backoff-threshold", time.Hour,
		"exponential-delay: time without failures after which the backoff resets to initial-backoff.").
		WithCheck(positive)
	// ExponentialDelayJitterFactor randomizes the backoff by up to this fraction.
	ExponentialDelayJitterFactor = FloatOption("restart-strategy.exponential-delay.jitter-factor", 0.1,
		"exponential-delay: fraction of the backoff added or subtracted at random so restarts do not align; between 0 and 1.").
		WithCheck(floatBetween(0, 1))
	// ExponentialDelayAttemptsBeforeResetBackoff bounds the restarts between two backoff resets.
	ExponentialDelayAttemptsBeforeResetBackoff = IntOption("restart-strategy.exponential-delay.attempts-before-reset-backoff", math.MaxInt32,
		"exponential-delay: number of restarts allowed before the backoff is reset; when exceeded the job fails.").
		WithCheck(atLeast(1))
)

// EffectiveRestartStrategy resolves restart-strategy.type: the set value, or,
// when unset, exponential-delay if checkpointing is enabled and none
// otherwise, as in Flink 1.19+.
func EffectiveRestartStrategy(c *Configuration) string {
	if t := RestartStrategyType.Get(c); t != "" {
		return t
	}
	if CheckpointingInterval.Get(c) > 0 {
		return RestartExponentialDelay
	}
	return RestartNone
}
