package jobmanager_test

// High availability end to end (issue #11): JobManager processes share a
// real ZooKeeper and a file:// storageDir; the leader is killed -9 while
// the exactly-once keyed-counts job runs, a standby takes over and the job
// resumes from its latest checkpoint.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/ha"
	"github.com/gofl/gofl/ha/zktest"
	"github.com/gofl/gofl/jobgraph"
)

// haCluster is JobManager processes of one HA session cluster on the local
// provider, the test's own view of its HA services, and a client of the
// current leader.
type haCluster struct {
	*cluster
	settings map[string]string
	dir      string
	services ha.Services
	mu       sync.Mutex
	jms      []*haJobManager
}

type haJobManager struct {
	cmd  *exec.Cmd
	rest string
	log  string
	done chan struct{}
}

var jmAddrLine = regexp.MustCompile(`JobManager RPC at (\S+), REST at http://(\S+)`)

func newHACluster(t *testing.T, extra map[string]string) *haCluster {
	quorum := zktest.Quorum(t)
	dir := t.TempDir()
	id := uniqueID("ha")
	settings := map[string]string{
		"high-availability.type":             "zookeeper",
		"high-availability.zookeeper.quorum": quorum,
		"high-availability.cluster-id":       "/" + id,
		"high-availability.storageDir":       "file://" + filepath.Join(dir, "ha"),
		"jobmanager.rpc.address":             "127.0.0.1", "jobmanager.rpc.port": "0",
		"rest.address": "127.0.0.1", "rest.port": "0",
		// Every JobManager serves the blobs the leader took: one directory.
		"blob.storage.directory":        filepath.Join(dir, "blobs"),
		"deployment.provider":           "local",
		"deployment.cluster-id":         id,
		"provider.local.dir":            filepath.Join(dir, "local"),
		"taskmanager.numberOfTaskSlots": "2",
		"heartbeat.interval":            "100 ms", "heartbeat.timeout": "10 s",
		"slot.idle.timeout": "1 s",
	}
	for k, v := range extra {
		settings[k] = v
	}
	cfg, err := conf.FromMap(settings)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	services, err := ha.New(ctx, ha.ConfigFromConf(cfg, zerolog.Nop()))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	h := &haCluster{cluster: &cluster{t: t, cfg: cfg, ctx: ctx}, settings: settings, dir: dir, services: services}
	t.Cleanup(func() {
		// Runs after every process's own cleanup killed it.
		h.mu.Lock()
		jms := h.jms
		h.mu.Unlock()
		killLocalTaskManagers(filepath.Join(dir, "local", "clusters", id))
		_ = services.Close()
		cancel()
		if t.Failed() {
			for _, jm := range jms {
				b, _ := os.ReadFile(jm.log)
				t.Logf("log of JobManager %s:\n%s", jm.rest, tailLines(string(b), 60))
			}
		}
	})
	return h
}

// killLocalTaskManagers kills the TaskManagers a killed leader left behind
// (process groups with a pid file under the cluster directory).
func killLocalTaskManagers(clusterDir string) {
	entries, _ := os.ReadDir(clusterDir)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(clusterDir, e.Name(), "pid"))
		if err != nil {
			continue
		}
		var pid int
		if _, err := fmt.Sscan(string(b), &pid); err == nil && pid > 0 {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
}

func tailLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// startJobManager starts one `gofl jobmanager` process of the cluster and
// waits until it serves.
func (h *haCluster) startJobManager() *haJobManager {
	h.t.Helper()
	jm := startJobManagerProcess(h.t, h.dir, h.settings)
	h.mu.Lock()
	h.jms = append(h.jms, jm)
	h.mu.Unlock()
	return jm
}

