package main

// Tests of the issue 13 fixes to `gofl run` and `gofl session`: each fails
// on the CLI before them.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// -D parallelism.default=N is the job's default parallelism in session and
// per-job mode (both plan on the client), as -p is (bug 1).
func TestRunHonoursParallelismDefault(t *testing.T) {
	bin := buildWordcount(t)
	for _, args := range [][]string{
		{"run", "-D", "parallelism.default=3"},
		{"-D", "parallelism.default=3", "run"},
		{"run", "-D", "parallelism.default=2", "-p", "3"}, // -p wins
	} {
		c := newBlobCluster(t)
		endJobs(t, c, "FINISHED")
		r := gofl(t, nil, append(args, "-m", c.addr, bin, "--input", "/in", "--output", "/nonexistent/out")...)
		if r.code != 0 {
			t.Fatalf("%q: exit %d\n%s\n%s", args, r.code, r.stdout, r.stderr)
		}
		l, err := c.d.ListJobs(context.Background())
		if err != nil || len(l.Jobs) != 1 {
			t.Fatalf("jobs %+v, %v", l, err)
		}
		for _, v := range c.d.Graph(l.Jobs[0].ID).Vertices {
			if v.Parallelism != 3 {
				t.Errorf("%q: vertex %q has parallelism %d, want 3", args, v.Name, v.Parallelism)
			}
		}
	}
}

// A non-empty --output directory fails the run before anything is
// submitted, naming the overwrite option (bug 2).
func TestRunRefusesAnExistingOutput(t *testing.T) {
	bin := buildWordcount(t)
	c := newBlobCluster(t)
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "part-2"), []byte("stale\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := gofl(t, nil, "run", "-m", c.addr, bin, "--input", "/in", "--output", out)
	if r.code == 0 || !strings.Contains(r.stderr, "exists and is not empty") || !strings.Contains(r.stderr, "Overwrite") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if l, _ := c.d.ListJobs(context.Background()); len(l.Jobs) != 0 {
		t.Fatalf("submitted %+v", l.Jobs)
	}
	endJobs(t, c, "FINISHED")
	if r := gofl(t, nil, "run", "-m", c.addr, bin, "--input", "/in", "--output", out, "--overwrite"); r.code != 0 {
		t.Fatalf("--overwrite: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "part-2")); !os.IsNotExist(err) {
		t.Errorf("--overwrite kept the stale part file: %v", err)
	}
}

// A relative path among the job's arguments is refused with the absolute
// path to use instead: the runners would resolve it in their own working
// directories (bug 8).
func TestRunRejectsRelativeJobPaths(t *testing.T) {
	c := newBlobCluster(t)
	wd, _ := os.Getwd()
	for _, args := range [][]string{
		{"--input", "/in", "--output", "out"},
		{"--input=data/in.txt", "--output", "/out"},
		{"--checkpoint-dir", "ckpt"},
		{"./in.txt"},
	} {
		r := gofl(t, nil, append([]string{"run", "-m", c.addr, "/does/not/matter"}, args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, "is a relative path") || !strings.Contains(r.stderr, wd) || strings.Contains(r.stderr, "does not exist") {
			t.Errorf("%q: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	for _, args := range [][]string{
		{"--input", "/in", "--output", "hdfs://nn:8020/out"},
		{"--output=file:///tmp/out", "--parallel", "4", "--name", "x"},
		{"--verbose", "--output", "/abs"},
	} {
		if err := checkJobArgs(args); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}

// Errors of a followed job carry the command's name, not "submit:" (bug 10).
func TestRunFailureIsNotPrefixedSubmit(t *testing.T) {
	bin := buildWordcount(t)
	c := newBlobCluster(t)
	endJobs(t, c, "FAILED")
	r := gofl(t, nil, "run", "-m", c.addr, bin, "--input", "/in", "--output", "/nonexistent/out")
	if r.code == 0 || strings.Contains(r.stderr, "submit:") || !strings.Contains(r.stderr, "gofl: run: job ") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// `session list` without clusters prints just that (bug 10).
func TestSessionListWithoutClusters(t *testing.T) {
	home := t.TempDir()
	r := gofl(t, []string{"HOME=" + home}, "session", "list", "-t", "local")
	if r.code != 0 || r.stdout != "no clusters\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// The first interrupt cancels the run's context with errInterrupted; the
// second ends the process at once (bug 4).
func TestWatchInterrupts(t *testing.T) {
	exited := make(chan int, 1)
	exitFunc = func(code int) { exited <- code }
	t.Cleanup(func() { exitFunc = os.Exit })
	var w syncBuffer
	ctx, release := watchInterrupts(context.Background(), &w)
	defer release()
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("SIGINT did not cancel the context")
	}
	if !errors.Is(context.Cause(ctx), errInterrupted) {
		t.Fatalf("cause %v", context.Cause(ctx))
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exited:
		if code != 130 {
			t.Fatalf("exit code %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a second SIGINT did not exit")
	}
	if !strings.Contains(w.String(), "Ctrl-C again") {
		t.Errorf("printed %q", w.String())
	}
}

// `gofl cache ls` and `gofl cache prune --all` list and remove unused
// blobs of the staging blob cache (bug 9).
func TestCacheListAndPrune(t *testing.T) {
	home := t.TempDir()
	hex := strings.Repeat("ab", 32)
	p := filepath.Join(home, ".gofl", "blobs", "sha256", hex)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, make([]byte, 3000), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home}
	cache := func(args ...string) result {
		// staging.dir's $HOME is expanded from the process environment.
		return gofl(t, env, append([]string{"cache"}, append(args, "-D", "staging.dir=file://"+home)...)...)
	}
	r := cache("ls")
	if r.code != 0 || !strings.Contains(r.stdout, "sha256:"+hex) || !strings.Contains(r.stdout, "1 blobs") {
		t.Fatalf("cache ls: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = cache("prune")
	if r.code != 0 || !strings.Contains(r.stdout, "removed 0 blobs") {
		t.Fatalf("cache prune under the cap: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = cache("prune", "--all")
	if r.code != 0 || !strings.Contains(r.stdout, "removed sha256:"+hex) {
		t.Fatalf("cache prune --all: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("the blob is still there: %v", err)
	}
	if r = cache("ls"); r.stdout != "no blobs\n" {
		t.Errorf("cache ls after pruning: %q", r.stdout)
	}
}

// `gofl run --help` and the README answer what a new user asked in issue
// 13: where Print() goes (on an ended local cluster too), what Ctrl-C
// does, how to run locally at parallelism N, how to join in batch mode.
func TestRunHelpAndReadmeAnswerTheUsersQuestions(t *testing.T) {
	r := gofl(t, nil, "run", "--help")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	topics := map[string][]string{
		"Print()":           {"Print()", "logs/<cluster-id>"},
		"Ctrl-C":            {"Ctrl-C", "-sae", "second Ctrl-C"},
		"local parallelism": {"GOFL_PARALLELISM="},
		"batch join":        {"InnerJoin", "LeftOuterJoin", "CoGroup", "managed memory"},
	}
	for name, doc := range map[string]string{"gofl run --help": r.stdout, "README.md": string(readme)} {
		flat := strings.Join(strings.Fields(doc), " ")
		for topic, words := range topics {
			for _, w := range words {
				if !strings.Contains(flat, w) && !strings.Contains(strings.ToLower(flat), strings.ToLower(w)) {
					t.Errorf("%s does not say %q (%s)", name, w, topic)
				}
			}
		}
	}
}
