package conf

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// noEnv is an empty, non-nil environment so tests never see the real one.
var noEnv = []string{}

func mustLoad(t *testing.T, opts LoadOptions) (*Configuration, []Warning) {
	t.Helper()
	if opts.Env == nil {
		opts.Env = noEnv
	}
	cfg, warnings, err := Load(opts)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return cfg, warnings
}

func TestLoadDefaults(t *testing.T) {
	cfg, warnings := mustLoad(t, LoadOptions{})
	if len(warnings) != 0 {
		t.Errorf("warnings = %v", warnings)
	}
	if got := HeartbeatInterval.Get(cfg); got != 10*time.Second {
		t.Errorf("heartbeat.interval = %v", got)
	}
	if got := RestPort.Get(cfg); got != 8081 {
		t.Errorf("rest.port = %v", got)
	}
	if len(cfg.Keys()) != 0 {
		t.Errorf("keys = %v; want none set", cfg.Keys())
	}
}

// TestPrecedence checks defaults < file < env < -D < dedicated flag for
// every combination of sources that set the key.
func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "gofl.yaml", "rest.port: 1001\nlog.level: debug\n")
	env := []string{"GOFL_REST_PORT=1002", "GOFL_LOG_LEVEL=warn"}
	dyn := []string{"rest.port=1003", "log.level=error"}
	flags := map[string]FlagValue{"log.level": {Flag: "--log-level", Value: "trace"}}

	cases := []struct {
		name     string
		opts     LoadOptions
		wantPort int
		wantSrc  Source
		wantLvl  string
	}{
		{"defaults", LoadOptions{}, 8081, DefaultSource, "info"},
		{"file", LoadOptions{File: file}, 1001, FileSource(file, 1), "debug"},
		{"env over file", LoadOptions{File: file, Env: env}, 1002, EnvSource("GOFL_REST_PORT"), "warn"},
		{"env alone", LoadOptions{Env: env}, 1002, EnvSource("GOFL_REST_PORT"), "warn"},
		{"-D over env and file", LoadOptions{File: file, Env: env, Dynamic: dyn}, 1003, DynamicSource, "error"},
		{"-D over file", LoadOptions{File: file, Dynamic: dyn}, 1003, DynamicSource, "error"},
		{"flag over all", LoadOptions{File: file, Env: env, Dynamic: dyn, Flags: flags}, 1003, DynamicSource, "trace"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := mustLoad(t, tc.opts)
			if got := RestPort.Get(cfg); got != tc.wantPort {
				t.Errorf("rest.port = %d; want %d", got, tc.wantPort)
			}
			if got := LogLevel.Get(cfg); got != tc.wantLvl {
				t.Errorf("log.level = %q; want %q", got, tc.wantLvl)
			}
			e, ok := cfg.Lookup("rest.port")
			src := DefaultSource
			if ok {
				src = e.Source
			}
			if src != tc.wantSrc {
				t.Errorf("source = %v; want %v", src, tc.wantSrc)
			}
		})
	}
}

func TestLaterDynamicWins(t *testing.T) {
	cfg, _ := mustLoad(t, LoadOptions{Dynamic: []string{"rest.port=1", "rest.port=2"}})
	if got := RestPort.Get(cfg); got != 2 {
		t.Errorf("rest.port = %d; want 2", got)
	}
}

func TestDynamicKeepsEqualsInValue(t *testing.T) {
	cfg, _ := mustLoad(t, LoadOptions{Dynamic: []string{"state.checkpoints.dir=hdfs://nn:8020/ck?a=b", " rest.address = example.org "}})
	if got := CheckpointsDir.Get(cfg); got != "hdfs://nn:8020/ck?a=b" {
		t.Errorf("state.checkpoints.dir = %q", got)
	}
	if got := RestAddress.Get(cfg); got != "example.org" {
		t.Errorf("rest.address = %q", got)
	}
}

