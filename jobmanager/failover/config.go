package failover

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Canonical restart strategy type names. [RestartConfig.Type] also accepts
// Flink's aliases, case-insensitively: "off" and "disable" for none,
// "fixeddelay", "failurerate" and "exponentialdelay".
const (
	RestartTypeNone             = "none"
	RestartTypeFixedDelay       = "fixed-delay"
	RestartTypeFailureRate      = "failure-rate"
	RestartTypeExponentialDelay = "exponential-delay"
)

// allowedTypes lists every accepted spelling, in the order error messages
// name them.
var allowedTypes = []string{
	`"" (default)`,
	"none", "off", "disable",
	"fixed-delay", "fixeddelay",
	"failure-rate", "failurerate",
	"exponential-delay", "exponentialdelay",
}

// RestartConfig selects and configures a restart strategy; the fields mirror
// Flink's restart-strategy.* options. Start from [DefaultRestartConfig] and
// override what you need: zero values are taken literally (0 fixed-delay
// attempts means no restart), not as "use the default".
//
// Only the fields of the selected strategy are read and validated.
type RestartConfig struct {
	// Type is restart-strategy.type: "none", "fixed-delay", "failure-rate",
	// "exponential-delay" (or a Flink alias, any case), or "" for Flink's
	// default: "none" when checkpointing is disabled and exponential-delay
	// with Flink's default settings when it is enabled. As in Flink, that
	// default ignores the ExponentialDelay* fields; set Type explicitly to use
	// them.
	Type string

	// FixedDelayAttempts is restart-strategy.fixed-delay.attempts (>= 0).
	FixedDelayAttempts int
	// FixedDelay is restart-strategy.fixed-delay.delay (>= 0).
	FixedDelay time.Duration

	// FailureRateMaxFailuresPerInterval is
	// restart-strategy.failure-rate.max-failures-per-interval (> 0).
	FailureRateMaxFailuresPerInterval int
	// FailureRateInterval is restart-strategy.failure-rate.failure-rate-interval (> 0).
	FailureRateInterval time.Duration
	// FailureRateDelay is restart-strategy.failure-rate.delay (>= 0).
	FailureRateDelay time.Duration

	// ExponentialDelayInitialBackoff is
	// restart-strategy.exponential-delay.initial-backoff (> 0, <= max backoff).
	ExponentialDelayInitialBackoff time.Duration
	// ExponentialDelayMaxBackoff is restart-strategy.exponential-delay.max-backoff (> 0).
	ExponentialDelayMaxBackoff time.Duration
	// ExponentialDelayBackoffMultiplier is
	// restart-strategy.exponential-delay.backoff-multiplier (> 1).
	ExponentialDelayBackoffMultiplier float64
	// ExponentialDelayResetBackoffThreshold is
	// restart-strategy.exponential-delay.reset-backoff-threshold (> 0).
	ExponentialDelayResetBackoffThreshold time.Duration
	// ExponentialDelayJitterFactor is
	// restart-strategy.exponential-delay.jitter-factor (in [0, 1]).
	ExponentialDelayJitterFactor float64
	// ExponentialDelayAttemptsBeforeResetBackoff is
	// restart-strategy.exponential-delay.attempts-before-reset-backoff (>= 1).
	ExponentialDelayAttemptsBeforeResetBackoff int

	// CheckpointingEnabled tells whether the job checkpoints; it only matters
	// when Type is "".
	CheckpointingEnabled bool
}

// DefaultRestartConfig returns Flink's defaults (Flink 1.19+ / 2.x): Type ""
// (so "none" without checkpointing, exponential-delay with it); fixed-delay 1
// attempt, 1 s; failure-rate 1 failure per 1 min, 1 s delay;
// exponential-delay 1 s initial, 1 min max, multiplier 1.5, reset after 1 h,
// jitter 0.1, 2147483647 attempts before reset. Checkpointing is disabled.
func DefaultRestartConfig() RestartConfig {
	return RestartConfig{
		FixedDelayAttempts: 1,
		FixedDelay:         time.Second,

		FailureRateMaxFailuresPerInterval: 1,
		FailureRateInterval:               time.Minute,
		FailureRateDelay:                  time.Second,

		ExponentialDelayInitialBackoff:             time.Second,
		ExponentialDelayMaxBackoff:                 time.Minute,
		ExponentialDelayBackoffMultiplier:          1.5,
		ExponentialDelayResetBackoffThreshold:      time.Hour,
		ExponentialDelayJitterFactor:               0.1,
		ExponentialDelayAttemptsBeforeResetBackoff: math.MaxInt32,
	}
}

