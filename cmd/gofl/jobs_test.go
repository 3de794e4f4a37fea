package main

import (
	"context"
	"net"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofl/gofl/jobmanager/rest"
	"github.com/gofl/gofl/jobmanager/rest/resttest"
	"github.com/gofl/gofl/rpc/restapi"
)

// cluster is the real REST handler over an in-memory Dispatcher; now is its
// clock in epoch milliseconds.
type cluster struct {
	d    *resttest.Dispatcher
	addr string // HOST:PORT
	now  atomic.Int64
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{d: resttest.NewDispatcher()}
	c.now.Store(time.Date(2024, 5, 1, 12, 0, 0, 0, time.Local).UnixMilli())
	c.d.SetClock(func() time.Time { return time.UnixMilli(c.now.Load()) })
	srv := resttest.NewServer(t, c.d, rest.Options{})
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	c.addr = u.Host
	return c
}

func (c *cluster) submit(t *testing.T, id, name string) {
	t.Helper()
	g := resttest.Wordcount(id)
	g.Name = name
	if _, err := c.d.SubmitJob(context.Background(), g); err != nil {
		t.Fatal(err)
	}
}

func TestListJobs(t *testing.T) {
	c := newCluster(t)
	c.submit(t, "aaaa", "first")
	c.now.Add(60_000)
	c.submit(t, "bbbb", "second job")
	c.now.Add(83_000)
	c.d.SetState("aaaa", "FINISHED")

	r := gofl(t, nil, "list", "--jobmanager", c.addr)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 3 || !regexp.MustCompile(`^JOB ID\s+NAME\s+STATE\s+START\s+DURATION\s+TASKS$`).MatchString(lines[0]) {
		t.Fatalf("output:\n%s", r.stdout)
	}
	fields := func(l string) []string { return regexp.MustCompile(`\s{2,}`).Split(l, -1) }
	// Newest first; tasks are running/total.
	want := [][]string{
		{"bbbb", "second job", "RUNNING", "2024-05-01 12:01:00", "1m23s", "7/7"},
		{"aaaa", "first", "FINISHED", "2024-05-01 12:00:00", "2m23s", "0/7"},
	}
	for i, w := range want {
		if got := fields(lines[i+1]); strings.Join(got, "|") != strings.Join(w, "|") {
			t.Errorf("row %d = %q; want %q", i, got, w)
		}
	}
	if r.stderr != "" {
		t.Errorf("stderr = %q", r.stderr)
	}
}

