package faultsim

import (
	"flag"
	"fmt"
	"github.com/gofl/gofl/jobgraph"
	"github.com/rs/zerolog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/jobmanager/failover"
	"github.com/gofl/gofl/jobmanager/scheduler"
	"github.com/gofl/gofl/jobmanager/simulator"
)

func baseConfig(seed uint64, batch bool) ClusterConfig {
	return ClusterConfig{
		Seed: seed, TaskManagers: 3, Slots: 2,
		Job:       simulator.WordcountJob(4, batch),
		Scheduler: simConfig(scheduler.StrategyPipelinedRegion, scheduler.FailoverRegion),
	}
}

func simConfig(strategy, fo string) scheduler.Config {
	cfg := scheduler.DefaultConfig()
	cfg.Strategy, cfg.Failover = strategy, fo
	cfg.Restart.Type = failover.RestartTypeFixedDelay
	cfg.Restart.FixedDelayAttempts = 1000
	cfg.Restart.FixedDelay = 100 * time.Millisecond
	return cfg
}

func TestHealthyClusterFinishes(t *testing.T) {
	for _, batch := range []bool{false, true} {
		r := RunCluster(baseConfig(1, batch))
		if len(r.Violations) > 0 || r.Status != scheduler.JobFinished {
			t.Fatalf("batch=%v: %s after %d steps:\n%s", batch, r.Status, r.Steps, strings.Join(r.Violations, "\n"))
		}
		t.Logf("batch=%v: finished in %v simulated, %d steps", batch, r.Simulated, r.Steps)
	}
}

// profile draws one run's configuration from its seed: strategy, failover,
// batch or streaming, and how hostile the network and the processes are.
func profile(seed uint64) ClusterConfig {
	strategies := []string{scheduler.StrategyPipelinedRegion, scheduler.StrategyEager, scheduler.StrategyLazyFromSources, scheduler.StrategyLazyFromSourcesBatchRequests}
	fos := []string{scheduler.FailoverRegion, scheduler.FailoverFull}
	cfg := baseConfig(seed, seed%2 == 0)
	cfg.Scheduler = simConfig(strategies[seed/2%4], fos[seed/8%2])
	switch seed / 16 % 4 {
	case 0: // lossy network only
		cfg.Faults = Faults{Drop: 0.05, Duplicate: 0.05, MinLatency: 100 * time.Microsecond, MaxLatency: 30 * time.Millisecond, Late: 0.02, LateLatency: 3 * time.Second}
		cfg.LoseRMMessages = true
	case 1: // crashes
		cfg.Crashes = 2
	case 2: // partitions
		cfg.Partitions = 2
	case 3: // everything
		cfg.Faults = Faults{Drop: 0.05, Duplicate: 0.05, MinLatency: 100 * time.Microsecond, MaxLatency: 30 * time.Millisecond, Late: 0.02, LateLatency: 3 * time.Second}
		cfg.LoseRMMessages = true
		cfg.Crashes, cfg.Partitions = 2, 1
	}
	if seed%5 == 0 { // and a user cancels it
		cfg.CancelAt = time.Duration(seed%97) * 100 * time.Millisecond
	}
	return cfg
}

// TestFaultySeeds runs the fault simulation over -seeds seeds (2000 in
// make test, 100,000 in make bench-sim). Every run must end FINISHED with
// every invariant held; a failing seed names the command that replays it.
func TestFaultySeeds(t *testing.T) {
	n := *seeds
	failed := 0
	start := time.Now()
	var steps int
	for seed := uint64(1); seed <= n; seed++ {
		r := RunCluster(profile(seed))
		steps += r.Steps
		if len(r.Violations) > 0 {
			failed++
			if failed <= 10 {
				t.Errorf("seed %d (%s): %s\n\treplay: go test ./internal/faultsim -run TestReplay -seed %d -v",
					seed, describe(profile(seed)), strings.Join(r.Violations[:min(3, len(r.Violations))], " | "), seed)
			}
		}
	}
	elapsed := time.Since(start)
	t.Logf("%d runs in %v: %.0f runs/s, %.0f steps per run", n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), float64(steps)/float64(n))
	if failed > 0 {
		t.Errorf("%d of %d seeds failed", failed, n)
	}
}

// BenchmarkClusterRun measures simulated cluster runs per second over the
// same seeded profiles (benchstat-friendly).
func BenchmarkClusterRun(b *testing.B) {
	for i := 0; b.Loop(); i++ {
		if r := RunCluster(profile(uint64(i%2000) + 1)); len(r.Violations) > 0 {
			b.Fatalf("seed %d: %v", i%2000+1, r.Violations[0])
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
}

func describe(c ClusterConfig) string {
	return fmt.Sprintf("%s/%s batch=%v drop=%.2f crashes=%d partitions=%d cancel-at=%v", c.Scheduler.Strategy, c.Scheduler.Failover, c.Job.Type == jobgraph.Batch, c.Faults.Drop, c.Crashes, c.Partitions, c.CancelAt)
}

var (
	replaySeed = flag.Uint64("seed", 0, "replay this seed of the fault simulation (TestReplay), with logs")
	seeds      = flag.Uint64("seeds", 2000, "how many seeds TestFaultySeeds runs")
)

// TestReplay replays one seed with the endpoints' logs:
// go test ./internal/faultsim -run TestReplay -seed N -v
func TestReplay(t *testing.T) {
	if *replaySeed == 0 {
		t.Skip("no -seed given")
	}
	cfg := profile(*replaySeed)
	cfg.Log = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, NoColor: true, PartsExclude: []string{zerolog.TimestampFieldName}})
	t.Logf("seed %d: %s", *replaySeed, describe(cfg))
	r := RunCluster(cfg)
	for _, l := range r.Trace {
		t.Log("fault: " + l)
	}
	for _, v := range r.Violations {
		t.Error(v)
	}
}
