package scheduler

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/jobmanager/failover"
)

// Scheduling strategies (jobmanager.scheduler.scheduling-strategy).
const (
	StrategyPipelinedRegion              = "pipelined-region"
	StrategyEager                        = "eager"
	StrategyLazyFromSources              = "lazy-from-sources"
	StrategyLazyFromSourcesBatchRequests = "lazy-from-sources-with-batch-slot-request"
)

// Slot allocators (jobmanager.scheduler.slot-allocator).
const (
	AllocatorSlotSharing = "slot-sharing"
	AllocatorSimple      = "simple"
)

// Failover strategies (jobmanager.execution.failover-strategy).
const (
	FailoverRegion = "region"
	FailoverFull   = "full"
)

// ErrInvalidConfig is wrapped by configuration problems.
var ErrInvalidConfig = errors.New("scheduler: invalid configuration")

// Config selects the scheduler's strategies and timeouts.
type Config struct {
	Strategy  string
	Allocator string
	Failover  string
	// EvenlySpreadOut selects the evenly-spread-out slot selection strategy
	// (cluster.evenly-spread-out-slots) instead of locality-preferring.
	EvenlySpreadOut bool
	// LocalRecovery prefers each task's previous slot (previous-allocation).
	LocalRecovery      bool
	SlotRequestTimeout time.Duration
	SlotIdleTimeout    time.Duration
	Restart            failover.RestartConfig
	// Jitter feeds exponential-delay restarts; nil means no jitter.
	Jitter func() float64
	// OffloadMinSize is the size from which serialized shuffle descriptors
	// are shipped as a blob instead of inside every TDD (blob.offload.minsize).
	OffloadMinSize int
	// ExceptionHistorySize bounds the failures kept for the REST API.
	ExceptionHistorySize int
	// MissingTaskGrace is how long an attempt whose deployment its
	// TaskManager acknowledged, or a finished attempt's partition, may be
	// missing from that TaskManager's reports (TaskManagerReport) before
	// it counts as gone: a task that just ended is no longer reported while
	// its final state may still be on its way, and a TaskManager that is
	// reconnecting answers with nothing. 0: at the first report that misses
	// it.
	MissingTaskGrace time.Duration
	// StrictTransitions makes an illegal state transition inside the core
	// (a bug: the core itself got its states wrong) panic, for tests and the
	// simulator. Otherwise the job fails with ErrIllegalState and the whole
	// context. Stale or duplicate reports from TaskManagers are never
	// illegal.
	StrictTransitions bool
}

// DefaultConfig has Flink's defaults.
func DefaultConfig() Config {
	return Config{
		Strategy:             StrategyPipelinedRegion,
		Allocator:            AllocatorSlotSharing,
		Failover:             FailoverRegion,
		SlotRequestTimeout:   5 * time.Minute,
		SlotIdleTimeout:      50 * time.Second,
		Restart:              failover.DefaultRestartConfig(),
		OffloadMinSize:       1 << 20,
		ExceptionHistorySize: 16,
		MissingTaskGrace:     10 * time.Second,
	}
}

// Validate reports every problem.
func (c Config) Validate() error {
	var p []string
	oneOf := func(key, v string, allowed ...string) {
		for _, a := range allowed {
			if v == a {
				return
			}
		}
		p = append(p, fmt.Sprintf("%s: %q is not one of %s", key, v, strings.Join(allowed, ", ")))
	}
	oneOf("jobmanager.scheduler.scheduling-strategy", c.Strategy, StrategyPipelinedRegion, StrategyEager, StrategyLazyFromSources, StrategyLazyFromSourcesBatchRequests)
	oneOf("jobmanager.scheduler.slot-allocator", c.Allocator, AllocatorSlotSharing, AllocatorSimple)
	oneOf("jobmanager.execution.failover-strategy", c.Failover, FailoverRegion, FailoverFull)
	if c.SlotRequestTimeout <= 0 {
		p = append(p, fmt.Sprintf("slot.request.timeout: %v must be positive", c.SlotRequestTimeout))
	}
	if c.SlotIdleTimeout <= 0 {
		p = append(p, fmt.Sprintf("slot.idle.timeout: %v must be positive", c.SlotIdleTimeout))
	}
	if c.MissingTaskGrace < 0 {
		p = append(p, fmt.Sprintf("missing task grace: %v must not be negative", c.MissingTaskGrace))
	}
	if err := c.Restart.Validate(); err != nil {
		p = append(p, err.Error())
	}
	if len(p) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(p, "; "))
	}
	return nil
}

// ConfigFromConf reads the scheduler's options from a gofl configuration.
func ConfigFromConf(c *conf.Configuration) Config {
	cfg := DefaultConfig()
	cfg.Strategy = conf.SchedulingStrategy.Get(c)
	cfg.Allocator = conf.SlotAllocator.Get(c)
	cfg.Failover = conf.FailoverStrategy.Get(c)
	cfg.EvenlySpreadOut = conf.EvenlySpreadOutSlots.Get(c)
	cfg.LocalRecovery = conf.LocalRecovery.Get(c)
	cfg.SlotRequestTimeout = conf.SlotRequestTimeout.Get(c)
	cfg.SlotIdleTimeout = conf.SlotIdleTimeout.Get(c)
	cfg.OffloadMinSize = int(conf.BlobOffloadMinSize.Get(c))
	cfg.Restart = failover.RestartConfig{
		Type:                                       conf.RestartStrategyType.Get(c),
		FixedDelayAttempts:                         conf.FixedDelayAttempts.Get(c),
		FixedDelay:                                 conf.FixedDelayDelay.Get(c),
		FailureRateMaxFailuresPerInterval:          conf.FailureRateMaxFailuresPerInterval.Get(c),
		FailureRateInterval:                        conf.FailureRateInterval.Get(c),
		FailureRateDelay:                           conf.FailureRateDelay.Get(c),
		ExponentialDelayInitialBackoff:             conf.ExponentialDelayInitialBackoff.Get(c),
		ExponentialDelayMaxBackoff:                 conf.ExponentialDelayMaxBackoff.Get(c),
		ExponentialDelayBackoffMultiplier:          conf.ExponentialDelayBackoffMultiplier.Get(c),
		ExponentialDelayResetBackoffThreshold:      conf.ExponentialDelayResetBackoffThreshold.Get(c),
		ExponentialDelayJitterFactor:               conf.ExponentialDelayJitterFactor.Get(c),
		ExponentialDelayAttemptsBeforeResetBackoff: conf.ExponentialDelayAttemptsBeforeResetBackoff.Get(c),
		CheckpointingEnabled:                       conf.CheckpointingInterval.Get(c) > 0,
	}
	return cfg
}
