package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gofl/gofl/client"
)

// A TaskManager killed behind the local provider's back is noticed at once
// (the provider reports the worker's exit), replaced by the active
// ResourceManager, and the job restarts the affected regions and finishes.
func TestTaskManagerKilledBehindProviderIsReplaced(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.extraArg = []string{"-D", "taskmanager.numberOfTaskSlots=2", "-D", "heartbeat.timeout=300s"}
	r := e.run("session", "start", "-t", "local", "--name", "k1", "-n", "1")
	expectOK(t, r, "session start")
	m := regexp.MustCompile(`REST at http://(127\.0\.0\.1:\d+)`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no REST address in %q", r.stdout)
	}
	defer func() { expectOK(t, e.run("session", "stop", "k1"), "session stop") }()
	cl, err := client.New(m[1])
	if err != nil {
		t.Fatal(err)
	}
	// Four POINTWISE regions of sleeping built-in tasks (10 s: long enough
	// for all four to be seen RUNNING together on a loaded machine), run by
	// gofl itself as the job binary, spread over two TaskManagers.
	graph := `{"name":"sleepers","type":"JOB_TYPE_STREAMING",
	 "config":{"restart-strategy.type":"fixed-delay","restart-strategy.fixed-delay.attempts":"3","restart-strategy.fixed-delay.delay":"200 ms"},
	 "vertices":[{"id":"source","name":"source","parallelism":4,"invokable":"sleep","config":"eyJkdXJhdGlvbiI6IjEwcyJ9","slotSharingGroup":"default"},
	             {"id":"sink","name":"sink","parallelism":4,"invokable":"noop","slotSharingGroup":"default"}],
	 "edges":[{"source":"source","target":"sink","distribution":"DISTRIBUTION_PATTERN_POINTWISE","partitionType":"RESULT_PARTITION_TYPE_PIPELINED"}]}`
	file := filepath.Join(e.home, "sleepers.json")
	if err := os.WriteFile(file, []byte(graph), 0o644); err != nil {
		t.Fatal(err)
	}
	r = e.run("submit", "-m", m[1], "--binary", e.gofl, file)
	expectOK(t, r, "submit")
	id := regexp.MustCompile(`Job ([0-9a-f]{32})`).FindStringSubmatch(r.stdout)[1]
	ctx := context.Background()
	var victim string
	waitFor(t, time.Minute, func() error {
		v, err := cl.JobVertex(ctx, id, "source")
		if err != nil {
			return err
		}
		for _, s := range v.Subtasks {
			if s.Status != "RUNNING" {
				return fmt.Errorf("subtask %d is %s", s.Subtask, s.Status)
			}
		}
		victim = v.Subtasks[0].TaskManagerID
		return nil
	})
	pid := processWith(t, e.home, "taskmanager.resource-id="+victim)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Removed within a minute, however loaded the machine: the heartbeat
	// timeout is five, so only the provider's report of the exit explains it.
	waitFor(t, time.Minute, func() error {
		tms, err := cl.TaskManagers(ctx)
		if err != nil {
			return err
		}
		for _, tm := range tms.TaskManagers {
			if tm.ID == victim {
				return fmt.Errorf("%s still registered", victim)
			}
		}
		return nil
	})
	// Watch the TaskManagers while the job finishes: a replacement must join.
	seen := map[string]bool{}
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			if tms, err := cl.TaskManagers(ctx); err == nil {
				for _, tm := range tms.TaskManagers {
					seen[tm.ID] = true
				}
			}
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	d, err := cl.WaitForJobStatus(ctx, id, "FINISHED")
	close(done)
	<-watched
	if err != nil {
		t.Fatalf("job %s: %v", d.State, err)
	}
	v, _ := cl.JobVertex(ctx, id, "source")
	restarted := 0
	for _, s := range v.Subtasks {
		if s.Attempt > 0 {
			restarted++
		}
		if s.TaskManagerID == victim {
			t.Errorf("subtask %d finished on the killed TaskManager", s.Subtask)
		}
	}
	if restarted == 0 || restarted == 4 {
		t.Errorf("%d of 4 regions restarted; want only those on the killed TaskManager", restarted)
	}
	delete(seen, victim)
	if len(seen) < 2 {
		t.Errorf("TaskManagers seen after the kill: %v; want the survivor and a replacement", seen)
	}
}

func waitFor(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// processWith finds the process of this test (its $HOME is home; other
// tests run clusters with the same worker names in parallel) whose command
// line contains arg.
func processWith(t *testing.T, home, arg string) int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), arg+"\x00") {
			continue
		}
		env, err := os.ReadFile(filepath.Join(filepath.Dir(p), "environ"))
		if err != nil || !strings.Contains(string(env), "HOME="+home+"\x00") {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			return pid
		}
	}
	t.Fatalf("no process with %q", arg)
	return 0
}