func TestNestedYAML(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "c.yaml", `
# nested and flat forms mix freely
heartbeat:
  interval: 2 s
  timeout: 20 s
restart-strategy:
  type: fixed-delay
  fixed-delay:
    attempts: 3
    delay: "500 ms"
taskmanager.numberOfTaskSlots: 4
cluster:
  evenly-spread-out-slots: true
restart-strategy.exponential-delay.jitter-factor: 0.25
blob.offload.minsize: 64 kb
state.checkpoints.dir:
`)
	cfg, warnings := mustLoad(t, LoadOptions{File: file})
	if len(warnings) != 0 {
		t.Errorf("warnings = %v", warnings)
	}
	checks := []struct {
		got, want any
	}{
		{HeartbeatInterval.Get(cfg), 2 * time.Second},
		{HeartbeatTimeout.Get(cfg), 20 * time.Second},
		{RestartStrategyType.Get(cfg), RestartFixedDelay},
		{FixedDelayAttempts.Get(cfg), 3},
		{FixedDelayDelay.Get(cfg), 500 * time.Millisecond},
		{NumberOfTaskSlots.Get(cfg), 4},
		{EvenlySpreadOutSlots.Get(cfg), true},
		{ExponentialDelayJitterFactor.Get(cfg), 0.25},
		{BlobOffloadMinSize.Get(cfg), 64 * Kibibyte},
		{CheckpointsDir.Get(cfg), ""},
	}
	for i, c := range checks {
		if c.got != c.want {
			t.Errorf("check %d: got %v; want %v", i, c.got, c.want)
		}
	}
	e, _ := cfg.Lookup("heartbeat.timeout")
	if e.Source != FileSource(file, 5) {
		t.Errorf("source = %v; want line 5 of %s", e.Source, file)
	}
	if e.Raw != "20 s" {
		t.Errorf("raw = %q", e.Raw)
	}
}

func TestYAMLEdgeCases(t *testing.T) {
	dir := t.TempDir()
	t.Run("empty file", func(t *testing.T) {
		cfg, _ := mustLoad(t, LoadOptions{File: writeFile(t, dir, "empty.yaml", "")})
		if len(cfg.Keys()) != 0 {
			t.Errorf("keys = %v", cfg.Keys())
		}
	})
	t.Run("comments only", func(t *testing.T) {
		mustLoad(t, LoadOptions{File: writeFile(t, dir, "comments.yaml", "# nothing here\n")})
	})
	t.Run("set twice warns, last wins", func(t *testing.T) {
		cfg, warnings := mustLoad(t, LoadOptions{File: writeFile(t, dir, "twice.yaml",
			"rest.port: 1\nrest:\n  port: 2\n")})
		if RestPort.Get(cfg) != 2 {
			t.Errorf("rest.port = %d", RestPort.Get(cfg))
		}
		if len(warnings) != 1 || !strings.Contains(warnings[0].Message, `"rest.port" is set twice`) {
			t.Errorf("warnings = %v", warnings)
		}
	})
	t.Run("duplicate in one mapping warns, last wins", func(t *testing.T) {
		cfg, warnings := mustLoad(t, LoadOptions{File: writeFile(t, dir, "dup.yaml",
			"rest.port: 1\nrest.port: 2\n")})
		if RestPort.Get(cfg) != 2 || len(warnings) != 1 || !strings.Contains(warnings[0].Message, "(lines 1 and 2)") {
			t.Errorf("rest.port = %d, warnings = %v", RestPort.Get(cfg), warnings)
		}
	})
	t.Run("list is a problem", func(t *testing.T) {
		_, _, err := Load(LoadOptions{Env: noEnv, File: writeFile(t, dir, "list.yaml", "rest.port: [1, 2]\n")})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "rest.port: expected a single value, not a list") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("anchors resolve", func(t *testing.T) {
		cfg, _ := mustLoad(t, LoadOptions{File: writeFile(t, dir, "alias.yaml",
			"heartbeat.timeout: &t 30 s\nslot.idle.timeout: *t\n")})
		if SlotIdleTimeout.Get(cfg) != 30*time.Second {
			t.Errorf("slot.idle.timeout = %v", SlotIdleTimeout.Get(cfg))
		}
	})
}

func TestMalformedYAML(t *testing.T) {
	dir := t.TempDir()
	cases := []struct{ name, content, want string }{
		{"bad indentation", "rest.port: 1\n  heartbeat: x\n", "line 2"},
		{"unclosed quote", "rest.port: 1\nrest.address: \"oops\n", "line 2"},
		{"top-level list", "- rest.port: 1\n", "line 1: expected a mapping"},
		{"top-level scalar", "just text\n", "expected a mapping"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml", tc.content)
			_, _, err := Load(LoadOptions{File: path, Env: noEnv})
			if !errors.Is(err, ErrMalformedYAML) {
				t.Fatalf("err = %v; want ErrMalformedYAML", err)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %q; want file %s and %q", err, path, tc.want)
			}
		})
	}
}

