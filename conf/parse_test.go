package conf

import (
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	good := []struct {
		in   string
		want time.Duration
	}{
		{"10 s", 10 * time.Second},
		{"10s", 10 * time.Second},
		{"  10   s ", 10 * time.Second},
		{"10 S", 10 * time.Second},
		{"500 ms", 500 * time.Millisecond},
		{"500", 500 * time.Millisecond},
		{"0", 0},
		{"1 min", time.Minute},
		{"2 h", 2 * time.Hour},
		{"1 d", 24 * time.Hour},
		{"3 ns", 3},
		{"4 us", 4 * time.Microsecond},
		{"4 µs", 4 * time.Microsecond},
		{"5 sec", 5 * time.Second},
		{"5 second", 5 * time.Second},
		{"5 seconds", 5 * time.Second},
		{"2 minute", 2 * time.Minute},
		{"2 minutes", 2 * time.Minute},
		{"2m", 2 * time.Minute},
		{"1 hour", time.Hour},
		{"3 hours", 3 * time.Hour},
		{"1 day", 24 * time.Hour},
		{"2 days", 48 * time.Hour},
		{"7 millis", 7 * time.Millisecond},
		{"1m30s", 90 * time.Second},
		{"1.5s", 1500 * time.Millisecond},
	}
	for _, tc := range good {
		got, err := ParseDuration(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	bad := []struct{ in, wantErr string }{
		{"ten", `"ten" is not a duration (expected e.g. "10 s", "500 ms", "1 min")`},
		{"", `"" is not a duration`},
		{"10 parsecs", `"10 parsecs" has unknown time unit "parsecs"`},
		{"-1 s", `"-1 s" is not a duration`},
		{"-1s", `"-1s" is negative`},
		{"1 s 2", `unknown time unit`},
		{"999999999999 d", `too large`},
		{"99999999999999999999", `too large`},
	}
	for _, tc := range bad {
		_, err := ParseDuration(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("ParseDuration(%q) error = %v; want it to contain %q", tc.in, err, tc.wantErr)
		}
	}
}

func TestFormatDurationRoundTrips(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                       "0 ms",
		10 * time.Second:        "10 s",
		90 * time.Second:        "90 s",
		5 * time.Minute:         "5 min",
		time.Hour:               "1 h",
		48 * time.Hour:          "2 d",
		1500 * time.Millisecond: "1500 ms",
		3 * time.Microsecond:    "3 us",
		7:                       "7 ns",
	} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q; want %q", d, got, want)
		}
		back, err := ParseDuration(want)
		if err != nil || back != d {
			t.Errorf("ParseDuration(FormatDuration(%v)) = %v, %v", d, back, err)
		}
	}
}

