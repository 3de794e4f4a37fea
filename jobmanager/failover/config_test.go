package failover

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestDefaultRestartConfigIsFlinks(t *testing.T) {
	want := RestartConfig{
		Type:                                       "",
		FixedDelayAttempts:                         1,
		FixedDelay:                                 time.Second,
		FailureRateMaxFailuresPerInterval:          1,
		FailureRateInterval:                        time.Minute,
		FailureRateDelay:                           time.Second,
		ExponentialDelayInitialBackoff:             time.Second,
		ExponentialDelayMaxBackoff:                 time.Minute,
		ExponentialDelayBackoffMultiplier:          1.5,
		ExponentialDelayResetBackoffThreshold:      time.Hour,
		ExponentialDelayJitterFactor:               0.1,
		ExponentialDelayAttemptsBeforeResetBackoff: 2147483647,
		CheckpointingEnabled:                       false,
	}
	if got := DefaultRestartConfig(); got != want {
		t.Errorf("DefaultRestartConfig() =\n%+v\nwant\n%+v", got, want)
	}
}

func TestNewRestartBackoffTimeStrategySelectsType(t *testing.T) {
	withType := func(typ string, checkpointing bool) RestartConfig {
		c := DefaultRestartConfig()
		c.Type = typ
		c.CheckpointingEnabled = checkpointing
		return c
	}
	const defaultExp = "exponential-delay(initialBackoff=1s, maxBackoff=1m0s, multiplier=1.5, resetBackoffThreshold=1h0m0s, jitterFactor=0.1, attemptsBeforeResetBackoff=2147483647)"
	tests := []struct {
		name string
		cfg  RestartConfig
		want string
	}{
		{"default without checkpointing is none", withType("", false), "none"},
		{"default with checkpointing is exponential-delay", withType("", true), defaultExp},
		{"zero config with checkpointing uses Flink's exponential defaults", RestartConfig{CheckpointingEnabled: true}, defaultExp},
		{"zero config without checkpointing is none", RestartConfig{}, "none"},
		{
			"defaulted exponential-delay ignores the exponential fields, as Flink does",
			RestartConfig{CheckpointingEnabled: true, ExponentialDelayBackoffMultiplier: -4},
			defaultExp,
		},
		{"explicit type wins over checkpointing", withType("fixed-delay", true), "fixed-delay(attempts=1, delay=1s)"},
		{"none", withType("none", true), "none"},
		{"off alias", withType("off", true), "none"},
		{"disable alias, any case", withType("DISABLE", true), "none"},
		{"fixeddelay alias", withType("FixedDelay", false), "fixed-delay(attempts=1, delay=1s)"},
		{"failure-rate", withType("failure-rate", false), "failure-rate(maxFailuresPerInterval=1, interval=1m0s, delay=1s)"},
		{"failurerate alias with spaces", withType(" failurerate ", false), "failure-rate(maxFailuresPerInterval=1, interval=1m0s, delay=1s)"},
		{"exponential-delay", withType("exponential-delay", false), defaultExp},
		{"exponentialdelay alias", withType("exponentialdelay", false), defaultExp},
		{
			"only the selected type's fields are read",
			RestartConfig{Type: "fixed-delay", FixedDelayAttempts: 3, FixedDelay: 10 * time.Second},
			"fixed-delay(attempts=3, delay=10s)",
		},
		{
			"explicit exponential-delay uses the fields",
			RestartConfig{
				Type:                           "exponential-delay",
				ExponentialDelayInitialBackoff: 10 * time.Second, ExponentialDelayMaxBackoff: 2 * time.Minute,
				ExponentialDelayBackoffMultiplier: 1.4, ExponentialDelayResetBackoffThreshold: 10 * time.Minute,
				ExponentialDelayJitterFactor: 0.1, ExponentialDelayAttemptsBeforeResetBackoff: 10,
			},
			"exponential-delay(initialBackoff=10s, maxBackoff=2m0s, multiplier=1.4, resetBackoffThreshold=10m0s, jitterFactor=0.1, attemptsBeforeResetBackoff=10)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewRestartBackoffTimeStrategy(tt.cfg, nil)
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got := s.String(); got != tt.want {
				t.Errorf("strategy = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestFactoryPassesRnd(t *testing.T) {
	cfg := DefaultRestartConfig()
	cfg.CheckpointingEnabled = true
	calls := 0
	s, err := NewRestartBackoffTimeStrategy(cfg, func() float64 { calls++; return 1 - 1e-10 })
	if err != nil {
		t.Fatal(err)
	}
	s.NotifyFailure(0, errTask)
	s.NotifyFailure(2*time.Second, errTask) // 1.5s ± 0.15s -> 1.65s
	if got, want := s.BackoffTime(), 1650*time.Millisecond; got != want {
		t.Errorf("backoff = %v, want %v", got, want)
	}
	if calls != 2 {
		t.Errorf("rnd called %d times, want once per counted failure (2)", calls)
	}
}

func TestConfigValidationReportsEveryProblem(t *testing.T) {
	tests := []struct {
		name string
		cfg  RestartConfig
		want []string // substrings, one per expected problem
	}{
		{
			name: "unknown type names the allowed ones",
			cfg:  RestartConfig{Type: "fixed_delay", FixedDelayAttempts: -1},
			want: []string{`unknown restart strategy type "fixed_delay" (allowed: "" (default), none, off, disable, fixed-delay, fixeddelay, failure-rate, failurerate, exponential-delay, exponentialdelay)`},
		},
		{
			name: "fixed-delay",
			cfg:  RestartConfig{Type: "fixed-delay", FixedDelayAttempts: -1, FixedDelay: -time.Second},
			want: []string{
				"fixed-delay attempts must be >= 0, got -1",
				"fixed-delay delay must be >= 0, got -1s",
			},
		},
		{
			name: "failure-rate",
			cfg:  RestartConfig{Type: "failure-rate", FailureRateMaxFailuresPerInterval: 0, FailureRateInterval: 0, FailureRateDelay: -time.Millisecond},
			want: []string{
				"failure-rate max failures per interval must be > 0, got 0",
				"failure-rate interval must be > 0, got 0s",
				"failure-rate delay must be >= 0, got -1ms",
			},
		},
		{
			name: "exponential-delay, everything wrong",
			cfg: RestartConfig{
				Type:                           "exponential-delay",
				ExponentialDelayInitialBackoff: 0, ExponentialDelayMaxBackoff: -time.Second,
				ExponentialDelayBackoffMultiplier: 0.5, ExponentialDelayResetBackoffThreshold: 0,
				ExponentialDelayJitterFactor: 1.5, ExponentialDelayAttemptsBeforeResetBackoff: 0,
			},
			want: []string{
				"exponential-delay initial backoff must be > 0, got 0s",
				"exponential-delay max backoff must be > 0, got -1s",
				"exponential-delay backoff multiplier must be > 1, got 0.5",
				"exponential-delay reset backoff threshold must be > 0, got 0s",
				"exponential-delay jitter factor must be in [0, 1], got 1.5",
				"exponential-delay attempts before reset backoff must be >= 1, got 0",
			},
		},
		{
			name: "exponential-delay initial above max",
			cfg:  expCfg(func(c *RestartConfig) { c.ExponentialDelayInitialBackoff = 2 * time.Minute }),
			want: []string{"exponential-delay initial backoff 2m0s must not exceed max backoff 1m0s"},
		},
		{
			name: "multiplier 1 is rejected, as in Flink",
			cfg:  expCfg(func(c *RestartConfig) { c.ExponentialDelayBackoffMultiplier = 1 }),
			want: []string{"backoff multiplier must be > 1, got 1"},
		},
		{
			name: "NaNs are rejected",
			cfg: expCfg(func(c *RestartConfig) {
				c.ExponentialDelayBackoffMultiplier = math.NaN()
				c.ExponentialDelayJitterFactor = math.NaN()
			}),
			want: []string{"backoff multiplier must be > 1, got NaN", "jitter factor must be in [0, 1], got NaN"},
		},
		{
			name: "negative jitter",
			cfg:  expCfg(func(c *RestartConfig) { c.ExponentialDelayJitterFactor = -0.1 }),
			want: []string{"jitter factor must be in [0, 1], got -0.1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewRestartBackoffTimeStrategy(tt.cfg, nil)
			if err == nil {
				t.Fatalf("got strategy %v, want an error", s)
			}
			if s != nil {
				t.Errorf("got strategy %#v alongside the error, want nil", s)
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("errors.Is(err, ErrInvalidConfig) = false for %v", err)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *ConfigError", err)
			}
			if len(ce.Problems) != len(tt.want) {
				t.Errorf("got %d problems %q, want %d", len(ce.Problems), ce.Problems, len(tt.want))
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if tt.cfg.Validate() == nil {
				t.Error("Validate() = nil, want the same error")
			}
		})
	}
}

func expCfg(mod func(*RestartConfig)) RestartConfig {
	c := DefaultRestartConfig()
	c.Type = RestartTypeExponentialDelay
	mod(&c)
	return c
}

func TestValidBoundaries(t *testing.T) {
	valid := []RestartConfig{
		{Type: "fixed-delay", FixedDelayAttempts: 0, FixedDelay: 0},
		{Type: "failure-rate", FailureRateMaxFailuresPerInterval: 1, FailureRateInterval: time.Nanosecond},
		expCfg(func(c *RestartConfig) { c.ExponentialDelayJitterFactor = 0 }),
		expCfg(func(c *RestartConfig) { c.ExponentialDelayJitterFactor = 1 }),
		expCfg(func(c *RestartConfig) { c.ExponentialDelayBackoffMultiplier = 1.000001 }),
		expCfg(func(c *RestartConfig) { c.ExponentialDelayAttemptsBeforeResetBackoff = 1 }),
		expCfg(func(c *RestartConfig) { c.ExponentialDelayInitialBackoff = c.ExponentialDelayMaxBackoff }),
		{Type: "none", FixedDelayAttempts: -5}, // unrelated fields are not validated
	}
	for _, c := range valid {
		if err := c.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", c, err)
		}
	}
}

func TestConstructorsValidate(t *testing.T) {
	if _, err := NewFixedDelayStrategy(-1, -1); err == nil || len(err.(*ConfigError).Problems) != 2 {
		t.Errorf("NewFixedDelayStrategy(-1, -1) error = %v, want 2 problems", err)
	}
	if _, err := NewFailureRateStrategy(0, 0, 0); err == nil || len(err.(*ConfigError).Problems) != 2 {
		t.Errorf("NewFailureRateStrategy(0, 0, 0) error = %v, want 2 problems", err)
	}
	if _, err := NewExponentialDelayStrategy(time.Second, time.Minute, 2, time.Hour, 2, 1, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("NewExponentialDelayStrategy with jitter 2: error = %v, want ErrInvalidConfig", err)
	}
}

func TestEffectiveType(t *testing.T) {
	tests := []struct {
		cfg    RestartConfig
		want   string
		wantOK bool
	}{
		{RestartConfig{}, RestartTypeNone, true},
		{RestartConfig{CheckpointingEnabled: true}, RestartTypeExponentialDelay, true},
		{RestartConfig{Type: "Fixed-Delay"}, RestartTypeFixedDelay, true},
		{RestartConfig{Type: "bogus"}, "", false},
	}
	for _, tt := range tests {
		got, ok := tt.cfg.EffectiveType()
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("EffectiveType(%+v) = %q, %v; want %q, %v", tt.cfg, got, ok, tt.want, tt.wantOK)
		}
	}
}