func TestMissingConfigFile(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	_, _, err := Load(LoadOptions{File: missing, Env: noEnv})
	if !errors.Is(err, ErrConfigFile) || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("err = %v", err)
	}
}

func TestConfDir(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "gofl.yaml", "rest.port: 7000\n")
	cfg, _ := mustLoad(t, LoadOptions{Env: []string{"GOFL_CONF_DIR=" + dir}})
	if got := RestPort.Get(cfg); got != 7000 {
		t.Errorf("rest.port = %d; want 7000 from %s", got, file)
	}
	// --config wins over GOFL_CONF_DIR.
	other := writeFile(t, t.TempDir(), "other.yaml", "rest.port: 7001\n")
	cfg, _ = mustLoad(t, LoadOptions{File: other, Env: []string{"GOFL_CONF_DIR=" + dir}})
	if got := RestPort.Get(cfg); got != 7001 {
		t.Errorf("rest.port = %d; want 7001", got)
	}
	// A conf dir without gofl.yaml is fine.
	cfg, _ = mustLoad(t, LoadOptions{Env: []string{"GOFL_CONF_DIR=" + t.TempDir()}})
	if got := RestPort.Get(cfg); got != 8081 {
		t.Errorf("rest.port = %d; want default", got)
	}
}

func TestEnvMapping(t *testing.T) {
	env := []string{
		"GOFL_HEARTBEAT_INTERVAL=3 s",
		"GOFL_TASKMANAGER_NUMBEROFTASKSLOTS=8",
		"GOFL_RESOURCEMANAGER_TASKMANAGER_TIMEOUT=1 min",
		"GOFL_RESTART_STRATEGY_EXPONENTIAL_DELAY_BACKOFF_MULTIPLIER=2",
		"GOFL_CONF_DIR=" + t.TempDir(), // not an option: ignored
		"GOFL_SOMETHING_ELSE=x",        // not an option: ignored
		"gofl_rest_port=1",             // wrong case: not ours
		"HEARTBEAT_TIMEOUT=1",          // no prefix
		"MALFORMED",
	}
	cfg, warnings := mustLoad(t, LoadOptions{Env: env})
	if len(warnings) != 0 {
		t.Errorf("warnings = %v", warnings)
	}
	if got := HeartbeatInterval.Get(cfg); got != 3*time.Second {
		t.Errorf("heartbeat.interval = %v", got)
	}
	if got := NumberOfTaskSlots.Get(cfg); got != 8 {
		t.Errorf("slots = %v", got)
	}
	if got := ResourceManagerTaskManagerTimeout.Get(cfg); got != time.Minute {
		t.Errorf("rm timeout = %v", got)
	}
	if got := ExponentialDelayBackoffMultiplier.Get(cfg); got != 2 {
		t.Errorf("multiplier = %v", got)
	}
	if got := cfg.Keys(); len(got) != 4 {
		t.Errorf("keys = %v; want exactly the 4 options", got)
	}
	e, _ := cfg.Lookup("taskmanager.numberOfTaskSlots")
	if e.Source != EnvSource("GOFL_TASKMANAGER_NUMBEROFTASKSLOTS") {
		t.Errorf("source = %v", e.Source)
	}
}

