package main

import (
	"strings"
	"testing"
)

func TestSimulateFinishesAfterFailover(t *testing.T) {
	r := gofl(t, nil, "simulate", "--kill-at", "150ms", "-D", "restart-strategy.type=fixed-delay", "-D", "restart-strategy.fixed-delay.attempts=3")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"TaskManager tm-", "killed", "job RUNNING -> FINISHED", "1 restarts"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestSimulateFailsWithoutRestarts(t *testing.T) {
	r := gofl(t, nil, "simulate", "--mode", "streaming", "--kill-at", "150ms")
	if r.code == 0 || !strings.Contains(r.stdout, "recovery is suppressed by none") || !strings.Contains(r.stderr, "job ended FAILED") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

func TestSimulateRejectsBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"simulate", "--mode", "fast"},
		{"simulate", "--kill-at", "soon"},
		{"simulate", "-D", "jobmanager.scheduler.scheduling-strategy=random"},
		{"simulate", "--parallelism", "0"},
	} {
		if r := gofl(t, nil, args...); r.code == 0 {
			t.Errorf("%v: exit 0, want failure\n%s", args, r.stdout)
		}
	}
}
