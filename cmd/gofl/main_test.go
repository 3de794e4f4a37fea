package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/internal/version"
)

type result struct {
	code           int
	stdout, stderr string
}

// gofl runs the CLI in-process with the given environment and args.
func gofl(t *testing.T, env []string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if env == nil {
		env = []string{}
	}
	code := run(append([]string{"gofl"}, args...), &stdout, &stderr, func() []string { return env })
	return result{code, stdout.String(), stderr.String()}
}

// configRows parses `gofl config` output into key -> [value, source].
func configRows(t *testing.T, out string) map[string][2]string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) == 0 || !regexp.MustCompile(`^KEY\s+VALUE\s+SOURCE$`).MatchString(lines[0]) {
		t.Fatalf("missing header in %q", out)
	}
	valueCol := strings.Index(lines[0], "VALUE")
	sourceCol := strings.Index(lines[0], "SOURCE")
	rows := map[string][2]string{}
	for _, l := range lines[1:] {
		if len(l) < sourceCol {
			t.Fatalf("row %q is not aligned with the header", l)
		}
		rows[strings.TrimSpace(l[:valueCol])] = [2]string{strings.TrimSpace(l[valueCol:sourceCol]), l[sourceCol:]}
	}
	return rows
}

func TestVersion(t *testing.T) {
	r := gofl(t, nil, "--version")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"gofl version", version.Version, "protocol 1"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("--version printed %q; want %q", r.stdout, want)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	r := gofl(t, nil, "config")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	rows := configRows(t, r.stdout)
	if len(rows) != len(conf.Options()) {
		t.Errorf("%d rows for %d options", len(rows), len(conf.Options()))
	}
	for key, want := range map[string][2]string{
		"heartbeat.interval":    {"10 s", "default"},
		"rest.port":             {"8081", "default"},
		"restart-strategy.type": {`""`, "default"},
		"staging.dir":           {"file://$HOME", "default"},
	} {
		if rows[key] != want {
			t.Errorf("%s = %v; want %v", key, rows[key], want)
		}
	}
	if r.stderr != "" {
		t.Errorf("stderr = %q", r.stderr)
	}
}

func TestConfigSources(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "gofl.yaml")
	if err := os.WriteFile(file, []byte("heartbeat:\n  interval: 3 s\n  timeout: 30 s\nrest.port: 1001\ntaskmanager.numberOfTaskSlots: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"GOFL_REST_PORT=1002", "GOFL_TASKMANAGER_NUMBEROFTASKSLOTS=3", "GOFL_CONF_DIR=/nonexistent"}
	r := gofl(t, env, "--config", file, "-D", "taskmanager.numberOfTaskSlots=4", "config",
		"-Dslot.idle.timeout=60000", "--log-level", "debug")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	rows := configRows(t, r.stdout)
	for key, want := range map[string][2]string{
		"heartbeat.interval":            {"3 s", "file " + file + ":2"},
		"heartbeat.timeout":             {"30 s", "file " + file + ":3"},
		"rest.port":                     {"1002", "env GOFL_REST_PORT"},
		"taskmanager.numberOfTaskSlots": {"4", "-D"},
		"slot.idle.timeout":             {"1 min", "-D"}, // bare numbers are ms
		"log.level":                     {"debug", "flag --log-level"},
		"slot.request.timeout":          {"5 min", "default"},
	} {
		if rows[key] != want {
			t.Errorf("%s = %v; want %v", key, rows[key], want)
		}
	}
}

func TestConfigFileFromConfDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "gofl.yaml"), []byte("rest.port: 7000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := gofl(t, []string{"GOFL_CONF_DIR=" + dir}, "config", "--changed")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	rows := configRows(t, r.stdout)
	if len(rows) != 1 || rows["rest.port"][0] != "7000" {
		t.Errorf("--changed rows = %v", rows)
	}
}

func TestConfigDynamicFlagsMerge(t *testing.T) {
	// -D before and after the command both apply; the command's own win.
	r := gofl(t, nil, "-D", "rest.port=1", "-D", "jobmanager.rpc.port=2", "config", "--changed",
		"-D", "rest.port=3", "-D", "state.checkpoints.dir=hdfs://nn/a,b")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	rows := configRows(t, r.stdout)
	if rows["rest.port"][0] != "3" || rows["jobmanager.rpc.port"][0] != "2" ||
		rows["state.checkpoints.dir"][0] != "hdfs://nn/a,b" || len(rows) != 3 {
		t.Errorf("rows = %v", rows)
	}
}