// startJobManagerProcess runs `gofl jobmanager -D k=v...` in dir, logging
// to a file there, and waits until it prints its addresses. The test's
// cleanup kills it if it still runs.
func startJobManagerProcess(t testing.TB, dir string, settings map[string]string) *haJobManager {
	t.Helper()
	var args []string
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-D", k+"="+settings[k])
	}
	logPath := filepath.Join(dir, fmt.Sprintf("jobmanager-%d.log", time.Now().UnixNano()))
	lf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goflBinary, append([]string{"jobmanager"}, args...)...)
	cmd.Dir = dir
	cmd.Stderr = lf
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	jm := &haJobManager{cmd: cmd, log: logPath, done: make(chan struct{})}
	addr := make(chan string, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := jmAddrLine.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[2]
				break
			}
		}
		_, _ = io.Copy(lf, out)
	}()
	go func() { <-copied; _ = cmd.Wait(); lf.Close(); close(jm.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-jm.done
	})
	select {
	case jm.rest = <-addr:
	case <-jm.done:
		b, _ := os.ReadFile(logPath)
		t.Fatalf("JobManager exited before serving:\n%s", tailLines(string(b), 40))
	case <-time.After(60 * time.Second):
		t.Fatal("JobManager did not start in 60 s")
	}
	return jm
}

