package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gofl/gofl/storage"
)

// printPanicBinary builds testdata/printpanic into the test's temp dir.
func printPanicBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "printpanic")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/printpanic").CombinedOutput(); err != nil {
		t.Fatalf("building printpanic: %v\n%s", err, out)
	}
	return bin
}

// killHome sends SIGKILL to every process of the test ($HOME), the
// cluster's JobManager, TaskManagers and runners alike.
func killHome(t *testing.T, e *e2e) int {
	t.Helper()
	n := 0
	for _, p := range e.homeProcesses() {
		pid, err := strconv.Atoi(strings.SplitN(p, ":", 2)[0])
		if err == nil && syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// A per-job cluster killed with SIGKILL mid-job (JobManager, TaskManagers
// and runners at once) after one task panicked: gofl logs still prints the
// runner's stdout, Print() lines included, and the panic, from the archive.
func TestLogsOfKilledPerJobClusterFromArchive(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	bin := printPanicBinary(t)
	gate := filepath.Join(e.home, "panic-now")
	e.extraArg = []string{"-D", "restart-strategy.type=fixed-delay", "-D", "restart-strategy.fixed-delay.attempts=100",
		"-D", "restart-strategy.fixed-delay.delay=200 ms", "-D", "parallelism.default=2", "-D", "taskmanager.numberOfTaskSlots=2",
		"-D", "cluster.log-archive.interval=0s"} // only runner deaths and the provider archive: what a kill -9 leaves
	r := e.run("run", "-m", "per-job", "-t", "local", "--detached", bin, "--gate", gate)
	expectOK(t, r, "run per-job")
	m := regexp.MustCompile(`Per-job cluster (\S+) .*REST at http://(\S+)`).FindStringSubmatch(r.stdout)
	j := regexp.MustCompile(`Job ([0-9a-f]{32})`).FindStringSubmatch(r.stdout)
	if m == nil || j == nil {
		t.Fatalf("no cluster or job in %q", r.stdout)
	}
	cluster, jobID := m[1], j[1]

	// Live, through REST: the Print() lines as they come.
	waitFor(t, 2*time.Minute, func() error {
		r := e.run("logs", "-c", cluster, "--job", jobID, "--file", "out")
		if r.code != 0 || !strings.Contains(r.stdout, "logs-e2e-marker") {
			return fmt.Errorf("live stdout: exit %d, %q %q", r.code, tail(r.stdout), r.stderr)
		}
		return nil
	})
	// One task panics; its runner dies and the job restarts.
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, func() error {
		r := e.run("logs", "-c", cluster, "--job", jobID, "--tail", "200")
		if r.code != 0 || !strings.Contains(r.stdout, "panic: logs-e2e-panic") {
			return fmt.Errorf("live runner log: exit %d, %q %q", r.code, tail(r.stdout), r.stderr)
		}
		return nil
	})
	if _, err := os.Stat(gate); err == nil {
		t.Fatal("the gate is still there: no task panicked")
	}
	// More markers after the restart, then the whole cluster dies at once.
	waitFor(t, 2*time.Minute, func() error {
		r := e.run("logs", "-c", cluster, "--job", jobID, "--tail", "5")
		if r.code != 0 || strings.Contains(r.stdout, "panic") || !strings.Contains(r.stdout, "logs-e2e-marker") {
			return fmt.Errorf("no markers after the restart yet: %q", r.stdout)
		}
		return nil
	})
	if killHome(t, e) == 0 {
		t.Fatal("no process to kill")
	}

	// From the archive: the first gofl logs finds the cluster dead, the
	// provider archives what its processes left, and the logs are read.
	r = e.run("logs", "-c", cluster, "--job", jobID)
	expectOK(t, r, "logs from the archive")
	for _, want := range []string{"logs-e2e-marker", "panic: logs-e2e-panic at record"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("archived runner log lacks %q:\n%s", want, tail(r.stdout))
		}
	}
	r = e.run("logs", "-c", cluster, "--job", jobID, "--file", "out")
	expectOK(t, r, "archived stdout")
	if !strings.Contains(r.stdout, "logs-e2e-marker") || strings.Contains(r.stdout, "panic:") {
		t.Errorf("archived stdout:\n%s", tail(r.stdout))
	}
	r = e.run("logs", "-c", cluster, "--list")
	expectOK(t, r, "archived list")
	for _, want := range []string{"jobmanager.log", "taskmanager.log", "runner-" + jobID + ".err"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("archive list lacks %s:\n%s", want, r.stdout)
		}
	}
	r = e.run("logs", "-c", cluster)
	expectOK(t, r, "archived JobManager log")
	if !strings.Contains(r.stdout, "JobManager") {
		t.Errorf("archived JobManager log:\n%s", tail(r.stdout))
	}
	archived := filepath.Join(e.home, ".gofl", cluster, "logs", "taskmanagers")
	if ents, err := os.ReadDir(archived); err != nil || len(ents) == 0 {
		t.Fatalf("archive %s: %v %v", archived, ents, err)
	}
	// The killed JobManager never removed its staging directory; removing
	// it keeps the logs.
	st := storage.NewStaging(storage.Local(), e.home)
	if err := st.RemoveCluster(context.Background(), cluster); err != nil {
		t.Fatal(err)
	}
	r = e.run("logs", "-c", cluster, "--job", jobID, "--file", "err")
	if r.code != 0 || !strings.Contains(r.stdout, "logs-e2e-panic") {
		t.Fatalf("archived stderr after the staging dir was removed: exit %d %q %q", r.code, tail(r.stdout), r.stderr)
	}
	// A killed cluster stays failed until it is stopped.
	expectOK(t, e.run("session", "stop", cluster), "session stop of the failed cluster")
}

func tail(s string) string {
	if len(s) > 2000 {
		return "..." + s[len(s)-2000:]
	}
	return s
}
