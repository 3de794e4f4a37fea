package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/rpc/restapi"
)

func TestSubmitJobGraphFile(t *testing.T) {
	c := newCluster(t)
	r := gofl(t, nil, "submit", "--jobmanager", c.addr, "../../scripts/jobs/wordcount-shape.json")
	if r.code != 0 || !strings.Contains(r.stdout, "submitted") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	jobs := gofl(t, nil, "list", "--jobmanager", c.addr)
	if !strings.Contains(jobs.stdout, "wordcount (built-in tasks)") {
		t.Fatalf("submitted job not listed:\n%s", jobs.stdout)
	}
}

func TestSubmitWaitFollowsToTheEnd(t *testing.T) {
	c := newCluster(t)
	stop := make(chan struct{})
	defer close(stop)
	go func() { // finish the job once the CLI has seen it RUNNING
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if l, err := c.d.ListJobs(context.Background()); err == nil && len(l.Jobs) == 1 && c.d.DetailsServed(l.Jobs[0].ID) > 0 {
				c.d.SetState(l.Jobs[0].ID, "FINISHED")
				return
			}
		}
	}()
	r := gofl(t, nil, "submit", "--wait", "--jobmanager", c.addr, "../../scripts/jobs/wordcount-shape.json")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "RUNNING") || !strings.Contains(r.stdout, "FINISHED") {
		t.Fatalf("progress not printed:\n%s", r.stdout)
	}
}

// A job that keeps failing shows each failure on the attached client while
// it restarts, not only once it ended.
func TestSubmitWaitShowsFailuresWhileRestarting(t *testing.T) {
	c := newCluster(t)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		step := 0
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			l, err := c.d.ListJobs(context.Background())
			if err != nil || len(l.Jobs) != 1 {
				continue
			}
			id := l.Jobs[0].ID
			switch served := c.d.DetailsServed(id); {
			case step == 0 && served > 0:
				c.d.AddException(id, restapi.ExceptionEntry{ExceptionName: "TaskFailure", Stacktrace: "disk full on /data\nstack...",
					Timestamp: time.Now().UnixMilli(), TaskName: "Count (1/2)", Location: "tm-1", FailureType: "recoverable"})
				c.d.SetState(id, "RESTARTING")
				step = 1
			case step == 1 && served > 3:
				c.d.SetState(id, "CANCELED")
				return
			}
		}
	}()
	r := gofl(t, nil, "submit", "--wait", "--jobmanager", c.addr, "../../scripts/jobs/wordcount-shape.json")
	if r.code == 0 {
		t.Fatalf("a CANCELED job exited 0\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "failure in Count (1/2) on tm-1: disk full on /data") || strings.Count(r.stderr, "disk full") != 2 {
		t.Fatalf("the failure was not shown once while restarting (and as the root cause at the end):\n%s", r.stderr)
	}
}

func TestSubmitRejectsBadFiles(t *testing.T) {
	c := newCluster(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct{ file, want string }{
		{filepath.Join(dir, "missing.json"), "no such file"},
		{write("broken.json", `{"name": `), "is not a JobGraph in protobuf JSON"},
		{write("invalid.json", `{"name": "x", "type": "JOB_TYPE_BATCH"}`), "no vertices"},
	} {
		r := gofl(t, nil, "submit", "--jobmanager", c.addr, tc.file)
		if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want failure mentioning %q", tc.file, r.code, r.stderr, tc.want)
		}
	}
}