// leader waits until a JobManager other than not leads, points the
// cluster's client at it and returns it.
func (h *haCluster) leader(not *haJobManager) *haJobManager {
	h.t.Helper()
	var found *haJobManager
	h.eventually(60*time.Second, func() error {
		ctx, cancel := context.WithTimeout(h.ctx, time.Second)
		defer cancel()
		info, err := ha.RetrieveLeader(ctx, h.services, ha.RestServerComponent)
		if err != nil {
			return err
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, jm := range h.jms {
			if jm.rest == info.Address && jm != not {
				found = jm
				return nil
			}
		}
		return fmt.Errorf("the leader is %s", info.Address)
	})
	c, err := client.New(found.rest)
	if err != nil {
		h.t.Fatal(err)
	}
	h.client = c
	return found
}

func (h *haCluster) kill9(jm *haJobManager) {
	h.t.Helper()
	if err := jm.cmd.Process.Kill(); err != nil {
		h.t.Fatal(err)
	}
	<-jm.done
}

// TestHAJobManagerFailover kills the leading JobManager -9 three times
// while keyed-counts runs with checkpoints every 200 ms; each time the
// standby takes over, the job resumes from its latest checkpoint, and the
// committed output is exact. Then, with the job finished, one more forced
// leadership change must not run it again (FLINK-39704).
func TestHAJobManagerFailover(t *testing.T) {
	parallel(t)
	h := newHACluster(t, checkpointSettings("file://"+filepath.Join(t.TempDir(), "checkpoints")))
	h.startJobManager()
	h.startJobManager()
	leader := h.leader(nil)
	out := filepath.Join(t.TempDir(), "out")
	const count, keys = 24000, 16
	submitted := time.Now()
	id := h.keyedCountsJob(2, count, keys, 1000, out)
	t.Logf("submitted job %s to %s in %v", id, leader.rest, time.Since(submitted))
	h.waitFor(id, 60*time.Second, "RUNNING")
	var last int64
	for round := 0; round < 3; round++ {
		last = h.waitCheckpointAfter(id, last, 60*time.Second)
		t.Logf("round %d: kill -9 the leader %s after checkpoint %d", round, leader.rest, last)
		killed := time.Now()
		h.kill9(leader)
		h.startJobManager() // the next standby
		leader = h.leader(leader)
		h.waitFor(id, 60*time.Second, "RUNNING")
		running := time.Since(killed)
		st, err := h.client.JobCheckpoints(h.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Latest.Restored == nil || st.Latest.Restored.ID < last {
			t.Fatalf("round %d: the new leader's job restored %+v, want checkpoint %d or later", round, st.Latest.Restored, last)
		}
		next := h.waitCheckpointAfter(id, st.Latest.Restored.ID, 60*time.Second)
		t.Logf("round %d: job RUNNING on the new leader %s %v after the kill (restored checkpoint %d); checkpoint %d completed %v after the kill",
			round, leader.rest, running.Round(time.Millisecond), st.Latest.Restored.ID, next, time.Since(killed).Round(time.Millisecond))
		last = next
	}
	h.waitFor(id, 3*time.Minute, "FINISHED")
	checkKeyedCounts(t, out, count, keys)

	// Terminal jobs stay terminal: force a leadership change.
	h.eventually(30*time.Second, func() error {
		ids, err := h.services.JobGraphStore().JobIDs(h.ctx)
		if err != nil || len(ids) > 0 {
			return fmt.Errorf("job graphs still stored: %v %v", ids, err)
		}
		return nil
	})
	// The entry turns clean after the graph went (cleanupTerminal).
	h.eventually(30*time.Second, func() error {
		if ok, err := h.services.JobResultStore().HasCleanJobResultEntry(h.ctx, id); err != nil || !ok {
			return fmt.Errorf("job %s has no clean job result entry (%v)", id, err)
		}
		return nil
	})
	h.kill9(leader)
	leader = h.leader(leader)
	jobs, err := h.client.ListJobs(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Jobs {
		if j.ID == id {
			t.Fatalf("the new leader knows the finished job %s again: %s", id, j.Status)
		}
	}
	checkKeyedCounts(t, out, count, keys)
}

// TestHAZooKeeperUnreachableAtStart: a JobManager whose quorum does not
// answer exits with an error that names the quorum.
func TestHAZooKeeperUnreachableAtStart(t *testing.T) {
	parallel(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	quorum := l.Addr().String()
	l.Close() // nothing listens there now
	dir := t.TempDir()
	cmd := exec.Command(goflBinary, "jobmanager", "-D", "high-availability.type=zookeeper",
		"-D", "high-availability.zookeeper.quorum="+quorum, "-D", "high-availability.storageDir=file://"+dir,
		"-D", "high-availability.zookeeper.client.connection-timeout=1 s",
		"-D", "jobmanager.rpc.port=0", "-D", "rest.port=0", "-D", "jobmanager.rpc.address=127.0.0.1", "-D", "rest.address=127.0.0.1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the JobManager still runs 60 s after start with ZooKeeper unreachable:\n%s", out.String())
	}
	if err == nil {
		t.Fatalf("the JobManager exited 0 with ZooKeeper unreachable:\n%s", out.String())
	}
	for _, want := range []string{quorum, "zookeeper unavailable"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the error does not mention %q:\n%s", want, out.String())
		}
	}
}

// TestHASubmissionLatency submits the same small jobs to a JobManager
// process with HA and to one without, and logs the median submission
// latency of each; every job submitted with HA is in the JobGraphStore by
// the time its submission is acknowledged.
func TestHASubmissionLatency(t *testing.T) {
	parallel(t)
	h := newHACluster(t, map[string]string{"deployment.provider": "standalone"})
	h.startJobManager()
	h.leader(nil)
	noneSettings := map[string]string{}
	for k, v := range h.settings {
		if !strings.HasPrefix(k, "high-availability.") {
			noneSettings[k] = v
		}
	}
	none := startJobManagerProcess(t, t.TempDir(), noneSettings)
	noneClient, err := client.New(none.rest)
	if err != nil {
		t.Fatal(err)
	}
	const n = 15
	median := func(c *client.Client, check func(id string)) time.Duration {
		var ds []time.Duration
		for i := 0; i < n; i++ {
			jg := twoVertexJob(1, jobgraph.Pointwise, jobgraph.Pipelined, "sleep", `{"duration":"1s"}`, nil)
			start := time.Now()
			id, err := c.SubmitJob(h.ctx, jg)
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, time.Since(start))
			check(id)
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[n/2]
	}
	withHA := median(h.client, func(id string) {
		if _, err := h.services.JobGraphStore().RecoverJobGraph(h.ctx, id); err != nil {
			t.Fatalf("job %s was acknowledged but its graph is not stored: %v", id, err)
		}
	})
	without := median(noneClient, func(string) {})
	t.Logf("median submission latency over %d jobs: high-availability zookeeper %v, none %v", n, withHA, without)
}

// startTaskManager runs a standalone `gofl taskmanager` process with the
// cluster's HA settings: it finds the ResourceManager through leader
// retrieval. The test's cleanup kills it.
func (h *haCluster) startTaskManager(id string, slots int) {
	h.t.Helper()
	// Its work dir in the test's: the cleanup kills it, so it cannot
	// remove a temporary one.
	args := []string{"taskmanager", "-D", fmt.Sprintf("taskmanager.numberOfTaskSlots=%d", slots), "-D", "taskmanager.rpc.port=0",
		"-D", "taskmanager.resource-id=" + id, "-D", "taskmanager.host=127.0.0.1",
		"-D", "taskmanager.work.dir=" + filepath.Join(h.dir, id+"-work")}
	for k, v := range h.settings {
		if !strings.HasPrefix(k, "taskmanager.") && k != "rest.port" && k != "blob.storage.directory" {
			args = append(args, "-D", k+"="+v)
		}
	}
	logPath := filepath.Join(h.dir, id+".log")
	lf, err := os.Create(logPath)
	if err != nil {
		h.t.Fatal(err)
	}
	cmd := exec.Command(goflBinary, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); lf.Close(); close(done) }()
	h.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if h.t.Failed() {
			b, _ := os.ReadFile(logPath)
			h.t.Logf("log of TaskManager %s:\n%s", id, tailLines(string(b), 30))
		}
	})
}

