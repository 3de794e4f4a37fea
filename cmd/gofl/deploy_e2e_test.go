package main

// End-to-end tests of the deployment flows: real gofl processes (client,
// JobManager, TaskManagers, job runners, application driver) on loopback,
// the local provider, and real file:// (and, when HDFS is up, hdfs://)
// staging. Every test has its own $HOME, so the local provider's clusters,
// the session state and the default staging dir are its own; afterwards no
// process with that $HOME may be left.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/internal/blob"
	"github.com/gofl/gofl/providers/local"
	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/storage/storagetest"
)

var e2eBins struct {
	once     sync.Once
	gofl, wc string
	err      error
	dir      string
}

// e2eBinaries builds gofl and examples/wordcount once per test binary.
func e2eBinaries(t *testing.T) (gofl, wordcount string) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end deployment test; skipped with -short")
	}
	e2eBins.once.Do(func() {
		e2eBins.dir, e2eBins.err = os.MkdirTemp("", "gofl-e2e-bin-")
		if e2eBins.err != nil {
			return
		}
		e2eBins.gofl = filepath.Join(e2eBins.dir, "gofl")
		e2eBins.wc = filepath.Join(e2eBins.dir, "wordcount")
		for _, b := range [][2]string{{e2eBins.gofl, "."}, {e2eBins.wc, "../../examples/wordcount"}} {
			if out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput(); err != nil {
				e2eBins.err = fmt.Errorf("building %s: %v\n%s", b[1], err, out)
				return
			}
		}
	})
	if e2eBins.err != nil {
		t.Fatal(e2eBins.err)
	}
	return e2eBins.gofl, e2eBins.wc
}

// e2e is one test's world: a $HOME, an input file and the binaries.
type e2e struct {
	t        *testing.T
	home     string
	gofl, wc string
	input    string
	staging  string // staging.dir; default file://$HOME
	extraEnv []string
	extraArg []string // more -D flags
	// agentHome is the HOME of the Nomad test agent and of the processes
	// it starts (startNomadAgent).
	agentHome string
	// agentData is the Nomad test agent's data directory (allocations'
	// logs under alloc/<id>/alloc/logs).
	agentData string
}

const e2eText = "to be or not to be\nthat is the question\nTo be, or not to be!\n"

func newE2E(t *testing.T) *e2e {
	t.Helper()
	g, wc := e2eBinaries(t)
	home := t.TempDir()
	input := filepath.Join(home, "input.txt")
	if err := os.WriteFile(input, []byte(e2eText), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &e2e{t: t, home: home, gofl: g, wc: wc, input: input}
	t.Cleanup(e.assertNothingLeft)
	return e
}

type e2eResult struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// run runs the gofl binary with the test's $HOME.
func (e *e2e) run(args ...string) e2eResult {
	e.t.Helper()
	return e.runOn(nil, args...)
}

// runOn runs the gofl binary with the test's $HOME and its stdout on
// term (a terminal) unless nil.
func (e *e2e) runOn(term *os.File, args ...string) e2eResult {
	e.t.Helper()
	full := []string{"-D", "deployment.binary=" + e.gofl, "-D", "heartbeat.interval=500ms", "-D", "log.level=warn"}
	if e.staging != "" {
		full = append(full, "-D", "staging.dir="+e.staging)
	}
	full = append(full, e.extraArg...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.gofl, append(args[:1:1], append(full, args[1:]...)...)...)
	cmd.Env = append(append(os.Environ(), "HOME="+e.home, "XDG_STATE_HOME="), e.extraEnv...)
	cmd.Dir = e.home
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if term != nil {
		cmd.Stdout = term
	}
	start := time.Now()
	err := cmd.Run()
	r := e2eResult{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	if err != nil {
		r.code = 1
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
		}
	}
	return r
}

// checkCounts checks wordcount's part files in dir.
func (e *e2e) checkCounts(dir string) {
	e.t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	var lines []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l != "" {
				lines = append(lines, l)
			}
		}
	}
	sort.Strings(lines)
	want := []string{"be 4", "is 1", "not 2", "or 2", "question 1", "that 1", "the 1", "to 4"}
	if strings.Join(lines, ",") != strings.Join(want, ",") {
		e.t.Fatalf("word counts in %s = %q, want %q", dir, lines, want)
	}
}

