package conf

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestNilConfigurationReadsDefaults(t *testing.T) {
	var cfg *Configuration
	if got := HeartbeatTimeout.Get(cfg); got != 50*time.Second {
		t.Errorf("heartbeat.timeout = %v", got)
	}
	if got := Get(cfg, SlotRequestTimeout); got != 5*time.Minute {
		t.Errorf("slot.request.timeout = %v", got)
	}
}

func TestSetAndGet(t *testing.T) {
	cfg := NewConfiguration()
	if err := cfg.Set("heartbeat.interval", "2 s", CodeSource); err != nil {
		t.Fatal(err)
	}
	if err := HeartbeatTimeout.Set(cfg, 7*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := BlobOffloadMinSize.Set(cfg, 3*Mebibyte); err != nil {
		t.Fatal(err)
	}
	if err := RestartStrategyType.Set(cfg, "FixedDelay"); err != nil {
		t.Fatal(err)
	}
	if got := Get(cfg, HeartbeatInterval); got != 2*time.Second {
		t.Errorf("interval = %v", got)
	}
	if got := HeartbeatTimeout.Get(cfg); got != 7*time.Second {
		t.Errorf("timeout = %v", got)
	}
	if got := BlobOffloadMinSize.Get(cfg); got != 3*Mebibyte {
		t.Errorf("minsize = %v", got)
	}
	if got := RestartStrategyType.Get(cfg); got != RestartFixedDelay {
		t.Errorf("restart = %q; want normalized %q", got, RestartFixedDelay)
	}
	if e, _ := cfg.Lookup("restart-strategy.type"); e.Raw != "FixedDelay" || e.Source != CodeSource {
		t.Errorf("entry = %+v; want raw text kept", e)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate = %v", err)
	}
	cfg.Unset("heartbeat.interval")
	if cfg.IsSet("heartbeat.interval") || HeartbeatInterval.Get(cfg) != 10*time.Second {
		t.Errorf("Unset did not restore default")
	}
}

func TestSetRejectsBadValuesAndUnknownKeys(t *testing.T) {
	cfg := NewConfiguration()
	err := cfg.Set("heartbeat.interval", "ten", DynamicSource)
	var ve *ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v", err)
	}
	want := `conf: invalid configuration: heartbeat.interval: "ten" is not a duration (expected e.g. "10 s", "500 ms", "1 min") [from -D]`
	if err.Error() != want {
		t.Errorf("err = %q\nwant  %q", err, want)
	}
	if cfg.IsSet("heartbeat.interval") {
		t.Errorf("bad value was stored")
	}
	if err := NumberOfTaskSlots.Set(cfg, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("typed Set of 0 slots = %v", err)
	}
	err = cfg.Set("heartbeat.intervall", "1 s", CodeSource)
	if !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), `did you mean "heartbeat.interval"?`) {
		t.Errorf("err = %v", err)
	}
}

func TestValidateCrossChecks(t *testing.T) {
	cfg := NewConfiguration()
	if err := HeartbeatInterval.Set(cfg, time.Minute); err != nil {
		t.Fatal(err)
	}
	err := cfg.Validate()
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "heartbeat.timeout: 50 s must be at least heartbeat.interval (1 min)") {
		t.Errorf("Validate = %v", err)
	}
}

func TestFromMap(t *testing.T) {
	cfg, err := FromMap(map[string]string{"taskmanager.numberOfTaskSlots": "4", "log.level": "DEBUG"})
	if err != nil {
		t.Fatal(err)
	}
	if NumberOfTaskSlots.Get(cfg) != 4 || LogLevel.Get(cfg) != "debug" {
		t.Errorf("got %d, %q", NumberOfTaskSlots.Get(cfg), LogLevel.Get(cfg))
	}
	_, err = FromMap(map[string]string{"rest.port": "x", "heartbeat.interval": "y", "nope": "1"})
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 3 {
		t.Fatalf("err = %v; want 3 problems", err)
	}
	if !strings.Contains(err.Error(), "nope: unknown key [from code]") {
		t.Errorf("err = %v", err)
	}
}

func TestCloneAndSnapshot(t *testing.T) {
	cfg, err := FromMap(map[string]string{"rest.port": "1234", "heartbeat.interval": "2s"})
	if err != nil {
		t.Fatal(err)
	}
	clone := cfg.Clone()
	if err := clone.Set("rest.port", "4321", CodeSource); err != nil {
		t.Fatal(err)
	}
	if RestPort.Get(cfg) != 1234 || RestPort.Get(clone) != 4321 {
		t.Errorf("clone is not independent")
	}
	snap := cfg.Snapshot()
	if len(snap) != 2 || snap["heartbeat.interval"] != "2s" || snap["rest.port"] != "1234" {
		t.Errorf("snapshot = %v", snap)
	}
	back, err := FromMap(snap)
	if err != nil || HeartbeatInterval.Get(back) != 2*time.Second {
		t.Errorf("snapshot does not reload: %v", err)
	}
}

