package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
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

// restartSettings are the -D flags of a per-job cluster on the local
// provider with ZooKeeper HA, 200 ms checkpoints, and attempts JobManager
// starts.
func restartSettings(e *e2e, quorum string, attempts int) []string {
	var args []string
	for k, v := range map[string]string{
		"high-availability.type":                "zookeeper",
		"high-availability.zookeeper.quorum":    quorum,
		"high-availability.storageDir":          "file://" + filepath.Join(e.home, "ha"),
		"provider.local.jobmanager.attempts":    strconv.Itoa(attempts),
		"execution.checkpointing.interval":      "200 ms",
		"state.checkpoints.dir":                 "file://" + filepath.Join(e.home, "checkpoints"),
		"restart-strategy.type":                 "fixed-delay",
		"restart-strategy.fixed-delay.attempts": "50",
		"restart-strategy.fixed-delay.delay":    "100 ms",
	} {
		args = append(args, "-D", k+"="+v)
	}
	return args
}

var (
	perJobLine   = regexp.MustCompile(`Per-job cluster (\S+) \(provider local\) deployed in .*, REST at http://(\S+)`)
	submitLine   = regexp.MustCompile(`Job ([0-9a-f]{32}) \(.*\) submitted`)
	failoverLine = regexp.MustCompile(`JobManager failed over`)
)

// perJobRun starts an attached keyed-counts per-job run and returns it
// with its cluster ID, REST client and job ID once the job runs.
func perJobRun(t *testing.T, e *e2e, settings []string, count, keys int, out string) (*liveRun, string, *client.Client, string) {
	t.Helper()
	args := append([]string{"run", "-m", "per-job", "-t", "local"}, settings...)
	args = append(args, testJobBinaryForCLI(t), "keyed-counts", "--count", strconv.Itoa(count), "--keys", strconv.Itoa(keys), "--rate", "1500", "--output", out)
	r := e.start(args...)
	m := perJobLine.FindStringSubmatch(r.waitLine(t, perJobLine, 2*time.Minute))
	id := submitLine.FindStringSubmatch(r.waitLine(t, submitLine, time.Minute))[1]
	cl, err := client.New(m[2])
	if err != nil {
		t.Fatal(err)
	}
	return r, m[1], cl, id
}

// waitCheckpointAfter waits for a completed checkpoint of job after
// `after` and returns it.
func waitCheckpointAfter(t *testing.T, cl *client.Client, job string, after int64) int64 {
	t.Helper()
	var done int64
	waitFor(t, 2*time.Minute, func() error {
		st, err := cl.JobCheckpoints(context.Background(), job)
		if err != nil {
			return err
		}
		if st.Latest.Completed == nil || st.Latest.Completed.ID <= after {
			return fmt.Errorf("no checkpoint after %d yet", after)
		}
		done = st.Latest.Completed.ID
		return nil
	})
	return done
}