// TestHAStandaloneTaskManagersFollowTheLeader: standalone TaskManagers find
// the ResourceManager through leader retrieval; when the leader is killed
// -9 they register at the new one at once, and the job resumes on them
// from its latest checkpoint with exact output.
func TestHAStandaloneTaskManagersFollowTheLeader(t *testing.T) {
	parallel(t)
	settings := checkpointSettings("file://" + filepath.Join(t.TempDir(), "checkpoints"))
	settings["deployment.provider"] = "standalone"
	// Far beyond the test's own waits: the old leader's tasks must go
	// because the TaskManagers follow the leader, not by a timeout.
	settings["heartbeat.timeout"] = "60 s"
	h := newHACluster(t, settings)
	h.startJobManager()
	h.startJobManager()
	leader := h.leader(nil)
	h.startTaskManager("tm-a", 2)
	h.startTaskManager("tm-b", 2)
	h.waitForTaskManagers(2)
	out := filepath.Join(t.TempDir(), "out")
	const count, keys = 12000, 8
	id := h.keyedCountsJob(2, count, keys, 1000, out)
	h.waitFor(id, 60*time.Second, "RUNNING")
	last := h.waitCheckpointAfter(id, 0, 60*time.Second)
	killed := time.Now()
	h.kill9(leader)
	leader = h.leader(leader)
	h.waitForTaskManagers(2)
	registered := time.Since(killed)
	h.waitFor(id, 60*time.Second, "RUNNING")
	running := time.Since(killed)
	// The TaskManagers cancel the old leader's tasks at once and offer
	// their kept slots to the new leader's JobMaster, so the recovered job
	// runs and checkpoints long before the old JobMaster's heartbeat
	// timeout (60 s) would free them.
	next := h.waitCheckpointAfter(id, last, 30*time.Second)
	t.Logf("the TaskManagers registered at the new leader %v after the kill; job RUNNING after %v; checkpoint %d (after %d) completed after %v",
		registered.Round(time.Millisecond), running.Round(time.Millisecond), next, last, time.Since(killed).Round(time.Millisecond))
	h.waitFor(id, 3*time.Minute, "FINISHED")
	checkKeyedCounts(t, out, count, keys)
}

// TestHAStoppedLeaderIsFenced stops the leader (kill -STOP) until its
// ZooKeeper session expires and the standby took over and checkpointed,
// then resumes it (kill -CONT): the old leader steps down (its REST
// redirects to the new leader) and the output stays exact.
func TestHAStoppedLeaderIsFenced(t *testing.T) {
	parallel(t)
	h := newHACluster(t, checkpointSettings("file://"+filepath.Join(t.TempDir(), "checkpoints")))
	h.startJobManager()
	h.startJobManager()
	old := h.leader(nil)
	out := filepath.Join(t.TempDir(), "out")
	const count, keys = 16000, 8
	id := h.keyedCountsJob(2, count, keys, 1000, out)
	h.waitFor(id, 60*time.Second, "RUNNING")
	last := h.waitCheckpointAfter(id, 0, 60*time.Second)
	if err := old.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = old.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	h.leader(old)
	h.waitFor(id, 60*time.Second, "RUNNING")
	next := h.waitCheckpointAfter(id, last, 60*time.Second)
	t.Logf("the standby took over and completed checkpoint %d (the stopped leader's last: %d)", next, last)
	if err := old.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	noRedirect := &http.Client{Timeout: 5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	h.eventually(60*time.Second, func() error {
		resp, err := noRedirect.Get("http://" + old.rest + "/overview")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTemporaryRedirect {
			return fmt.Errorf("the resumed old leader answers %s", resp.Status)
		}
		return nil
	})
	h.waitFor(id, 3*time.Minute, "FINISHED")
	checkKeyedCounts(t, out, count, keys)
}