func TestSettings(t *testing.T) {
	cfg, err := FromMap(map[string]string{"heartbeat.interval": "10000"})
	if err != nil {
		t.Fatal(err)
	}
	settings := cfg.Settings()
	if len(settings) != len(Options()) {
		t.Fatalf("%d settings for %d options", len(settings), len(Options()))
	}
	for _, s := range settings {
		switch s.Spec.Key() {
		case "heartbeat.interval":
			// Canonical formatting shows that a bare number meant milliseconds.
			if s.Value != "10 s" || s.IsDefault() || s.Source != CodeSource {
				t.Errorf("heartbeat.interval setting = %+v", s)
			}
		case "slot.request.timeout":
			if s.Value != "5 min" || !s.IsDefault() {
				t.Errorf("slot.request.timeout setting = %+v", s)
			}
		}
	}
}

func TestEffectiveRestartStrategy(t *testing.T) {
	for _, tc := range []struct {
		set  map[string]string
		want string
	}{
		{nil, RestartNone},
		{map[string]string{"execution.checkpointing.interval": "10 s", "state.checkpoints.dir": "file:///ck"}, RestartExponentialDelay},
		{map[string]string{"execution.checkpointing.interval": "10 s", "state.checkpoints.dir": "file:///ck", "restart-strategy.type": "off"}, RestartNone},
		{map[string]string{"restart-strategy.type": "failurerate"}, RestartFailureRate},
		{map[string]string{"restart-strategy.type": ""}, RestartNone},
	} {
		cfg, err := FromMap(tc.set)
		if err != nil {
			t.Fatal(err)
		}
		if got := EffectiveRestartStrategy(cfg); got != tc.want {
			t.Errorf("EffectiveRestartStrategy(%v) = %q; want %q", tc.set, got, tc.want)
		}
	}
}

func TestStagingDirExpandsAtUse(t *testing.T) {
	t.Setenv("HOME", "/home/alice")
	cfg := NewConfiguration()
	if got := StagingDir.Get(cfg); got != "file://$HOME" {
		t.Errorf("staging.dir = %q; want unexpanded", got)
	}
	if got := ExpandEnv(StagingDir.Get(cfg)); got != "file:///home/alice" {
		t.Errorf("expanded = %q", got)
	}
}

func TestRegistry(t *testing.T) {
	specs := Options()
	keys := make([]string, len(specs))
	for i, s := range specs {
		keys[i] = s.Key()
	}
	if !slices.IsSorted(keys) {
		t.Errorf("Options() not sorted: %v", keys)
	}
	for _, want := range []string{
		"log.level", "jobmanager.rpc.address", "jobmanager.rpc.port", "rest.address", "rest.port",
		"taskmanager.numberOfTaskSlots", "parallelism.default", "heartbeat.interval", "heartbeat.timeout",
		"slot.request.timeout", "slot.idle.timeout", "resourcemanager.taskmanager-timeout",
		"jobmanager.scheduler.scheduling-strategy", "jobmanager.scheduler.slot-allocator",
		"jobmanager.execution.failover-strategy", "cluster.evenly-spread-out-slots",
		"state.backend.local-recovery", "restart-strategy.type",
		"restart-strategy.fixed-delay.attempts", "restart-strategy.fixed-delay.delay",
		"restart-strategy.failure-rate.max-failures-per-interval",
		"restart-strategy.failure-rate.failure-rate-interval", "restart-strategy.failure-rate.delay",
		"restart-strategy.exponential-delay.initial-backoff", "restart-strategy.exponential-delay.max-backoff",
		"restart-strategy.exponential-delay.backoff-multiplier",
		"restart-strategy.exponential-delay.reset-backoff-threshold",
		"restart-strategy.exponential-delay.jitter-factor",
		"restart-strategy.exponential-delay.attempts-before-reset-backoff",
		"blob.offload.minsize", "state.checkpoints.dir", "execution.checkpointing.interval", "staging.dir",
	} {
		if _, ok := Lookup(want); !ok {
			t.Errorf("option %s not registered", want)
		}
	}
	for _, s := range specs {
		if s.Description() == "" || !strings.HasSuffix(s.Description(), ".") {
			t.Errorf("%s: description %q should be a sentence", s.Key(), s.Description())
		}
		// Every default must survive a round trip through its own parser.
		v, err := s.parse(s.DefaultString())
		if err != nil {
			t.Errorf("%s: default %q does not parse: %v", s.Key(), s.DefaultString(), err)
			continue
		}
		if got := s.format(v); got != s.DefaultString() {
			t.Errorf("%s: default round trip %q -> %q", s.Key(), s.DefaultString(), got)
		}
		if (s.Type() == TypeEnum) != (len(s.Allowed()) > 0) {
			t.Errorf("%s: type %s with allowed values %v", s.Key(), s.Type(), s.Allowed())
		}
	}
}

