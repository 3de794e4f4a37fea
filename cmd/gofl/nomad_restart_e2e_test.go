package main

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/ha/zktest"
)

var nomadPerJobLine = regexp.MustCompile(`Per-job cluster (\S+) \(provider nomad\) deployed in .*, REST at http://(\S+)`)

// nomadRestartRun starts an attached keyed-counts per-job run on the Nomad
// test agent with ZooKeeper HA and 2 JobManager attempts; it returns once
// the job runs.
func nomadRestartRun(t *testing.T, count int, out string) (*e2e, *liveRun, nomadAgent, string, *client.Client, string) {
	t.Helper()
	quorum := zktest.Quorum(t)
	e := newE2E(t)
	startNomadAgent(t, e)
	na := newNomadAgent(t, strings.TrimPrefix(e.extraArg[len(e.extraArg)-1], "provider.nomad.address="), false)
	var settings []string
	for i, s := range restartSettings(e, quorum, 2) {
		if i%2 == 1 && strings.HasPrefix(s, "provider.local.jobmanager.attempts=") {
			s = "provider.nomad.jobmanager.attempts=2"
		}
		settings = append(settings, s)
	}
	// e.start adds no provider settings (e.run does).
	settings = append(settings, e.extraArg...)
	if e.staging != "" {
		settings = append(settings, "-D", "staging.dir="+e.staging)
	}
	args := append([]string{"run", "-m", "per-job", "-t", "nomad"}, settings...)
	args = append(args, testJobBinaryForCLI(t), "keyed-counts", "--count", strconv.Itoa(count), "--keys", "8", "--rate", "1500", "--output", out)
	r := e.start(args...)
	m := nomadPerJobLine.FindStringSubmatch(r.waitLine(t, nomadPerJobLine, 2*time.Minute))
	id := submitLine.FindStringSubmatch(r.waitLine(t, submitLine, time.Minute))[1]
	cl, err := client.New(m[2])
	if err != nil {
		t.Fatal(err)
	}
	return e, r, na, m[1], cl, id
}

// killNomadJobManager kill -9s the JobManager process of a Nomad cluster
// once a checkpoint after `after` completed, and returns that checkpoint.
func killNomadJobManager(t *testing.T, cluster string, cl *client.Client, job string, after int64) int64 {
	t.Helper()
	done := waitCheckpointAfter(t, cl, job, after)
	pids := processesOfCluster(cluster, "\x00jobmanager\x00") // the role argument, not -D jobmanager.*
	if len(pids) != 1 {
		t.Fatalf("JobManager processes of cluster %s: %v, want one", cluster, pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	return done
}

// TestNomadPerJobJobManagerRestartE2E kills -9 the JobManager of a per-job
// cluster on the Nomad test agent: the agent restarts the task in place
// (restart policy), the JobManager recovers the job from its latest
// checkpoint, the attached run follows over the gap, the committed output
// is exact and nothing of the cluster is left.
func TestNomadPerJobJobManagerRestartE2E(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	const count = 30000
	_, r, na, cluster, cl, job := nomadRestartRun(t, count, out)
	last := killNomadJobManager(t, cluster, cl, job, 0)
	waitFor(t, 2*time.Minute, func() error {
		st, err := cl.JobCheckpoints(context.Background(), job)
		if err != nil {
			return err
		}
		if st.Latest.Restored == nil {
			return fmt.Errorf("not restored yet")
		}
		if st.Latest.Restored.ID < last {
			return fmt.Errorf("restored checkpoint %d, want %d or later", st.Latest.Restored.ID, last)
		}
		return nil
	})
	r.waitLine(t, failoverLine, time.Minute)
	if code := r.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("gofl run: exit %d\n%s", code, r.output())
	}
	checkKeyedCountsOutput(t, out, count, 8)
	na.waitClusterGone(t, cluster)
}

// TestNomadPerJobJobManagerAttemptsExhaustedE2E kills the JobManager on
// both of its attempts: the run fails with a message naming the cluster's
// end, no allocation or process of the cluster is left, and its HA data
// (znode and storageDir directory, there before the last kill) is gone.
func TestNomadPerJobJobManagerAttemptsExhaustedE2E(t *testing.T) {
	e, r, na, cluster, cl, job := nomadRestartRun(t, 1_000_000, filepath.Join(t.TempDir(), "out"))
	last := killNomadJobManager(t, cluster, cl, job, 0)
	r.waitLine(t, failoverLine, 2*time.Minute)
	quorum := zktest.Quorum(t)
	znode, dir := checkHAData(t, e, quorum, cluster, job)
	killNomadJobManager(t, cluster, cl, job, last)
	code := r.wait(t, 2*time.Minute)
	if out := r.output(); code == 0 || !strings.Contains(out, "attempt 2 of 2") || !strings.Contains(out, "provider.nomad.jobmanager.attempts") {
		t.Fatalf("gofl run after the last attempt's kill: exit %d\n%s", code, out)
	}
	t.Logf("gofl run after the last attempt's kill: exit %d\n%s", code, r.output())
	na.waitClusterGone(t, cluster)
	// Out of attempts: the cluster's HA data goes with it.
	waitHADataGone(t, quorum, znode, dir)
}