func TestParseMemorySize(t *testing.T) {
	good := []struct {
		in   string
		want MemorySize
	}{
		{"64 mb", 64 * Mebibyte},
		{"64mb", 64 * Mebibyte},
		{"64 MB", 64 * Mebibyte},
		{"1g", Gibibyte},
		{"1 gb", Gibibyte},
		{"32kb", 32 * Kibibyte},
		{"32 k", 32 * Kibibyte},
		{"2 tb", 2 * Tebibyte},
		{"1 mebibytes", Mebibyte},
		{"100", 100},
		{"100 b", 100},
		{"100 bytes", 100},
		{"0", 0},
	}
	for _, tc := range good {
		got, err := ParseMemorySize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseMemorySize(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	bad := []struct{ in, wantErr string }{
		{"lots", `"lots" is not a memory size`},
		{"", `"" is not a memory size`},
		{"-1 mb", `is not a memory size`},
		{"1.5 gb", `unknown memory unit ".5 gb"`},
		{"3 pb", `unknown memory unit "pb"`},
		{"99999999 tb", `too large`},
	}
	for _, tc := range bad {
		_, err := ParseMemorySize(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("ParseMemorySize(%q) error = %v; want it to contain %q", tc.in, err, tc.wantErr)
		}
	}
}

func TestMemorySizeString(t *testing.T) {
	for m, want := range map[MemorySize]string{
		0: "0 bytes", 100: "100 bytes", Kibibyte: "1 kb", 1536 * Kibibyte: "1536 kb",
		64 * Mebibyte: "64 mb", 2 * Gibibyte: "2 gb", Tebibyte: "1 tb",
	} {
		if got := m.String(); got != want {
			t.Errorf("MemorySize(%d).String() = %q; want %q", int64(m), got, want)
		}
		if back, err := ParseMemorySize(want); err != nil || back != m {
			t.Errorf("ParseMemorySize(%q) = %v, %v; want %d", want, back, err, int64(m))
		}
	}
}

func TestParseScalars(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{{"true", true}, {"TRUE", true}, {" false ", false}, {"False", false}} {
		if got, err := parseBool(tc.in); err != nil || got != tc.want {
			t.Errorf("parseBool(%q) = %v, %v", tc.in, got, err)
		}
	}
	for _, in := range []string{"yes", "1", "", "on"} {
		if _, err := parseBool(in); err == nil || !strings.Contains(err.Error(), "expected true or false") {
			t.Errorf("parseBool(%q) error = %v", in, err)
		}
	}
	if n, err := parseInt(" 42 "); err != nil || n != 42 {
		t.Errorf("parseInt = %v, %v", n, err)
	}
	if n, err := parseInt("-7"); err != nil || n != -7 {
		t.Errorf("parseInt = %v, %v", n, err)
	}
	for _, in := range []string{"4.2", "four", "", "99999999999999999999"} {
		if _, err := parseInt(in); err == nil || !strings.Contains(err.Error(), "is not an integer") {
			t.Errorf("parseInt(%q) error = %v", in, err)
		}
	}
	if f, err := parseFloat("1.5"); err != nil || f != 1.5 {
		t.Errorf("parseFloat = %v, %v", f, err)
	}
	if f, err := parseFloat("2"); err != nil || f != 2 {
		t.Errorf("parseFloat = %v, %v", f, err)
	}
	for _, in := range []string{"NaN", "Inf", "x", ""} {
		if _, err := parseFloat(in); err == nil || !strings.Contains(err.Error(), "is not a number") {
			t.Errorf("parseFloat(%q) error = %v", in, err)
		}
	}
}

func TestEnumOptions(t *testing.T) {
	good := []struct {
		opt      *Option[string]
		in, want string
	}{
		{FailoverStrategy, "region", "region"},
		{FailoverStrategy, "FULL", "full"},
		{FailoverStrategy, " Region ", "region"},
		{LogLevel, "DEBUG", "debug"},
		{SchedulingStrategy, "lazy-from-sources-with-batch-slot-request", SchedulingLazyFromSourcesBatchSlotRequests},
		{SlotAllocator, "Simple", "simple"},
		{RestartStrategyType, "", ""},
		{RestartStrategyType, "none", RestartNone},
		{RestartStrategyType, "off", RestartNone},
		{RestartStrategyType, "disable", RestartNone},
		{RestartStrategyType, "fixeddelay", RestartFixedDelay},
		{RestartStrategyType, "FixedDelay", RestartFixedDelay},
		{RestartStrategyType, "fixed-delay", RestartFixedDelay},
		{RestartStrategyType, "failurerate", RestartFailureRate},
		{RestartStrategyType, "exponentialdelay", RestartExponentialDelay},
		{RestartStrategyType, "exponential-delay", RestartExponentialDelay},
	}
	for _, tc := range good {
		got, err := tc.opt.Parse(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("%s.Parse(%q) = %q, %v; want %q", tc.opt.Key(), tc.in, got, err, tc.want)
		}
	}
	bad := []struct {
		opt         *Option[string]
		in, wantErr string
	}{
		{FailoverStrategy, "partial", `"partial" is not one of region, full`},
		{FailoverStrategy, "", `"" is not one of region, full`},
		{LogLevel, "verbose", `"verbose" is not one of trace, debug, info, warn, error`},
		{RestartStrategyType, "sometimes", `"sometimes" is not one of none, fixed-delay, failure-rate, exponential-delay`},
	}
	for _, tc := range bad {
		_, err := tc.opt.Parse(tc.in)
		if err == nil || err.Error() != tc.wantErr {
			t.Errorf("%s.Parse(%q) error = %v; want %q", tc.opt.Key(), tc.in, err, tc.wantErr)
		}
	}
}

func TestRangeChecks(t *testing.T) {
	bad := []struct {
		opt     Spec
		in      string
		wantErr string
	}{
		{RestPort, "65536", `"65536" must be between 0 and 65535`},
		{JobManagerRPCPort, "-1", `"-1" must be between 0 and 65535`},
		{NumberOfTaskSlots, "0", `"0" must be at least 1`},
		{DefaultParallelism, "0", `"0" must be at least 1`},
		{HeartbeatInterval, "0", `"0" must be greater than 0`},
		{HeartbeatTimeout, "0 s", `"0 s" must be greater than 0`},
		{SlotRequestTimeout, "0", `must be greater than 0`},
		{SlotIdleTimeout, "0", `must be greater than 0`},
		{ResourceManagerTaskManagerTimeout, "0", `must be greater than 0`},
		{ExponentialDelayBackoffMultiplier, "0.5", `"0.5" must be at least 1`},
		{ExponentialDelayJitterFactor, "1.5", `"1.5" must be between 0 and 1`},
		{ExponentialDelayJitterFactor, "-0.1", `must be between 0 and 1`},
		{ExponentialDelayAttemptsBeforeResetBackoff, "0", `must be at least 1`},
		{FailureRateMaxFailuresPerInterval, "0", `must be at least 1`},
		{FixedDelayAttempts, "-1", `must be at least 0`},
		{JobManagerRPCAddress, " ", `must not be empty`},
		{StagingDir, "", `must not be empty`},
	}
	for _, tc := range bad {
		_, err := tc.opt.parse(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: parse(%q) error = %v; want %q", tc.opt.Key(), tc.in, err, tc.wantErr)
		}
	}
	good := []struct {
		opt Spec
		in  string
	}{
		{RestPort, "0"}, {RestPort, "65535"}, {NumberOfTaskSlots, "1"}, {FixedDelayAttempts, "0"},
		{ExponentialDelayJitterFactor, "0"}, {ExponentialDelayJitterFactor, "1"},
		{ExponentialDelayBackoffMultiplier, "1"}, {FixedDelayDelay, "0"}, {CheckpointingInterval, "0"},
		{CheckpointsDir, ""}, {BlobOffloadMinSize, "0"},
	}
	for _, tc := range good {
		if _, err := tc.opt.parse(tc.in); err != nil {
			t.Errorf("%s: parse(%q) = %v", tc.opt.Key(), tc.in, err)
		}
	}
}