func TestEveryOptionHasUniqueEnvVar(t *testing.T) {
	seen := map[string]string{}
	for _, s := range Options() {
		env := s.EnvVar()
		if other, dup := seen[env]; dup {
			t.Errorf("%s and %s share %s", other, s.Key(), env)
		}
		seen[env] = s.Key()
		cfg, _ := mustLoad(t, LoadOptions{Env: []string{env + "=" + s.DefaultString()}})
		if e, ok := cfg.Lookup(s.Key()); !ok || e.Source != EnvSource(env) {
			t.Errorf("%s not set from %s", s.Key(), env)
		}
	}
}

func TestUnknownKeysWarnWithSuggestion(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "gofl.yaml", "heartbeat.intervall: 5 s\ntotally.unrelated.thing: 1\n")
	cfg, warnings := mustLoad(t, LoadOptions{File: file, Dynamic: []string{"taskmanager.numberoftaskslots=2", "rest.prot=1"}})
	want := []string{
		`unknown key "heartbeat.intervall" (did you mean "heartbeat.interval"?)`,
		`unknown key "totally.unrelated.thing"`,
		`unknown key "taskmanager.numberoftaskslots" (did you mean "taskmanager.numberOfTaskSlots"?)`,
		`unknown key "rest.prot" (did you mean "rest.port"?)`,
	}
	if len(warnings) != len(want) {
		t.Fatalf("warnings = %v; want %d", warnings, len(want))
	}
	for i, w := range want {
		if warnings[i].Message != w {
			t.Errorf("warning %d = %q; want %q", i, warnings[i].Message, w)
		}
	}
	if warnings[0].Source != FileSource(file, 1) || warnings[0].Key != "heartbeat.intervall" {
		t.Errorf("warning 0 = %+v", warnings[0])
	}
	// Unknown keys are kept (for forward compatibility) but do not change options.
	if e, ok := cfg.Lookup("heartbeat.intervall"); !ok || e.Known || e.Raw != "5 s" {
		t.Errorf("unknown entry = %+v, %v", e, ok)
	}
	if HeartbeatInterval.Get(cfg) != 10*time.Second {
		t.Errorf("typo changed heartbeat.interval")
	}
}

func TestSuggestion(t *testing.T) {
	for key, want := range map[string]string{
		"heartbeat.intervall":             "heartbeat.interval",
		"heartbeat.timout":                "heartbeat.timeout",
		"Rest.Port":                       "rest.port",
		"restart-strategy.typ":            "restart-strategy.type",
		"jobmanager.rpc.adress":           "jobmanager.rpc.address",
		"slot.request.timeouts":           "slot.request.timeout",
		"parallelism.defualt":             "parallelism.default",
		"state.checkpoint.dir":            "state.checkpoints.dir",
		"execution.checkpointing.intervl": "execution.checkpointing.interval",
	} {
		if got := suggestion(key); got != ` (did you mean "`+want+`"?)` {
			t.Errorf("suggestion(%q) = %q; want %q", key, got, want)
		}
	}
	for _, key := range []string{"foo", "kubernetes.namespace", "x.y.z"} {
		if got := suggestion(key); got != "" {
			t.Errorf("suggestion(%q) = %q; want none", key, got)
		}
	}
}

