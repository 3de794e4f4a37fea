package simulator

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gofl/gofl/jobmanager/failover"
	"github.com/gofl/gofl/jobmanager/scheduler"
)

func config(strategy, fo string) scheduler.Config {
	cfg := scheduler.DefaultConfig()
	cfg.Strategy, cfg.Failover = strategy, fo
	cfg.SlotRequestTimeout = 10 * time.Second
	cfg.SlotIdleTimeout = time.Second
	cfg.Restart.Type = failover.RestartTypeFixedDelay
	cfg.Restart.FixedDelayAttempts = 20
	cfg.Restart.FixedDelay = 100 * time.Millisecond
	return cfg
}

// TestRandomizedRuns drives wordcount through every strategy and failover
// strategy, batch and streaming, over many seeds with TaskManagers killed
// mid-job. The job must always finish, and the simulated cluster checks that
// no slot is used that the job does not hold.
func TestRandomizedRuns(t *testing.T) {
	strategies := []string{scheduler.StrategyPipelinedRegion, scheduler.StrategyEager, scheduler.StrategyLazyFromSources, scheduler.StrategyLazyFromSourcesBatchRequests}
	for _, strategy := range strategies {
		for _, fo := range []string{scheduler.FailoverRegion, scheduler.FailoverFull} {
			for _, batch := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/batch=%v", strategy, fo, batch)
				t.Run(name, func(t *testing.T) {
					for seed := uint64(1); seed <= 20; seed++ {
						opts := Options{TaskManagers: 3, SlotsPerTM: 2, Seed: seed,
							MinTaskDuration: 10 * time.Millisecond, MaxTaskDuration: 300 * time.Millisecond,
							HeartbeatTimeout: 50 * time.Millisecond, ReplaceAfter: 80 * time.Millisecond,
							KillAt: []time.Duration{time.Duration(seed*17%200) * time.Millisecond, 400 * time.Millisecond}, Limit: time.Minute}
						res, err := Run(config(strategy, fo), WordcountJob(4, batch), opts)
						if err != nil {
							t.Fatalf("seed %d: %v", seed, err)
						}
						if res.Status != scheduler.JobFinished {
							t.Fatalf("seed %d: job %s; failures: %v", seed, res.Status, res.Failures)
						}
						if len(res.Killed) > 0 && res.Restarts == 0 && len(res.Failures) > 0 {
							t.Fatalf("seed %d: failures %v but no restart", seed, res.Failures)
						}
					}
				})
			}
		}
	}
}

// Without restarts, a killed TaskManager fails the job, and the failure
// names the lost TaskManager.
func TestKillWithoutRestartFails(t *testing.T) {
	cfg := config(scheduler.StrategyPipelinedRegion, scheduler.FailoverRegion)
	cfg.Restart.Type = failover.RestartTypeNone
	res, err := Run(cfg, WordcountJob(4, false), Options{TaskManagers: 2, SlotsPerTM: 2, Seed: 3,
		MinTaskDuration: time.Second, MaxTaskDuration: 2 * time.Second, HeartbeatTimeout: 50 * time.Millisecond,
		ReplaceAfter: time.Second, KillAt: []time.Duration{100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != scheduler.JobFailed || len(res.Failures) == 0 || !errors.Is(res.Failures[0].Cause, scheduler.ErrTaskManagerLost) {
		t.Fatalf("result %+v, want FAILED with a TaskManager-lost cause", res)
	}
}

// A batch job runs with far fewer slots than tasks.
func TestBatchWithFewSlots(t *testing.T) {
	for _, strategy := range []string{scheduler.StrategyPipelinedRegion, scheduler.StrategyLazyFromSourcesBatchRequests} {
		res, err := Run(config(strategy, scheduler.FailoverRegion), WordcountJob(16, true), Options{TaskManagers: 1, SlotsPerTM: 2, Seed: 5,
			MinTaskDuration: 10 * time.Millisecond, MaxTaskDuration: 50 * time.Millisecond})
		if err != nil || res.Status != scheduler.JobFinished || res.Deployments != 64 || res.Restarts != 0 {
			t.Fatalf("%s: %+v, %v; want FINISHED with 64 deployments and no restart", strategy, res, err)
		}
	}
}
