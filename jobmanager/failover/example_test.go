package failover_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/gofl/gofl/jobmanager/failover"
)

// The scheduler classifies each failure, tells the strategy about it, and
// either fails the job or sets a timer for the backoff. Time is logical.
func Example() {
	cfg := failover.DefaultRestartConfig()
	cfg.Type = failover.RestartTypeExponentialDelay
	cfg.ExponentialDelayBackoffMultiplier = 2
	cfg.ExponentialDelayJitterFactor = 0 // deterministic output
	strategy, err := failover.NewRestartBackoffTimeStrategy(cfg, nil)
	if err != nil {
		panic(err)
	}

	failures := []struct {
		now time.Duration
		err error
	}{
		{0, failover.EnvironmentError(errors.New("TaskManager tm-1 lost"))},
		{300 * time.Millisecond, errors.New("map-2 failed")}, // same incident, restart pending
		{2 * time.Second, errors.New("map-2 failed again")},
		{5 * time.Second, fmt.Errorf("sink: %w", failover.NonRecoverable(errors.New("bad config")))},
	}
	for _, f := range failures {
		typ := failover.Classify(f.err)
		if !typ.Restartable() {
			fmt.Printf("%v: %s failure, job fails\n", f.now, typ)
			continue
		}
		counted := strategy.NotifyFailure(f.now, f.err)
		if !strategy.CanRestart() {
			fmt.Printf("%v: restarts exhausted, job fails\n", f.now)
			continue
		}
		fmt.Printf("%v: %s failure (new: %v), restart in %v\n", f.now, typ, counted, strategy.BackoffTime())
	}
	// Output:
	// 0s: environment failure (new: true), restart in 1s
	// 300ms: recoverable failure (new: false), restart in 700ms
	// 2s: recoverable failure (new: true), restart in 2s
	// 5s: non-recoverable failure, job fails
}