// waitRecovered waits until job runs again after the JobManager kill at
// killed, checks that it restored checkpoint last or a later one, and
// returns the time from the kill to RUNNING and the checkpoint restored.
func waitRecovered(t *testing.T, cl *client.Client, job string, last int64, killed time.Time) (time.Duration, int64) {
	t.Helper()
	waitFor(t, 2*time.Minute, func() error {
		d, err := cl.JobDetails(context.Background(), job)
		if err != nil {
			return err
		}
		if d.State != "RUNNING" {
			return fmt.Errorf("job %s", d.State)
		}
		return nil
	})
	running := time.Since(killed)
	st, err := cl.JobCheckpoints(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if st.Latest.Restored == nil || st.Latest.Restored.ID < last {
		t.Fatalf("the restarted JobManager's job restored %+v, want checkpoint %d or later", st.Latest.Restored, last)
	}
	return running, st.Latest.Restored.ID
}

// killJobManager kill -9s the cluster's JobManager once a checkpoint
// after `after` completed; it returns that checkpoint and the kill's time.
func killJobManager(t *testing.T, e *e2e, cluster string, cl *client.Client, job string, after int64) (int64, time.Time) {
	t.Helper()
	done := waitCheckpointAfter(t, cl, job, after)
	b, err := os.ReadFile(filepath.Join(e.clustersDir(), cluster, "jobmanager", "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.Fields(string(b))[0])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	return done, time.Now()
}

// TestPerJobJobManagerRestartE2E kills -9 the JobManager of a per-job
// cluster with ZooKeeper HA mid-job: the local provider restarts it on its
// ports, it recovers the job from the latest checkpoint, the attached CLI
// prints "JobManager failed over" and follows on, the committed output is
// exact, and nothing is left.
func TestPerJobJobManagerRestartE2E(t *testing.T) {
	t.Parallel()
	quorum := zktest.Quorum(t)
	e := newE2E(t)
	out := filepath.Join(e.home, "out")
	const count, keys = 30000, 8
	r, cluster, cl, job := perJobRun(t, e, restartSettings(e, quorum, 2), count, keys, out)
	last, killed := killJobManager(t, e, cluster, cl, job, 0)
	running, restored := waitRecovered(t, cl, job, last, killed)
	t.Logf("kill -9 after checkpoint %d: job RUNNING again %v after the kill, restored checkpoint %d (provider restart, measured under load)",
		last, running.Round(time.Millisecond), restored)
	r.waitLine(t, failoverLine, time.Minute)
	if code := r.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("gofl run: exit %d\n%s", code, r.output())
	}
	checkKeyedCountsOutput(t, out, count, keys)
}

// TestPerJobJobManagerAttemptsExhaustedE2E kills the JobManager on each of
// its 2 attempts: the run fails naming the attempts, and nothing is left.
func TestPerJobJobManagerAttemptsExhaustedE2E(t *testing.T) {
	t.Parallel()
	quorum := zktest.Quorum(t)
	e := newE2E(t)
	r, cluster, cl, job := perJobRun(t, e, restartSettings(e, quorum, 2), 1_000_000, 8, filepath.Join(e.home, "out"))
	last, _ := killJobManager(t, e, cluster, cl, job, 0)
	r.waitLine(t, failoverLine, 2*time.Minute)
	znode, dir := checkHAData(t, e, quorum, cluster, job)
	killJobManager(t, e, cluster, cl, job, last)
	code := r.wait(t, 2*time.Minute)
	if out := r.output(); code == 0 || !strings.Contains(out, "attempt 2 of 2") || !strings.Contains(out, "provider.local.jobmanager.attempts") {
		t.Fatalf("gofl run after the last attempt's kill: exit %d\n%s", code, out)
	}
	// Out of attempts: the cluster's HA data goes with it.
	waitHADataGone(t, quorum, znode, dir)
}

// checkHAData checks that the running job of the cluster has HA data (its
// JobGraph under the cluster's znode and storageDir directory, at e.home/ha)
// and returns the znode and the directory.
func checkHAData(t *testing.T, e *e2e, quorum, cluster, job string) (znode, dir string) {
	t.Helper()
	znode, dir = "/gofl/"+cluster, filepath.Join(e.home, "ha", cluster)
	if _, err := os.Stat(filepath.Join(dir, "jobgraphs")); err != nil || !zktest.Exists(t, quorum, znode+"/jobgraphs/"+job) {
		t.Fatalf("the running job's HA data: %s/jobgraphs: %v; znode %s/jobgraphs/%s exists: %v", dir, err, znode, job, zktest.Exists(t, quorum, znode+"/jobgraphs/"+job))
	}
	return znode, dir
}

// waitHADataGone waits until the cluster's znode and storageDir directory
// are gone.
func waitHADataGone(t *testing.T, quorum, znode, dir string) {
	t.Helper()
	waitFor(t, time.Minute, func() error {
		if zktest.Exists(t, quorum, znode) {
			return fmt.Errorf("znode %s is still there", znode)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: %v", dir, err)
		}
		return nil
	})
}

// checkKeyedCountsOutput checks keyed-counts' committed output: key k has
// exactly the lines "k 1" .. "k c(k)", each once.
func checkKeyedCountsOutput(t *testing.T, dir string, count, keys int) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "part-*"))
	seen := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l != "" {
				seen[l]++
			}
		}
	}
	bad := 0
	for k := 0; k < keys; k++ {
		for n := 1; n <= (count-k+keys-1)/keys; n++ {
			l := fmt.Sprintf("%d %d", k, n)
			if seen[l] != 1 && bad < 10 {
				bad++
				t.Errorf("line %q appears %d times, want once", l, seen[l])
			}
			delete(seen, l)
		}
	}
	if len(seen) > 0 {
		t.Errorf("%d unexpected lines", len(seen))
	}
}

// testJobBinaryForCLI builds stream/internal/testjob (once per test binary).
func testJobBinaryForCLI(t *testing.T) string {
	return builtBinary(t, "testjob", "../../stream/internal/testjob")
}
