package scheduler

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/conf"
)

func TestConfigFromConf(t *testing.T) {
	c, err := conf.FromMap(map[string]string{
		"jobmanager.scheduler.scheduling-strategy":       "eager",
		"jobmanager.scheduler.slot-allocator":            "simple",
		"jobmanager.execution.failover-strategy":         "full",
		"cluster.evenly-spread-out-slots":                "true",
		"state.backend.local-recovery":                   "true",
		"slot.request.timeout":                           "30 s",
		"restart-strategy.type":                          "fixeddelay",
		"restart-strategy.fixed-delay.attempts":          "7",
		"restart-strategy.fixed-delay.delay":             "2 s",
		"blob.offload.minsize":                           "64 kb",
		"restart-strategy.exponential-delay.max-backoff": "2 min",
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := ConfigFromConf(c)
	if cfg.Strategy != StrategyEager || cfg.Allocator != AllocatorSimple || cfg.Failover != FailoverFull ||
		!cfg.EvenlySpreadOut || !cfg.LocalRecovery || cfg.SlotRequestTimeout != 30*time.Second ||
		cfg.Restart.Type != "fixed-delay" || cfg.Restart.FixedDelayAttempts != 7 || cfg.Restart.FixedDelay != 2*time.Second ||
		cfg.OffloadMinSize != 64<<10 || cfg.Restart.ExponentialDelayMaxBackoff != 2*time.Minute {
		t.Fatalf("ConfigFromConf = %+v", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if d := ConfigFromConf(conf.NewConfiguration()); d.Strategy != StrategyPipelinedRegion || d.Failover != FailoverRegion || d.Validate() != nil {
		t.Fatalf("defaults = %+v", d)
	}
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Strategy, cfg.Allocator, cfg.Failover = "fastest", "greedy", "some"
	cfg.SlotRequestTimeout = 0
	err := cfg.Validate()
	if !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Validate() = %v", err)
	}
	for _, want := range []string{`scheduling-strategy: "fastest"`, `slot-allocator: "greedy"`, `failover-strategy: "some"`, "slot.request.timeout"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