// EffectiveType returns the canonical name of the strategy the config
// selects ("none", "fixed-delay", "failure-rate" or "exponential-delay"),
// resolving aliases and the "" default. ok is false for an unknown Type.
func (c RestartConfig) EffectiveType() (typ string, ok bool) {
	switch strings.ToLower(strings.TrimSpace(c.Type)) {
	case "":
		if c.CheckpointingEnabled {
			return RestartTypeExponentialDelay, true
		}
		return RestartTypeNone, true
	case "none", "off", "disable":
		return RestartTypeNone, true
	case "fixed-delay", "fixeddelay":
		return RestartTypeFixedDelay, true
	case "failure-rate", "failurerate":
		return RestartTypeFailureRate, true
	case "exponential-delay", "exponentialdelay":
		return RestartTypeExponentialDelay, true
	default:
		return "", false
	}
}

// Validate checks the type and the fields of the selected strategy and
// returns a *ConfigError listing every problem, or nil.
func (c RestartConfig) Validate() error {
	return newConfigError(c.problems())
}

func (c RestartConfig) problems() []string {
	typ, ok := c.EffectiveType()
	if !ok {
		return []string{fmt.Sprintf("unknown restart strategy type %q (allowed: %s)",
			c.Type, strings.Join(allowedTypes, ", "))}
	}
	switch typ {
	case RestartTypeFixedDelay:
		return validateFixedDelay(c.FixedDelayAttempts, c.FixedDelay)
	case RestartTypeFailureRate:
		return validateFailureRate(c.FailureRateMaxFailuresPerInterval, c.FailureRateInterval, c.FailureRateDelay)
	case RestartTypeExponentialDelay:
		e := c.exponentialSettings()
		return validateExponentialDelay(e.ExponentialDelayInitialBackoff, e.ExponentialDelayMaxBackoff,
			e.ExponentialDelayBackoffMultiplier, e.ExponentialDelayResetBackoffThreshold,
			e.ExponentialDelayJitterFactor, e.ExponentialDelayAttemptsBeforeResetBackoff)
	}
	return nil
}

// exponentialSettings returns the config whose ExponentialDelay* fields
// apply: Flink's defaults when the type was defaulted, c otherwise.
func (c RestartConfig) exponentialSettings() RestartConfig {
	if strings.TrimSpace(c.Type) == "" {
		return DefaultRestartConfig()
	}
	return c
}

// NewRestartBackoffTimeStrategy builds the strategy cfg selects, the way
// Flink's RestartBackoffTimeStrategyFactoryLoader does (see
// [RestartConfig.Type] for the default). rnd is the jitter source of the
// exponential-delay strategy (values in [0, 1); nil means no jitter) and is
// ignored by the others. An invalid cfg yields a *ConfigError listing every
// problem; it matches [ErrInvalidConfig].
func NewRestartBackoffTimeStrategy(cfg RestartConfig, rnd func() float64) (RestartBackoffTimeStrategy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// The constructors cannot fail after Validate; check anyway, without
	// ever returning a typed nil pointer inside the interface.
	var (
		s   RestartBackoffTimeStrategy
		err error
	)
	typ, _ := cfg.EffectiveType()
	switch typ {
	case RestartTypeFixedDelay:
		var f *FixedDelayStrategy
		f, err = NewFixedDelayStrategy(cfg.FixedDelayAttempts, cfg.FixedDelay)
		s = f
	case RestartTypeFailureRate:
		var f *FailureRateStrategy
		f, err = NewFailureRateStrategy(cfg.FailureRateMaxFailuresPerInterval, cfg.FailureRateInterval, cfg.FailureRateDelay)
		s = f
	case RestartTypeExponentialDelay:
		e := cfg.exponentialSettings()
		var x *ExponentialDelayStrategy
		x, err = NewExponentialDelayStrategy(e.ExponentialDelayInitialBackoff, e.ExponentialDelayMaxBackoff,
			e.ExponentialDelayBackoffMultiplier, e.ExponentialDelayResetBackoffThreshold,
			e.ExponentialDelayJitterFactor, e.ExponentialDelayAttemptsBeforeResetBackoff, rnd)
		s = x
	default:
		s = NoRestartStrategy{}
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// ConfigError reports an invalid restart configuration. Problems lists every
// problem found, each a complete sentence fragment naming the field, the
// requirement and the offending value. It matches [ErrInvalidConfig].
type ConfigError struct {
	Problems []string
}

func (e *ConfigError) Error() string {
	return "failover: invalid restart configuration: " + strings.Join(e.Problems, "; ")
}

// Is reports whether target is [ErrInvalidConfig].
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// newConfigError returns nil for no problems, a *ConfigError otherwise. It
// returns error, not *ConfigError, so that a nil result is a nil interface.
func newConfigError(problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	return &ConfigError{Problems: problems}
}
