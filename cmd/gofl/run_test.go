package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/internal/blob"
	"github.com/gofl/gofl/jobmanager/rest"
	"github.com/gofl/gofl/jobmanager/rest/resttest"
)

// newBlobCluster is newCluster with a blob store, so binaries can be
// uploaded.
func newBlobCluster(t *testing.T) *cluster {
	t.Helper()
	store, err := blob.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{d: resttest.NewDispatcher()}
	srv := resttest.NewServer(t, c.d, rest.Options{Blobs: store})
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	c.addr = u.Host
	return c
}

// buildWordcount is the wordcount binary, built once per test binary
// (e2eBinaries). Tests only read it.
func buildWordcount(t *testing.T) string {
	t.Helper()
	_, wc := e2eBinaries(t)
	return wc
}

// endJobs moves every job to state once it shows up, until the test ends.
func endJobs(t *testing.T, c *cluster, state string) {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if l, err := c.d.ListJobs(context.Background()); err == nil {
				for _, j := range l.Jobs {
					// The last operator returns two records (a collect
					// sink's list), as a job's execution result would.
					if vs := c.d.Graph(j.ID).Vertices; len(vs) > 0 && len(vs[len(vs)-1].Operators) > 0 {
						ops := vs[len(vs)-1].Operators
						c.d.SetAccumulators(j.ID, map[string][]byte{ops[len(ops)-1].ID: {1, 'a', 1, 'b'}})
					}
					c.d.SetState(j.ID, state)
				}
			}
		}
	}()
}

func TestRunPlansUploadsSubmitsAndFollows(t *testing.T) {
	bin := buildWordcount(t)
	for _, tc := range []struct {
		state string
		code  int
	}{{"FINISHED", 0}, {"FAILED", 1}} {
		t.Run(tc.state, func(t *testing.T) {
			c := newBlobCluster(t)
			endJobs(t, c, tc.state)
			// Flags after JOB belong to the job, -p included.
			r := gofl(t, nil, "run", "-m", c.addr, "-p", "3", bin, "--input", "/in", "--output", "/out")
			if r.code != tc.code || !strings.Contains(r.stdout, "submitted") || !strings.Contains(r.stdout, tc.state) {
				t.Fatalf("exit %d (want %d)\n%s\n%s", r.code, tc.code, r.stdout, r.stderr)
			}
			l, err := c.d.ListJobs(context.Background())
			if err != nil || len(l.Jobs) != 1 {
				t.Fatalf("jobs %+v, %v", l, err)
			}
			g := c.d.Graph(l.Jobs[0].ID)
			if tc.state == "FINISHED" {
				sink := g.Vertices[len(g.Vertices)-1].Operators
				want := fmt.Sprintf("Accumulator Results:\n- %s (operator %s): 2 records, 4 bytes\n", sink[len(sink)-1].Name, sink[len(sink)-1].ID)
				if !strings.Contains(r.stdout, "Job Runtime: ") || !strings.Contains(r.stdout, want) {
					t.Errorf("the result is not printed as %q:\n%s", want, r.stdout)
				}
			}
			if !strings.HasPrefix(g.BinaryKey, "sha256:") || !slices.Equal(g.ProgramArgs, []string{"wordcount", "--input", "/in", "--output", "/out"}) {
				t.Errorf("binary key %q, program args %q", g.BinaryKey, g.ProgramArgs)
			}
			for _, v := range g.Vertices {
				if v.Parallelism != 3 {
					t.Errorf("vertex %q has parallelism %d, want 3", v.Name, v.Parallelism)
				}
			}
		})
	}
}

func TestRunDetachedAndFromPackageDirectory(t *testing.T) {
	c := newBlobCluster(t)
	r := gofl(t, nil, "run", "--jobmanager", c.addr, "--detached", "../../examples/wordcount", "--input", "/in", "--output", "/out")
	if r.code != 0 || !strings.Contains(r.stdout, "submitted") || strings.Contains(r.stdout, "RUNNING") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if l, err := c.d.ListJobs(context.Background()); err != nil || len(l.Jobs) != 1 || l.Jobs[0].Status != "RUNNING" {
		t.Fatalf("jobs %+v, %v", l, err)
	}
}

func TestRunRejectsBadJobs(t *testing.T) {
	c := newBlobCluster(t)
	bin := buildWordcount(t)
	dir := t.TempDir()
	notExec := filepath.Join(dir, "notexec")
	garbage := filepath.Join(dir, "garbage.sh")
	if err := os.WriteFile(notExec, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(garbage, []byte("#!/bin/sh\necho hello\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "expected JOB"},
		{[]string{filepath.Join(dir, "missing")}, "does not exist"},
		{[]string{notExec}, "is not an executable file"},
		{[]string{garbage}, "is not a gofl job binary"},
		{[]string{bin, "--output", "/out"}, "usage: wordcount --input PATH --output DIR"},
		{[]string{dir}, "building the Go package"},
	} {
		r := gofl(t, nil, append([]string{"run", "-m", c.addr}, tc.args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("run %q: exit %d, stderr %q; want failure mentioning %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if l, _ := c.d.ListJobs(context.Background()); len(l.Jobs) != 0 {
		t.Errorf("bad jobs were submitted: %+v", l.Jobs)
	}
}
