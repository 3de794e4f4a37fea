package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNoHAJobManagerKilledCleansUpE2E is high availability "none" stated
// honestly: kill -9 the JobManager of a local session while a job's runner
// runs; its TaskManager and the runner exit within heartbeat.timeout,
// `session list` shows the cluster failed, `session stop` removes it.
func TestNoHAJobManagerKilledCleansUpE2E(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	const hbTimeout = 4 * time.Second
	e.extraArg = []string{"-D", "heartbeat.timeout=" + hbTimeout.String(), "-D", "high-availability.type=none"}
	expectOK(t, e.run("session", "start", "-t", "local", "--name", "noha", "-n", "1"), "session start")
	gated := gatedCountBinary(t)
	gate := filepath.Join(e.home, "gate")
	defer func() { _ = os.WriteFile(gate, nil, 0o644) }()
	expectOK(t, e.run("run", "-m", "session", "-c", "noha", "--detached", gated, "--gate", gate, "--output", filepath.Join(e.home, "out")), "run --detached")
	waitFor(t, 2*time.Minute, func() error {
		if n := len(clusterProcesses(e.home, "noha", "GOFL_ROLE=runner")); n == 0 {
			return fmt.Errorf("no job runner yet")
		}
		return nil
	})
	before := clusterProcesses(e.home, "noha", "")
	b, err := os.ReadFile(filepath.Join(e.clustersDir(), "noha", "jobmanager", "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.Fields(string(b))[0])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// heartbeat.timeout, plus slack for a loaded machine.
	waitFor(t, hbTimeout+40*time.Second, func() error {
		if left := clusterProcesses(e.home, "noha", ""); len(left) > 0 {
			return fmt.Errorf("processes of the cluster still run: %v (were %v)", left, before)
		}
		return nil
	})
	t.Logf("%d processes (TaskManager, runner) gone %v after the JobManager's kill -9 (heartbeat.timeout %v)",
		len(before)-1, time.Since(killed).Round(time.Millisecond), hbTimeout)
	r := e.run("session", "list")
	if r.code != 0 || !regexp.MustCompile(`noha \*\s+local\s+session\s+failed`).MatchString(r.stdout) {
		t.Errorf("session list after the kill: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := e.run("list", "-c", "noha"); r.code == 0 || !strings.Contains(r.stderr, "has failed") {
		t.Errorf("list -c of the failed cluster: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	expectOK(t, e.run("session", "stop", "noha"), "session stop")
	if _, err := os.Stat(filepath.Join(e.clustersDir(), "noha")); !os.IsNotExist(err) {
		t.Errorf("cluster directory after session stop: %v", err)
	}
}

// clusterProcesses lists live processes started for a local cluster (their
// environment has HOME=home and GOFL_CLUSTER_ID=id) and, if env is set,
// that entry too.
func clusterProcesses(home, id, env string) []int {
	want := []byte("GOFL_CLUSTER_ID=" + id + "\x00")
	var out []int
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, want) || !bytes.Contains(b, []byte("HOME="+home+"\x00")) || env != "" && !bytes.Contains(b, []byte(env+"\x00")) {
			continue
		}
		st, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "stat"))
		if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		out = append(out, pid)
	}
	return out
}
