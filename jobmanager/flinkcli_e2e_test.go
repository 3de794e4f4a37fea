package jobmanager_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// flinkCLIVersion is the Flink release whose CLI (flink-clients) is run
// against gofl.
const flinkCLIVersion = "1.20.5"

// flinkCLI runs Flink's own command line client, CliFrontend from
// flink-clients, against a gofl JobManager's REST API.
type flinkCLI struct {
	t         *testing.T
	classpath string
	confDir   string
	tmp       string
	rest      string // host:port
}

// newFlinkCLI fetches flink-clients and its dependencies with
// scripts/flinkcli/classpath.sh (Maven Central, cached), and writes the
// FLINK_CONF_DIR the CLI reads. The script needs Java and mvn (under
// CI=true it installs them); without them, or when the fetch fails, the
// test fails under CI=true and skips elsewhere.
func newFlinkCLI(t *testing.T, restAddress string) *flinkCLI {
	t.Helper()
	unavailable := func(msg string) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true, so Flink's CLI must be checked: " + msg)
		}
		t.Skip("skipping: " + msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "../scripts/flinkcli/classpath.sh", flinkCLIVersion)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		unavailable("fetching flink-clients " + flinkCLIVersion + ": " + err.Error() + "\n" + stderr.String())
	}
	f := &flinkCLI{t: t, classpath: strings.TrimSpace(string(out)), confDir: t.TempDir(), tmp: t.TempDir(), rest: restAddress}
	// CliFrontend needs a configuration file in FLINK_CONF_DIR (config.yaml
	// since 1.19); -m sets the REST address on each command. A short
	// client timeout keeps a refused call from retrying for minutes.
	conf := "rest.address: 127.0.0.1\nclient.timeout: 60 s\nrest.retry.max-attempts: 2\n"
	if err := os.WriteFile(filepath.Join(f.confDir, "config.yaml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(f.tmp, "plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

// run runs `flink ARGS... -m <rest>` and returns its stdout; a non-zero
// exit fails the test with both outputs.
func (f *flinkCLI) run(args ...string) string {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// -m follows the action: CliFrontend parses options per action.
	full := append([]string{"-Djava.io.tmpdir=" + f.tmp, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-cp", f.classpath, "org.apache.flink.client.cli.CliFrontend", args[0], "-m", f.rest}, args[1:]...)
	cmd := exec.CommandContext(ctx, "java", full...)
	cmd.Env = append(os.Environ(), "FLINK_CONF_DIR="+f.confDir, "FLINK_PLUGINS_DIR="+filepath.Join(f.tmp, "plugins"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		f.t.Fatalf("flink %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	f.t.Logf("flink %s:\n%s", strings.Join(args, " "), stdout.String())
	return stdout.String()
}

// TestFlinkCLIAgainstGofl runs Flink's own CLI (flink-clients' CliFrontend,
// fetched from Maven Central at test time) against a gofl JobManager:
// `flink list` shows a running streaming job by id and name as RUNNING,
// `flink savepoint` takes a savepoint of it, `flink cancel` cancels it,
// and `flink stop` stops a second job with a savepoint.
//
// `flink info` is not checked: it compiles a Java jar's plan locally and
// never calls the cluster, so there is nothing of gofl's to check.
func TestFlinkCLIAgainstGofl(t *testing.T) {
	parallel(t)
	c := newCluster(t, checkpointSettings("file://"+filepath.Join(t.TempDir(), "checkpoints")))
	cli := newFlinkCLI(t, c.jm.RESTAddress)
	c.startTaskManagerProcess("tm-a", 2)
	c.waitForTaskManagers(1)
	id := c.runSDKJob(testJobBinary, 1, "held-numbers", "--count", "100", "--output", filepath.Join(t.TempDir(), "out"))
	defer func() { _ = c.client.CancelJob(context.Background(), id) }()
	det := c.waitFor(id, waitLimit, "RUNNING")

	// "<date> : <jobid> : <name> (RUNNING)" under Running/Restarting Jobs.
	out := cli.run("list")
	if !regexp.MustCompile(`(?m)^.* : ` + id + ` : ` + regexp.QuoteMeta(det.Name) + ` \(RUNNING\)$`).MatchString(out) {
		t.Fatalf("flink list does not show job %s (%s) as RUNNING:\n%s", id, det.Name, out)
	}
	if !strings.Contains(out, "Running/Restarting Jobs") {
		t.Fatalf("flink list has no running jobs section:\n%s", out)
	}

	spDir := "file://" + filepath.Join(t.TempDir(), "savepoints")
	c.waitCheckpointAfter(id, 0, waitLimit)
	out = cli.run("savepoint", id, spDir)
	m := regexp.MustCompile(`Savepoint completed\. Path: (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("flink savepoint printed no savepoint path:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(strings.TrimPrefix(m[1], "file:"), "_metadata")); err != nil {
		t.Errorf("the savepoint flink savepoint reported has no metadata: %v", err)
	}

	out = cli.run("cancel", id)
	if !strings.Contains(out, "Cancelled job "+id) {
		t.Errorf("flink cancel did not confirm:\n%s", out)
	}
	c.waitFor(id, waitLimit, "CANCELED")

	// stop: stop-with-savepoint; the job ends FINISHED.
	id2 := c.runSDKJob(testJobBinary, 1, "held-numbers", "--count", "100", "--output", filepath.Join(t.TempDir(), "out2"))
	defer func() { _ = c.client.CancelJob(context.Background(), id2) }()
	c.waitFor(id2, waitLimit, "RUNNING")
	c.waitCheckpointAfter(id2, 0, waitLimit)
	out = cli.run("stop", "--savepointPath", spDir, id2)
	if !regexp.MustCompile(`Savepoint completed\. Path: \S+`).MatchString(out) {
		t.Fatalf("flink stop printed no savepoint path:\n%s", out)
	}
	c.waitFor(id2, waitLimit, "FINISHED")
}