func TestRegisterPanicsOnDuplicate(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Errorf("registering rest.port twice did not panic")
		}
	}()
	IntOption("rest.port", 1, "Duplicate.")
}

func TestWithCheckPanicsOnBadDefault(t *testing.T) {
	o := &Option[int]{key: "test.only", def: 0, fmtFn: formatInt, parseFn: parseInt}
	defer func() {
		if recover() == nil {
			t.Errorf("WithCheck accepted a default that fails it")
		}
	}()
	o.WithCheck(atLeast(1))
}

func TestConcurrentReads(t *testing.T) {
	cfg := NewConfiguration()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				_ = RestPort.Set(cfg, 1000+i)
				_ = RestPort.Get(cfg)
				_ = cfg.Settings()
			}
		}()
	}
	wg.Wait()
}

func TestSourceString(t *testing.T) {
	for src, want := range map[Source]string{
		DefaultSource:                   "default",
		FileSource("/etc/gofl.yaml", 3): "file /etc/gofl.yaml:3",
		FileSource("/etc/gofl.yaml", 0): "file /etc/gofl.yaml",
		EnvSource("GOFL_REST_PORT"):     "env GOFL_REST_PORT",
		DynamicSource:                   "-D",
		FlagSource("--log-level"):       "flag --log-level",
		CodeSource:                      "code",
	} {
		if got := src.String(); got != want {
			t.Errorf("%#v.String() = %q; want %q", src, got, want)
		}
	}
}

func TestCheckpointingOptions(t *testing.T) {
	cfg, err := FromMap(nil)
	if err != nil {
		t.Fatal(err)
	}
	if CheckpointingTimeout.Get(cfg) != 10*time.Minute || CheckpointingMinPause.Get(cfg) != 0 ||
		CheckpointingMaxConcurrent.Get(cfg) != 1 || CheckpointingTolerableFailures.Get(cfg) != 0 ||
		CheckpointingMode.Get(cfg) != CheckpointingExactlyOnce || CheckpointingUnaligned.Get(cfg) ||
		ExternalizedCheckpointRetention.Get(cfg) != NoExternalizedCheckpoints || CheckpointsNumRetained.Get(cfg) != 1 ||
		StateBackendType.Get(cfg) != StateBackendHashMap || SavepointIgnoreUnclaimedState.Get(cfg) ||
		StateBackendIncremental.Get(cfg) {
		t.Error("a checkpointing default differs from Flink's")
	}
	for _, typ := range []string{"rocksdb", "RocksDB", "lsm", "hashmap"} {
		cfg, err := FromMap(map[string]string{"state.backend.type": typ, "state.backend.incremental": "true"})
		if err != nil {
			t.Fatalf("state.backend.type %s: %v", typ, err)
		}
		if !StateBackendIncremental.Get(cfg) || StateBackendType.Get(cfg) != strings.ToLower(typ) {
			t.Errorf("state.backend.type %s: got %q incremental %v", typ, StateBackendType.Get(cfg), StateBackendIncremental.Get(cfg))
		}
	}
	if _, err := FromMap(map[string]string{"state.backend.type": "heap"}); err == nil {
		t.Error("state.backend.type heap accepted")
	}
	cfg, err = FromMap(map[string]string{
		"execution.checkpointing.interval": "1 s", "state.checkpoints.dir": "file:///ck",
		"execution.checkpointing.mode":                              "at_least_once",
		"execution.checkpointing.externalized-checkpoint-retention": "retain_on_cancellation",
	})
	if err != nil {
		t.Fatal(err)
	}
	if CheckpointingMode.Get(cfg) != CheckpointingAtLeastOnce || ExternalizedCheckpointRetention.Get(cfg) != RetainOnCancellation {
		t.Errorf("enums not normalized: %q %q", CheckpointingMode.Get(cfg), ExternalizedCheckpointRetention.Get(cfg))
	}
	// Every problem at once.
	_, err = FromMap(map[string]string{
		"execution.checkpointing.interval": "1 s", "state.backend.type": "lsm",
		"execution.checkpointing.max-concurrent-checkpoints": "0", "state.checkpoints.num-retained": "0",
	})
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 3 {
		t.Fatalf("err = %v; want 3 problems", err)
	}
	for _, want := range []string{"state.checkpoints.dir", "execution.checkpointing.interval",
		"max-concurrent-checkpoints", "num-retained"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v lacks %q", err, want)
		}
	}
}