// logTails is the last n lines of every log of the test's clusters (live
// ones and those whose logs the local provider kept), for a failure's
// message.
func (e *e2e) logTails(n int) string {
	var b strings.Builder
	state := filepath.Join(e.home, ".local", "state", "gofl")
	for _, pattern := range []string{"clusters/*/*/gofl.log", "logs/*/*.log"} {
		files, _ := filepath.Glob(filepath.Join(state, pattern))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
			fmt.Fprintf(&b, "--- %s (last %d lines)\n%s\n", strings.TrimPrefix(f, state+"/"), min(n, len(lines)),
				strings.Join(lines[max(len(lines)-n, 0):], "\n"))
		}
	}
	return b.String()
}

func (e *e2e) clustersDir() string {
	return filepath.Join(e.home, ".local", "state", "gofl", "clusters")
}

// stagingClusterDirs lists the cluster directories under file://$HOME/.gofl.
func (e *e2e) stagingClusterDirs() []string {
	ents, _ := os.ReadDir(filepath.Join(e.home, storage.StagingSubdir))
	var out []string
	for _, en := range ents {
		if en.Name() == "blobs" {
			continue
		}
		// Archived logs outlive the cluster (package logs).
		if sub, _ := os.ReadDir(filepath.Join(e.home, storage.StagingSubdir, en.Name())); len(sub) == 1 && sub[0].Name() == storage.LogsSubdir {
			continue
		}
		out = append(out, en.Name())
	}
	return out
}

// homeProcesses lists processes running with this test's $HOME.
func (e *e2e) homeProcesses() []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	needle := []byte("HOME=" + e.home + "\x00")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, needle) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		out = append(out, filepath.Base(filepath.Dir(p))+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return out
}

// waitClean waits until no cluster, staging directory or process of the
// test is left; listing the local provider's clusters cleans records of
// clusters whose JobManager exited.
func (e *e2e) waitClean(timeout time.Duration) error {
	dep := local.NewDeployer(local.Options{Dir: filepath.Join(e.home, ".local", "state", "gofl"), Log: zerolog.Nop()})
	deadline := time.Now().Add(timeout)
	for {
		infos, _ := dep.List(context.Background())
		ents, _ := os.ReadDir(e.clustersDir())
		procs := e.homeProcesses()
		staged := e.stagingClusterDirs()
		if len(infos) == 0 && len(ents) == 0 && len(procs) == 0 && len(staged) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("left after %v: clusters %v, cluster dirs %d, staging dirs %v, processes %q", timeout, infos, len(ents), staged, procs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *e2e) assertNothingLeft() {
	if err := e.waitClean(30 * time.Second); err != nil {
		e.t.Error(err)
		// Do not leak into other tests.
		dep := local.NewDeployer(local.Options{Dir: filepath.Join(e.home, ".local", "state", "gofl"), GracePeriod: time.Second, Log: zerolog.Nop()})
		infos, _ := dep.List(context.Background())
		for _, i := range infos {
			_ = dep.Kill(context.Background(), i.ClusterID)
		}
	}
}

func (e *e2e) blobPath(bin string) string {
	e.t.Helper()
	b, err := os.ReadFile(bin)
	if err != nil {
		e.t.Fatal(err)
	}
	key := blob.KeyOf(b)
	return filepath.Join(e.home, storage.StagingSubdir, "blobs", "sha256", strings.TrimPrefix(key, "sha256:"))
}

func expectOK(t *testing.T, r e2eResult, what string) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", what, r.code, r.stdout, r.stderr)
	}
}