func TestConfigBadValuesFail(t *testing.T) {
	r := gofl(t, []string{"GOFL_HEARTBEAT_TIMEOUT=soon"}, "config", "-D", "heartbeat.interval=ten", "-D", "rest.port=99999")
	if r.code == 0 {
		t.Fatalf("exit 0; want failure. stdout: %s", r.stdout)
	}
	for _, want := range []string{
		"conf: invalid configuration (3 problems)",
		`heartbeat.interval: "ten" is not a duration (expected e.g. "10 s", "500 ms", "1 min") [from -D]`,
		`heartbeat.timeout: "soon" is not a duration`,
		`[from env GOFL_HEARTBEAT_TIMEOUT]`,
		`rest.port: "99999" must be between 0 and 65535`,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if r.stdout != "" {
		t.Errorf("stdout = %q; want nothing printed on failure", r.stdout)
	}
}

func TestConfigUnknownKeyWarns(t *testing.T) {
	r := gofl(t, nil, "config", "-D", "heartbeat.intervall=5 s")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var ev struct {
		Level, Key, Source, Message string
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.stderr)), &ev); err != nil {
		t.Fatalf("stderr is not one JSON log event: %q: %v", r.stderr, err)
	}
	want := `unknown key "heartbeat.intervall" (did you mean "heartbeat.interval"?)`
	if ev.Level != "warn" || ev.Message != want || ev.Key != "heartbeat.intervall" || ev.Source != "-D" {
		t.Errorf("warning = %+v; want %q", ev, want)
	}
	if rows := configRows(t, r.stdout); rows["heartbeat.interval"][1] != "default" {
		t.Errorf("typo changed heartbeat.interval: %v", rows["heartbeat.interval"])
	}
}

func TestLogLevelFiltersWarnings(t *testing.T) {
	r := gofl(t, nil, "--log-level", "error", "config", "-D", "no.such.key=1")
	if r.code != 0 || r.stderr != "" {
		t.Errorf("exit %d, stderr %q; want the warning filtered", r.code, r.stderr)
	}
	r = gofl(t, nil, "--log-level", "loud", "config")
	if r.code == 0 || !strings.Contains(r.stderr, `log.level: "loud" is not one of trace, debug, info, warn, error [from flag --log-level]`) {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestMalformedConfigFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(file, []byte("rest.port: 1\n  oops: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := gofl(t, nil, "--config", file, "config")
	if r.code == 0 || !strings.Contains(r.stderr, "conf: malformed YAML in "+file) || !strings.Contains(r.stderr, "line 2") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	r = gofl(t, nil, "--config", filepath.Join(t.TempDir(), "missing.yaml"), "config")
	if r.code == 0 || !strings.Contains(r.stderr, "conf: cannot read config file") {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"--bogus"}, {"config", "--bogus"}, {"config", "extra"}} {
		r := gofl(t, nil, args...)
		if r.code == 0 || !strings.HasPrefix(r.stderr, "gofl: ") {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
		if strings.Contains(r.stdout, "USAGE") {
			t.Errorf("%v: usage error dumped the help text", args)
		}
	}
}

func TestConfigDocs(t *testing.T) {
	r := gofl(t, nil, "config", "docs")
	if r.code != 0 || r.stdout != conf.MarkdownReference() {
		t.Errorf("exit %d; stdout is not the Markdown reference: %q", r.code, r.stdout)
	}
}

func TestConfigDocsUpdateReadme(t *testing.T) {
	readme := filepath.Join(t.TempDir(), "README.md")
	stale := "# x\n" + conf.BeginGeneratedMarker + "\nstale\n" + conf.EndGeneratedMarker + "\nend\n"
	if err := os.WriteFile(readme, []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	r := gofl(t, nil, "config", "docs", "--update-readme", "--readme", readme)
	if r.code != 0 || !strings.Contains(r.stdout, "updated "+readme) {
		t.Fatalf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	got, _ := os.ReadFile(readme)
	want := "# x\n" + conf.BeginGeneratedMarker + "\n" + conf.MarkdownReference() + conf.EndGeneratedMarker + "\nend\n"
	if string(got) != want {
		t.Errorf("README = %q", got)
	}
	r = gofl(t, nil, "config", "docs", "--update-readme", "--readme", readme)
	if r.code != 0 || !strings.Contains(r.stdout, "is up to date") {
		t.Errorf("second run: exit %d: %s", r.code, r.stdout)
	}
}

func TestEveryCommandDocumented(t *testing.T) {
	app := newApp()
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			name := prefix + c.Name
			if c.Usage == "" || !strings.Contains(c.Description, "Examples:") {
				t.Errorf("%s: needs a Usage and a Description with examples", name)
			}
			for _, f := range []string{flagConfig, flagDynamic, flagLogLevel} {
				if !slices.ContainsFunc(c.Flags, func(g cli.Flag) bool { return g.Names()[0] == f }) {
					t.Errorf("%s lacks the configuration flag %s", name, f)
				}
			}
			walk(name+" ", c.Subcommands)
		}
	}
	walk("gofl ", app.Commands)
}

func TestNormalizeArgs(t *testing.T) {
	got := normalizeArgs([]string{"gofl", "-Da=1", "config", "-D", "b=2", "-Dc", "--", "-Dd=4"})
	want := []string{"gofl", "-D", "a=1", "config", "-D", "b=2", "-D", "c", "--", "-Dd=4"}
	if !slices.Equal(got, want) {
		t.Errorf("normalizeArgs = %q; want %q", got, want)
	}
}