func TestListNoJobsAndConfiguredAddress(t *testing.T) {
	c := newCluster(t)
	host, port, _ := net.SplitHostPort(c.addr)
	// The address comes from rest.address and rest.port when --jobmanager is absent.
	r := gofl(t, []string{"GOFL_REST_PORT=" + port}, "list", "-D", "rest.address="+host)
	if r.code != 0 || r.stdout != "No jobs.\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = gofl(t, nil, "-m", "http://"+c.addr, "list")
	if r.code == 0 {
		t.Errorf("-m before the command name should not be a global flag; got exit 0")
	}
	r = gofl(t, nil, "list", "-m", "http://"+c.addr)
	if r.code != 0 || r.stdout != "No jobs.\n" {
		t.Errorf("-m URL: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestInfo(t *testing.T) {
	c := newCluster(t)
	c.submit(t, "0000000000000000000000000000a001", "wordcount")
	c.now.Add(5_500)
	c.d.AddException("0000000000000000000000000000a001", restapi.ExceptionEntry{ExceptionName: "OldFailure", Stacktrace: "old", Timestamp: c.now.Load()})
	c.now.Add(1_000)
	c.d.AddException("0000000000000000000000000000a001", restapi.ExceptionEntry{ExceptionName: "TaskFailure", Stacktrace: "panic: boom\ngoroutine 7", Timestamp: c.now.Load(),
		TaskName: "Count (2/4)", Location: "tm-1", FailureType: "RECOVERABLE"})

	r := gofl(t, nil, "info", "--jobmanager", c.addr, "--exceptions", "1", "0000000000000000000000000000a001")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{
		"Job 0000000000000000000000000000a001 (wordcount)\n",
		"  State:    RUNNING\n",
		"  Type:     STREAMING\n",
		"  Started:  2024-05-01 12:00:00\n",
		"  Duration: 7s\n",
		"Exceptions (newest 1 of 2):\n  2024-05-01 12:00:06  TaskFailure in Count (2/4) at tm-1 [RECOVERABLE]\n      panic: boom\n      goroutine 7\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	for _, re := range []string{
		`(?m)^VERTEX ID\s+NAME\s+PARALLELISM\s+STATUS\s+TASKS$`,
		`(?m)^source\s+Source: words\s+2\s+RUNNING\s+RUNNING 2$`,
		`(?m)^count\s+Count\s+4\s+RUNNING\s+RUNNING 4$`,
		`(?m)^sink\s+Sink: print\s+1\s+RUNNING\s+RUNNING 1$`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("output does not match %s:\n%s", re, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "OldFailure") {
		t.Errorf("--exceptions 1 showed the older exception:\n%s", r.stdout)
	}

	c.submit(t, "0000000000000000000000000000a002", "quiet")
	r = gofl(t, nil, "info", "-m", c.addr, "0000000000000000000000000000a002")
	if r.code != 0 || !strings.Contains(r.stdout, "No exceptions.") {
		t.Errorf("exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
}

func TestFormatTaskCounts(t *testing.T) {
	got := formatTaskCounts(map[string]int{"FINISHED": 1, "RUNNING": 3, "CREATED": 0, "WEIRD": 2})
	if want := "RUNNING 3, FINISHED 1, WEIRD 2"; got != want {
		t.Errorf("formatTaskCounts = %q; want %q", got, want)
	}
	if got := formatTaskCounts(nil); got != "-" {
		t.Errorf("formatTaskCounts(nil) = %q", got)
	}
}

func TestCancel(t *testing.T) {
	c := newCluster(t)
	c.submit(t, "0000000000000000000000000000a001", "wordcount")
	r := gofl(t, nil, "cancel", "--jobmanager", c.addr, "0000000000000000000000000000a001")
	if r.code != 0 || r.stdout != "Cancelling job 0000000000000000000000000000a001\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	d, err := c.d.JobDetails(context.Background(), "0000000000000000000000000000a001")
	if err != nil || d.State != "CANCELLING" {
		t.Errorf("state = %q, %v", d.State, err)
	}

	c.d.CancelImmediately()
	c.submit(t, "0000000000000000000000000000a002", "wordcount")
	r = gofl(t, nil, "cancel", "--wait", "-m", c.addr, "0000000000000000000000000000a002")
	if r.code != 0 || r.stdout != "Cancelling job 0000000000000000000000000000a002\nCancelled job 0000000000000000000000000000a002\n" {
		t.Errorf("--wait: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	r = gofl(t, nil, "cancel", "-m", c.addr, "0000000000000000000000000000a002")
	if r.code == 0 || !strings.Contains(r.stderr, "gofl: job 0000000000000000000000000000a002 cannot be cancelled: job 0000000000000000000000000000a002 is CANCELED") {
		t.Errorf("cancel a cancelled job: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestJobCommandErrors(t *testing.T) {
	c := newCluster(t)
	for _, args := range [][]string{
		{"info", "-m", c.addr, "0000000000000000000000000000dead"},
		{"cancel", "-m", c.addr, "0000000000000000000000000000dead"},
	} {
		r := gofl(t, nil, args...)
		if r.code == 0 || r.stderr != "gofl: job 0000000000000000000000000000dead not found\n" {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	// A malformed job ID is refused, and the message says what a job ID is.
	if r := gofl(t, nil, "info", "-m", c.addr, "../x"); r.code == 0 || !strings.Contains(r.stderr, "32 lowercase hexadecimal") {
		t.Errorf("info ../x: exit %d, stderr %q", r.code, r.stderr)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	for _, args := range [][]string{{"list", "-m", dead}, {"info", "-m", dead, "x"}, {"cancel", "-m", dead, "x"}} {
		r := gofl(t, nil, args...)
		if r.code == 0 || !strings.Contains(r.stderr, "cannot reach the JobManager at "+dead) {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}

	for _, args := range [][]string{{"info", "-m", c.addr}, {"cancel", "-m", c.addr, "a", "b"}, {"list", "-m", c.addr, "extra"}} {
		r := gofl(t, nil, args...)
		if r.code == 0 || !strings.Contains(r.stderr, "see --help") {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	r := gofl(t, nil, "list", "-m", "not an address")
	if r.code == 0 || !strings.Contains(r.stderr, `"not an address"`) {
		t.Errorf("bad address: exit %d, stderr %q", r.code, r.stderr)
	}
}