func TestDeploySessionE2E(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	r := e.run("session", "start", "-t", "local", "--name", "s1", "-n", "1")
	expectOK(t, r, "session start")
	if !strings.Contains(r.stdout, "Session cluster s1 started") || !strings.Contains(r.stdout, "REST at http://127.0.0.1:") {
		t.Fatalf("session start printed %q", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(e.home, ".gofl", "s1", storage.ConfigFile)); err != nil {
		t.Errorf("the session's config snapshot is not staged: %v", err)
	}
	r = e.run("session", "list")
	expectOK(t, r, "session list")
	if !regexp.MustCompile(`s1 \*\s+local\s+session\s+running`).MatchString(r.stdout) {
		t.Errorf("session list:\n%s", r.stdout)
	}

	// The remembered session is the default.
	out1 := filepath.Join(e.home, "out1")
	r = e.run("run", "-m", "session", e.wc, "--input", e.input, "--output", out1)
	expectOK(t, r, "run -m session")
	if !strings.Contains(r.stdout, "FINISHED") || !strings.Contains(r.stdout, "uploaded") {
		t.Errorf("run printed:\n%s", r.stdout)
	}
	e.checkCounts(out1)
	// -c names it, the binary is not uploaded again.
	out2 := filepath.Join(e.home, "out2")
	r = e.run("run", "-m", "session", "-c", "s1", e.wc, "--input", e.input, "--output", out2)
	expectOK(t, r, "run -m session -c s1")
	if !strings.Contains(r.stdout, "already on the JobManager") {
		t.Errorf("second run uploaded the binary again:\n%s", r.stdout)
	}
	e.checkCounts(out2)

	r = e.run("list", "-c", "s1")
	expectOK(t, r, "list -c")
	if strings.Count(r.stdout, "FINISHED") != 2 {
		t.Errorf("list -c s1:\n%s", r.stdout)
	}
	id := strings.Fields(strings.Split(r.stdout, "\n")[1])[0]
	r = e.run("info", "-c", "s1", id)
	expectOK(t, r, "info -c")
	if !strings.Contains(r.stdout, "FINISHED") {
		t.Errorf("info -c s1:\n%s", r.stdout)
	}
	if r = e.run("cancel", "-c", "s1", id); r.code == 0 || !strings.Contains(r.stderr, "cannot be cancelled") {
		t.Errorf("cancel of a finished job: exit %d, %s", r.code, r.stderr)
	}
	if r = e.run("list", "-c", "nope"); r.code == 0 || !strings.Contains(r.stderr, "cluster not found") {
		t.Errorf("list -c nope: exit %d, %s", r.code, r.stderr)
	}

	r = e.run("session", "stop")
	expectOK(t, r, "session stop")
	if !strings.Contains(r.stdout, "Cluster s1 stopped") {
		t.Errorf("session stop printed %q", r.stdout)
	}
	if err := e.waitClean(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(e.home, ".local", "state", "gofl", "sessions.json"))
	var st sessionState
	if err := json.Unmarshal(b, &st); err != nil || len(st.Sessions) != 0 || st.Latest != "" {
		t.Errorf("session state after stop: %s", b)
	}
	if r = e.run("session", "stop"); r.code == 0 || !strings.Contains(r.stderr, "no remembered session") {
		t.Errorf("stop without a session: exit %d, %s", r.code, r.stderr)
	}
}

// wordcountBarDone is the wordcount source's line at the end of a run:
// every split of its input read.
var wordcountBarDone = regexp.MustCompile(`(?m)^ *TextFile Source.* FINISHED .*\[#{24}\] 100% (\d+)/(\d+) splits$`)

var clusterIDLine = regexp.MustCompile(`(?m)^(?:Per-job|Application) cluster (\S+) \(provider local\) deployed`)

var logsLine = regexp.MustCompile(`(?m)^Logs of cluster \S+ \(Print\(\) output in taskmanager-\*\.log\): (\S+)$`)

func TestDeployPerJobE2E(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	out := filepath.Join(e.home, "out")
	r := e.run("run", "-m", "per-job", "-t", "local", e.wc, "--input", e.input, "--output", out)
	expectOK(t, r, "run -m per-job")
	if !strings.Contains(r.stdout, "FINISHED") || !strings.Contains(r.stdout, "uploaded") || !clusterIDLine.MatchString(r.stdout) {
		t.Fatalf("run printed:\n%s", r.stdout)
	}
	e.checkCounts(out)
	// stream.TextFile reads its splits from the JobMaster's enumerator:
	// the plain summary shows its progress bar, complete.
	if !wordcountBarDone.MatchString(r.stdout) {
		t.Errorf("no complete progress bar of the TextFile source in the summary:\n%s", r.stdout)
	}
	if err := e.waitClean(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	// It names where the ended cluster's logs (Print() output) stay, and
	// they are there (bug 7).
	m := logsLine.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("run does not say where the logs are:\n%s", r.stdout)
	}
	if tms, _ := filepath.Glob(filepath.Join(m[1], "taskmanager-*.log")); len(tms) == 0 {
		t.Errorf("no TaskManager log in %s", m[1])
	}

	// The same binary again: nothing is uploaded, the blob is not rewritten.
	blob := e.blobPath(e.wc)
	before, err := os.Stat(blob)
	if err != nil {
		t.Fatalf("the job binary is not in the blob cache: %v", err)
	}
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(blob, old, old); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(e.home, "out2")
	r = e.run("run", "-m", "per-job", e.wc, "--input", e.input, "--output", out2)
	expectOK(t, r, "second run -m per-job")
	if !strings.Contains(r.stdout, "already staged") {
		t.Errorf("second run:\n%s", r.stdout)
	}
	after, err := os.Stat(blob)
	if err != nil || !after.ModTime().Equal(old) || after.Size() != before.Size() {
		t.Errorf("the staged blob was rewritten: %v, mtime %v (want %v)", err, after.ModTime(), old)
	}
	e.checkCounts(out2)

	// A failing job: the exit code follows the job's final state.
	r = e.run("run", "-m", "per-job", e.wc, "--input", filepath.Join(e.home, "missing.txt"), "--output", filepath.Join(e.home, "out3"))
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "FAILED") {
		t.Errorf("a failing per-job run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

func TestDeployApplicationE2E(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	out := filepath.Join(e.home, "out")
	r := e.run("run", "-m", "application", "-t", "local", "-p", "2", e.wc, "--input", e.input, "--output", out)
	expectOK(t, r, "run -m application")
	if !regexp.MustCompile(`FINISHED \| job [0-9a-f]{32}: FINISHED`).MatchString(r.stdout) || !clusterIDLine.MatchString(r.stdout) {
		t.Fatalf("run printed:\n%s", r.stdout)
	}
	e.checkCounts(out)
	// -p reaches the driver's builder: two sink subtasks, two part files.
	if parts, _ := filepath.Glob(filepath.Join(out, "part-*")); len(parts) != 2 {
		t.Errorf("part files %q, want 2 (-p 2)", parts)
	}
	if err := e.waitClean(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	// A driver whose job builder fails fails the application.
	r = e.run("run", "-m", "application", e.wc, "--output", filepath.Join(e.home, "out2"))
	if r.code == 0 || !strings.Contains(r.stderr, "usage: wordcount") {
		t.Errorf("a failing driver: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

func TestDeployDetached(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	for _, mode := range []string{"per-job", "application"} {
		out := filepath.Join(e.home, "out-"+mode)
		r := e.run("run", "-m", mode, "--detached", e.wc, "--input", e.input, "--output", out)
		expectOK(t, r, "run --detached -m "+mode)
		if strings.Contains(r.stdout, "FINISHED") {
			t.Errorf("a detached run followed the job:\n%s", r.stdout)
		}
		// The cluster runs the job and goes away by itself.
		if err := e.waitClean(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		e.checkCounts(out)
	}
}

func TestDeployFailures(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	dir := t.TempDir()
	notExec := filepath.Join(dir, "notexec")
	if err := os.WriteFile(notExec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadHDFS := "hdfs://" + l.Addr().String() + "/staging"
	l.Close()
	out := filepath.Join(dir, "out") // absent: the job may write it
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown provider", []string{"run", "-m", "per-job", "-t", "yarn", e.wc, "--input", e.input, "--output", out}, `unknown provider "yarn"`},
		{"unknown provider (session)", []string{"session", "start", "-t", "yarn"}, `unknown provider "yarn"`},
		{"unknown provider (application)", []string{"run", "-m", "application", "-t", "yarn", e.wc}, `unknown provider "yarn"`},
		{"unreachable HDFS", []string{"-D", "staging.dir=" + deadHDFS, "-m", "per-job", e.wc, "--input", e.input, "--output", out}, "unavailable"},
		{"unreachable HDFS (application)", []string{"-D", "staging.dir=" + deadHDFS, "-m", "application", e.wc, "--input", e.input, "--output", out}, "unavailable"},
		{"unreachable HDFS (session)", []string{"session", "start", "-D", "staging.dir=" + deadHDFS}, "unavailable"},
		{"missing JOB", []string{"run", "-m", "per-job", filepath.Join(dir, "missing")}, "does not exist"},
		{"missing JOB (application)", []string{"run", "-m", "application", filepath.Join(dir, "missing")}, "does not exist"},
		{"non-executable JOB", []string{"run", "-m", "per-job", notExec}, "is not an executable file"},
		{"non-executable JOB (application)", []string{"run", "-m", "application", notExec}, "is not an executable file"},
		{"bad mode", []string{"run", "-m", "yarn-session", e.wc}, `-m "yarn-session"`},
	} {
		args := tc.args
		if args[0] == "-D" { // a run with a -D before -m
			args = append([]string{"run"}, args...)
		}
		r := e.run(args...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want a failure mentioning %q", tc.name, r.code, r.stderr, tc.want)
		}
		if err := e.waitClean(30 * time.Second); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestDeployCorruptStagedArtifact(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	blob := e.blobPath(e.wc)
	for _, mode := range []string{"per-job", "application"} {
		// A corrupt cache entry under the binary's digest: the client sees
		// it present and uploads nothing, the JobManager's check fails.
		if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(blob, []byte("not the job binary"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := e.run("run", "-m", mode, e.wc, "--input", e.input, "--output", filepath.Join(e.home, "out"))
		if r.code == 0 || !strings.Contains(r.stderr, "is corrupt") || !strings.Contains(r.stderr, "digest mismatch") {
			t.Fatalf("%s with a corrupt staged binary: exit %d\n%s\n%s", mode, r.code, r.stdout, r.stderr)
		}
		if err := e.waitClean(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(blob); !os.IsNotExist(err) {
			t.Errorf("the corrupt blob is still cached: %v", err)
		}
	}
	// The next run uploads it anew and works.
	out := filepath.Join(e.home, "out-ok")
	r := e.run("run", "-m", "per-job", e.wc, "--input", e.input, "--output", out)
	expectOK(t, r, "run after the corrupt blob was dropped")
	if !strings.Contains(r.stdout, "uploaded") {
		t.Errorf("run:\n%s", r.stdout)
	}
	e.checkCounts(out)
}

func TestDeployHDFSStagingE2E(t *testing.T) {
	t.Parallel()
	hdfs := storagetest.HDFS(t)
	e := newE2E(t)
	e.extraEnv = []string{"HADOOP_USER_NAME=gofltest"}
	e.staging = fmt.Sprintf("%s/gofl-deploy-test/%d", hdfs, time.Now().UnixNano())
	ctx := context.Background()
	st, err := storage.OpenStaging(ctx, e.staging, storage.Options{User: "gofltest"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t.Cleanup(func() { _ = st.FileSystem().RemoveAll(context.Background(), strings.TrimSuffix(st.Root(), "/.gofl")) })
	for _, mode := range []string{"per-job", "application", "session"} {
		out := filepath.Join(e.home, "out-"+mode)
		if mode == "session" {
			expectOK(t, e.run("session", "start", "--name", "hs"), "session start")
			if ids, _ := st.ListClusters(ctx); len(ids) != 1 || ids[0] != "hs" {
				t.Errorf("staged clusters on HDFS = %v, want [hs]", ids)
			}
		}
		r := e.run("run", "-m", mode, e.wc, "--input", e.input, "--output", out)
		expectOK(t, r, "run -m "+mode+" with hdfs:// staging")
		e.checkCounts(out)
		if mode == "session" {
			expectOK(t, e.run("session", "stop"), "session stop")
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			ids, err := st.ListClusters(ctx)
			if err == nil && len(ids) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: staged clusters on HDFS left: %v, %v", mode, ids, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	has, err := st.HasBlob(ctx, blob.KeyOf(mustRead(t, e.wc)))
	if err != nil || !has {
		t.Errorf("the job binary is not in the HDFS blob cache: %v, %v", has, err)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPerJobClusterRejectsSubmissions checks the per-job JobManager's REST
// API while its job runs: POST /jobs is forbidden with a clear message.
func TestPerJobClusterRejectsSubmissions(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	// A source that does not end until the gate file exists keeps the job
	// running (a FIFO as wordcount's input did not: it has no bytes to
	// split, so the job finished as soon as it ran).
	gated := gatedCountBinary(t)
	gate := filepath.Join(e.home, "gate")
	defer func() { _ = os.WriteFile(gate, nil, 0o644) }()
	r := e.run("run", "-m", "per-job", "--detached", gated, "--gate", gate, "--output", filepath.Join(e.home, "out"))
	expectOK(t, r, "run --detached")
	m := regexp.MustCompile(`REST at http://(\S+)`).FindStringSubmatch(r.stdout)
	id := clusterIDLine.FindStringSubmatch(r.stdout)
	if m == nil || id == nil {
		t.Fatalf("run printed:\n%s", r.stdout)
	}
	resp, err := http.Post("http://"+m[1]+"/jobs", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	var body struct{ Errors []string }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || len(body.Errors) != 1 || !strings.Contains(body.Errors[0], "per-job cluster") {
		t.Errorf("POST /jobs on a per-job cluster: %d %q", resp.StatusCode, body.Errors)
	}
	// Cancelling the job ends the cluster (exit 1: the job did not finish).
	r = e.run("list", "-c", id[1])
	expectOK(t, r, "list -c per-job cluster")
	jobID := strings.Fields(strings.Split(r.stdout, "\n")[1])[0]
	expectOK(t, e.run("cancel", "-c", id[1], jobID), "cancel")
	// Open the gate so the runner's generator returns and it can stop.
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.waitClean(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestDeployNomadE2E runs the three modes on the nomad provider against
// gofl's Nomad test agent (raw_exec runs real processes; the gofl binary is
// pre-installed, the job binary comes from file:// staging).
// startNomadAgent runs the Nomad test agent for e's processes and points
// the nomad provider at it.
func startNomadAgent(t *testing.T, e *e2e) {
	t.Helper()
	agent := filepath.Join(filepath.Dir(e.gofl), "nomad-testagent")
	if _, err := os.Stat(agent); err != nil {
		if out, err := exec.Command("go", "build", "-o", agent, "../nomad-testagent").CombinedOutput(); err != nil {
			t.Fatalf("building the Nomad test agent: %v\n%s", err, out)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	e.agentData = t.TempDir()
	cmd := exec.Command(agent, "-addr", addr, "-data-dir", e.agentData, "-log-level", "warn")
	// The agent's HOME is not the client's, as on a real node: paths the
	// client means (staging.dir's $HOME) must reach the tasks expanded.
	e.agentHome = t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+e.agentHome)
	var agentLog bytes.Buffer
	cmd.Stdout, cmd.Stderr = &agentLog, &agentLog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Registered after newE2E's check, so it runs before it: the agent
	// is gone (with its tasks) before nothing-left is asserted.
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Nomad test agent did not listen at %s:\n%s", addr, agentLog.String())
		}
	}
	e.extraArg = append(e.extraArg, "-D", "provider.nomad.address=http://"+addr)
}

func TestDeployNomadE2E(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	startNomadAgent(t, e)

	expectOK(t, e.run("session", "start", "-t", "nomad", "--name", "ns", "-n", "1"), "session start -t nomad")
	// A second start of a running session fails and leaves its staging.
	staged := filepath.Join(e.home, storage.StagingSubdir, "ns", storage.ConfigFile)
	before, err := os.ReadFile(staged)
	if err != nil {
		t.Fatal(err)
	}
	// Internal TLS is on by default, with a per-cluster CA staged private
	// (the nomad provider would refuse the deployment otherwise).
	if st, err := os.Stat(filepath.Join(e.home, storage.StagingSubdir, "ns", client.InternalKeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the cluster's staged TLS key: %v %v", st, err)
	}
	if r := e.run("session", "start", "-t", "nomad", "--name", "ns", "-n", "1"); r.code == 0 || !strings.Contains(r.stderr, "exists") {
		t.Fatalf("second session start --name ns: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if after, err := os.ReadFile(staged); err != nil || !bytes.Equal(after, before) {
		t.Fatalf("the running session's staged configuration changed or went: %v", err)
	}
	out := filepath.Join(e.home, "out-session")
	expectOK(t, e.run("run", "-m", "session", e.wc, "--input", e.input, "--output", out), "run -m session (nomad)")
	e.checkCounts(out)
	if r := e.run("list", "-c", "ns"); r.code != 0 || !strings.Contains(r.stdout, "FINISHED") {
		t.Errorf("list -c ns: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	expectOK(t, e.run("session", "stop"), "session stop (nomad)")
	for _, mode := range []string{"per-job", "application"} {
		out := filepath.Join(e.home, "out-"+mode)
		r := e.run("run", "-m", mode, "-t", "nomad", e.wc, "--input", e.input, "--output", out)
		expectOK(t, r, "run -m "+mode+" -t nomad")
		if !strings.Contains(r.stdout, "(provider nomad) deployed") {
			t.Errorf("run printed:\n%s", r.stdout)
		}
		e.checkCounts(out)
	}
	// Detached: the JobManager removes the client's staging directory
	// (in the client's $HOME, not the agent's) when the job ends.
	outD := filepath.Join(e.home, "out-detached")
	expectOK(t, e.run("run", "-m", "per-job", "-t", "nomad", "--detached", e.wc, "--input", e.input, "--output", outD), "run --detached -t nomad")
	// Every cluster goes away by itself (the listing purges ended ones).
	for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r := e.run("session", "list", "-t", "nomad")
		if r.code == 0 && strings.Contains(r.stdout, "no clusters") && len(e.stagingClusterDirs()) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nomad clusters left:\n%s\n%s; staging %v", r.stdout, r.stderr, e.stagingClusterDirs())
		}
	}
	e.checkCounts(outD)
}

// The nomad provider with hdfs:// staging, in every mode: Nomad runs the
// JobManager, which reads the staged JobGraph and binary from HDFS.
func TestDeployNomadHDFSStagingE2E(t *testing.T) {
	t.Parallel()
	hdfs := storagetest.HDFS(t)
	e := newE2E(t)
	e.extraEnv = []string{"HADOOP_USER_NAME=gofltest"}
	e.staging = fmt.Sprintf("%s/gofl-nomad-test/%d", hdfs, time.Now().UnixNano())
	ctx := context.Background()
	st, err := storage.OpenStaging(ctx, e.staging, storage.Options{User: "gofltest"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t.Cleanup(func() { _ = st.FileSystem().RemoveAll(context.Background(), strings.TrimSuffix(st.Root(), "/.gofl")) })
	startNomadAgent(t, e)
	for _, mode := range []string{"per-job", "application", "session"} {
		out := filepath.Join(e.home, "out-"+mode)
		if mode == "session" {
			expectOK(t, e.run("session", "start", "-t", "nomad", "--name", "nhs", "-n", "1"), "session start -t nomad (hdfs)")
		}
		r := e.run("run", "-m", mode, "-t", "nomad", e.wc, "--input", e.input, "--output", out)
		expectOK(t, r, "run -m "+mode+" -t nomad with hdfs:// staging")
		e.checkCounts(out)
		if mode == "session" {
			expectOK(t, e.run("session", "stop"), "session stop (nomad, hdfs)")
		}
		deadline := time.Now().Add(45 * time.Second)
		for {
			ids, err := st.ListClusters(ctx)
			if err == nil && len(ids) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: staged clusters on HDFS left: %v, %v", mode, ids, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r := e.run("session", "list", "-t", "nomad")
		if r.code == 0 && strings.Contains(r.stdout, "no clusters") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nomad clusters left:\n%s\n%s", r.stdout, r.stderr)
		}
	}
}
