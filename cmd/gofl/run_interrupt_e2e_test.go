package main

// End-to-end tests of Ctrl-C and --timeout on an attached `gofl run`
// (issue 13, bugs 4 and 5): a real gofl process, signalled with SIGINT,
// deploying a per-job cluster through the local provider.

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// liveRun is a `gofl run` process whose output the test watches.
type liveRun struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stdout bytes.Buffer
	stderr bytes.Buffer
	lines  chan string // stdout lines, as they come
	done   chan error
}

// start starts gofl as e.run does, without waiting for it.
func (e *e2e) start(args ...string) *liveRun {
	e.t.Helper()
	full := []string{"-D", "deployment.binary=" + e.gofl, "-D", "heartbeat.interval=500ms", "-D", "log.level=warn"}
	cmd := exec.Command(e.gofl, append(args[:1:1], append(full, args[1:]...)...)...)
	cmd.Env = append(os.Environ(), "HOME="+e.home, "XDG_STATE_HOME=")
	cmd.Dir = e.home
	r := &liveRun{cmd: cmd, lines: make(chan string, 1000), done: make(chan error, 1)}
	out, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Stderr = &lockedWriter{mu: &r.mu, w: &r.stderr}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			r.mu.Lock()
			r.stdout.WriteString(sc.Text() + "\n")
			r.mu.Unlock()
			select {
			case r.lines <- sc.Text():
			default:
			}
		}
		close(r.lines)
		r.done <- cmd.Wait()
	}()
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-r.done
	})
	return r
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// waitLine waits for a stdout line matching re.
func (r *liveRun) waitLine(t *testing.T, re *regexp.Regexp, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				t.Fatalf("gofl run ended before printing %s\n%s", re, r.output())
			}
			if re.MatchString(l) {
				return l
			}
		case <-deadline:
			t.Fatalf("no line %s within %v\n%s", re, timeout, r.output())
		}
	}
}

// wait waits for the process to end and returns its exit code.
func (r *liveRun) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	for range r.lines { // drain
	}
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(timeout):
		t.Fatalf("gofl run did not end within %v\n%s", timeout, r.output())
		return -1
	}
}

func (r *liveRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return "stdout:\n" + r.stdout.String() + "stderr:\n" + r.stderr.String()
}

var (
	runningLine  = regexp.MustCompile(`\] RUNNING \|.*1 RUNNING`)
	perJobID     = regexp.MustCompile(`Per-job cluster (\S+) \(provider local\) deployed`)
	pacedForever = []string{"paced-numbers", "--count", "1000000", "--rate", "5"}
)

// Ctrl-C with -sae cancels the job, shuts the per-job cluster down with its
// staging, and exits 130.
func TestRunInterruptWithShutdownOnAttachedExit(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	job := faultTestJob(t, e)
	r := e.start(append([]string{"run", "-m", "per-job", "-t", "local", "-sae", job}, append(pacedForever, "--output", filepath.Join(e.home, "out"))...)...)
	r.waitLine(t, runningLine, 2*time.Minute)
	if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := r.wait(t, 90*time.Second); code != 130 {
		t.Fatalf("exit %d, want 130\n%s", code, r.output())
	}
	out := r.output()
	if !regexp.MustCompile(`Job [0-9a-f]{32} cancelled`).MatchString(out) || !strings.Contains(out, "shut down") {
		t.Errorf("output:\n%s", out)
	}
	if err := e.waitClean(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// Ctrl-C without -sae detaches: the job and its cluster go on, with their
// staging, and gofl says how to cancel it; the printed command works.
func TestRunInterruptDetaches(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	job := faultTestJob(t, e)
	r := e.start(append([]string{"run", "-m", "per-job", "-t", "local", job}, append(pacedForever, "--output", filepath.Join(e.home, "out"))...)...)
	id := perJobID.FindStringSubmatch(r.waitLine(t, perJobID, 2*time.Minute))[1]
	r.waitLine(t, runningLine, 2*time.Minute)
	if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := r.wait(t, 60*time.Second); code != 130 {
		t.Fatalf("exit %d, want 130\n%s", code, r.output())
	}
	assertDetached(t, e, id, r.output())
}

// --timeout detaches as Ctrl-C does, promptly, and never removes the
// staging of the cluster that still runs the job.
func TestRunTimeoutDetachesHonestly(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	job := faultTestJob(t, e)
	res := e.run(append([]string{"run", "-m", "per-job", "-t", "local", "--timeout", "3s", job}, append(pacedForever, "--output", filepath.Join(e.home, "out"))...)...)
	if res.code != 1 || strings.Contains(res.stdout+res.stderr, "goes away by itself") {
		t.Fatalf("exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	id := perJobID.FindStringSubmatch(res.stdout)[1]
	assertDetached(t, e, id, res.stdout+res.stderr)
}

// assertDetached checks that cluster id still runs with its staging, that
// out says how to cancel, and stops the cluster the way out says.
func assertDetached(t *testing.T, e *e2e, id, out string) {
	t.Helper()
	m := regexp.MustCompile(`gofl cancel -c ` + regexp.QuoteMeta(id) + ` ([0-9a-f]{32})`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "gofl session stop "+id) || !strings.Contains(out, "Detached") {
		t.Fatalf("no way to cancel printed:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(e.home, ".gofl", id)); err != nil {
		t.Errorf("the running cluster's staging is gone: %v", err)
	}
	if l := e.run("list", "-c", id); l.code != 0 || !strings.Contains(l.stdout, "RUNNING") {
		t.Errorf("the job no longer runs after detaching: exit %d\n%s\n%s", l.code, l.stdout, l.stderr)
	}
	if c := e.run("cancel", "-c", id, m[1]); c.code != 0 {
		t.Errorf("the printed cancel failed: %s\n%s", c.stdout, c.stderr)
	}
	if s := e.run("session", "stop", id); s.code != 0 {
		t.Errorf("the printed stop failed: %s\n%s", s.stdout, s.stderr)
	}
	if err := e.waitClean(30 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// A session started with -D parallelism.default=N runs the jobs submitted
// to it at N (bug 1): the client plans them with the session's setting.
func TestSessionStartedWithParallelismDefault(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	expectOK(t, e.run("session", "start", "-t", "local", "--name", "p2", "-D", "parallelism.default=2"), "session start")
	t.Cleanup(func() { e.run("session", "stop", "p2") })
	out := filepath.Join(e.home, "out")
	expectOK(t, e.run("run", e.wc, "--input", e.input, "--output", out), "run on the session")
	if files, _ := filepath.Glob(filepath.Join(out, "part-*")); len(files) != 2 {
		t.Errorf("the job wrote %d part files, want 2 (parallelism.default=2)", len(files))
	}
	e.checkCounts(out)
}
