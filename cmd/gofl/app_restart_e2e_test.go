package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/ha/zktest"
	"github.com/gofl/gofl/jobgraph"
)

var appLine = regexp.MustCompile(`Application cluster (\S+) \(provider local\) deployed in .*, REST at http://(\S+)`)

// appJobs returns the application's jobs once its driver submitted them.
func appJobs(t *testing.T, cl *client.Client) []string {
	t.Helper()
	var jobs []string
	waitFor(t, 2*time.Minute, func() error {
		st, err := cl.Application(context.Background())
		if err != nil {
			return err
		}
		if len(st.Jobs) == 0 {
			return fmt.Errorf("application %s, no job yet", st.State)
		}
		jobs = st.Jobs
		return nil
	})
	return jobs
}

// TestApplicationJobManagerRestartE2E kills -9 the JobManager of an
// application cluster with ZooKeeper HA mid-job: the local provider
// restarts it, its driver runs again and attaches to the recovered job
// (the job's ID is fixed by the cluster ID) instead of submitting a second
// one, the job resumes from its latest checkpoint, the attached CLI
// follows over the gap, and the committed output is exact.
func TestApplicationJobManagerRestartE2E(t *testing.T) {
	quorum := zktest.Quorum(t)
	e := newE2E(t)
	out := filepath.Join(e.home, "out")
	const count, keys = 30000, 8
	args := append([]string{"run", "-m", "application", "-t", "local"}, restartSettings(e, quorum, 2)...)
	args = append(args, testJobBinaryForCLI(t), "keyed-counts", "--count", strconv.Itoa(count), "--keys", strconv.Itoa(keys), "--rate", "1500", "--output", out)
	r := e.start(args...)
	m := appLine.FindStringSubmatch(r.waitLine(t, appLine, 2*time.Minute))
	cluster := m[1]
	cl, err := client.New(m[2])
	if err != nil {
		t.Fatal(err)
	}
	jobs := appJobs(t, cl)
	want := jobgraph.ApplicationJobID("/"+cluster, 0)
	if !slices.Equal(jobs, []string{want}) {
		t.Fatalf("application jobs %v, want the fixed ID [%s]", jobs, want)
	}
	last, killed := killJobManager(t, e, cluster, cl, want, 0)
	running, restored := waitRecovered(t, cl, want, last, killed)
	t.Logf("application mode: kill -9 after checkpoint %d: job RUNNING again %v after the kill, restored checkpoint %d (provider restart, measured under load)",
		last, running.Round(time.Millisecond), restored)
	// Exactly one job: the restarted driver attached, it did not submit.
	if jobs := appJobs(t, cl); !slices.Equal(jobs, []string{want}) {
		t.Fatalf("after the restart the application has jobs %v, want [%s]", jobs, want)
	}
	if l, err := cl.ListJobs(context.Background()); err != nil || len(l.Jobs) != 1 || l.Jobs[0].ID != want {
		t.Fatalf("after the restart the JobManager lists %+v (%v), want only %s", l, err, want)
	}
	r.waitLine(t, failoverLine, time.Minute)
	if code := r.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("gofl run: exit %d\n%s", code, r.output())
	}
	checkKeyedCountsOutput(t, out, count, keys)
}