func TestLevenshtein(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"port", "prot", 2}, {"µs", "us", 1}} {
		if got := levenshtein(tc.a, tc.b); got != tc.want {
			t.Errorf("levenshtein(%q, %q) = %d; want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestEveryProblemCollected checks that one Load reports all bad values from
// all sources, each naming its key, value, expectation and source.
func TestEveryProblemCollected(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "gofl.yaml", "heartbeat.interval: ten\nrest.port: 99999\nheartbeat.intervall: 1 s\n")
	_, warnings, err := Load(LoadOptions{
		File:    file,
		Env:     []string{"GOFL_CLUSTER_EVENLY_SPREAD_OUT_SLOTS=yes"},
		Dynamic: []string{"jobmanager.execution.failover-strategy=partial", "blob.offload.minsize=huge", "novalue"},
	})
	var ve *ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v; want *ValidationError", err)
	}
	want := []string{
		`heartbeat.interval: "ten" is not a duration (expected e.g. "10 s", "500 ms", "1 min") [from file ` + file + `:1]`,
		`rest.port: "99999" must be between 0 and 65535 [from file ` + file + `:2]`,
		`cluster.evenly-spread-out-slots: "yes" is not a boolean (expected true or false) [from env GOFL_CLUSTER_EVENLY_SPREAD_OUT_SLOTS]`,
		`jobmanager.execution.failover-strategy: "partial" is not one of region, full [from -D]`,
		`blob.offload.minsize: "huge" is not a memory size`,
		`-D "novalue": expected key=value [from -D]`,
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "conf: invalid configuration (6 problems):") {
		t.Errorf("error header: %q", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error lacks %q:\n%s", w, msg)
		}
	}
	if len(ve.Problems) != len(want) {
		t.Errorf("%d problems; want %d:\n%s", len(ve.Problems), len(want), msg)
	}
	if ve.Problems[0].Key != "heartbeat.interval" || ve.Problems[0].Value != "ten" {
		t.Errorf("problem 0 = %+v", ve.Problems[0])
	}
	// Warnings are still returned alongside the error.
	if len(warnings) != 1 || warnings[0].Key != "heartbeat.intervall" {
		t.Errorf("warnings = %v", warnings)
	}
}

func TestOverriddenBadValueIsNotAProblem(t *testing.T) {
	file := writeFile(t, t.TempDir(), "gofl.yaml", "rest.port: nope\n")
	cfg, _ := mustLoad(t, LoadOptions{File: file, Dynamic: []string{"rest.port=9000"}})
	if RestPort.Get(cfg) != 9000 {
		t.Errorf("rest.port = %d", RestPort.Get(cfg))
	}
}

func TestCrossOptionChecks(t *testing.T) {
	cases := []struct {
		name string
		dyn  []string
		want string
	}{
		{"timeout below interval", []string{"heartbeat.interval=1 min"},
			`heartbeat.timeout: 50 s must be at least heartbeat.interval (1 min) [from default]`},
		{"max below initial backoff", []string{"restart-strategy.exponential-delay.initial-backoff=2 min"},
			`restart-strategy.exponential-delay.max-backoff: 1 min must be at least restart-strategy.exponential-delay.initial-backoff (2 min)`},
		{"checkpointing without a directory", []string{"execution.checkpointing.interval=1 min"},
			`state.checkpoints.dir: must be set when execution.checkpointing.interval is above 0 (1 min)`},
		{"unaligned needs exactly-once", []string{"execution.checkpointing.unaligned.enabled=true", "execution.checkpointing.mode=at_least_once"},
			`execution.checkpointing.unaligned.enabled: unaligned checkpoints need execution.checkpointing.mode EXACTLY_ONCE`},
		{"checkpoint interval too small", []string{"execution.checkpointing.interval=5 ms"},
			`execution.checkpointing.interval: 5 ms is below the minimum of 10 ms (use 0 to disable checkpointing) [from -D]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Load(LoadOptions{Env: noEnv, Dynamic: tc.dyn})
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), strings.TrimSuffix(tc.want, " [from default]")) {
				t.Errorf("err = %v; want %q", err, tc.want)
			}
		})
	}
	mustLoad(t, LoadOptions{Dynamic: []string{"heartbeat.interval=1 min", "heartbeat.timeout=1 min"}})
}
