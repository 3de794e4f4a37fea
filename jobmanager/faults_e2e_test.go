package jobmanager_test

// End-to-end fault injection (issue #9): real TaskManager and job runner
// processes are killed, stopped and frozen while a job runs, and each test
// ends by checking the job's output exactly against the test's own
// computation. The jobs (stream/internal/testjob/faults.go) are slow in a
// controlled way (a rate-limited source, a rate-limited consumer), so the
// fault lands while the tasks the test aims at run.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/rpc/restapi"
)

// faultRestart is the restart strategy of the fault tests: a handful of
// attempts, so a runtime that fails over more often than the fault
// warrants exhausts them and the job FAILS.
var faultRestart = map[string]string{
	"restart-strategy.type":                 "fixed-delay",
	"restart-strategy.fixed-delay.attempts": "5",
	"restart-strategy.fixed-delay.delay":    "200 ms",
}

func merged(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// startTaskManagerProcessWith runs `gofl taskmanager` as a child process
// with extra -D settings and returns the path of its (JSON) log.
func (c *cluster) startTaskManagerProcessWith(id string, slots int, settings map[string]string) string {
	c.t.Helper()
	host, port, _ := strings.Cut(c.jm.RPCAddress, ":")
	args := []string{"taskmanager",
		"-D", "jobmanager.rpc.address=" + host, "-D", "jobmanager.rpc.port=" + port,
		"-D", fmt.Sprintf("taskmanager.numberOfTaskSlots=%d", slots), "-D", "taskmanager.rpc.port=0",
		"-D", "taskmanager.resource-id=" + id, "-D", "taskmanager.host=127.0.0.1", "-D", "log.level=info"}
	dir := c.dir
	if dir == "" {
		dir = c.t.TempDir()
	}
	work, err := os.MkdirTemp(dir, id+"-work-")
	if err != nil {
		c.t.Fatal(err)
	}
	args = append(args, "-D", "taskmanager.work.dir="+work)
	for k, v := range settings {
		args = append(args, "-D", k+"="+v)
	}
	cmd := exec.Command(goflBinary, args...)
	logPath := filepath.Join(c.t.TempDir(), id+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	h := &tmHandle{cmd: cmd, done: make(chan error, 1), logPath: logPath}
	go func() { h.done <- cmd.Wait(); logFile.Close() }()
	c.mu.Lock()
	c.tms[id] = h
	c.mu.Unlock()
	return logPath
}

// tmPid is the pid of a TaskManager process started by the test.
func (c *cluster) tmPid(id string) int {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.tms[id]
	if h == nil || h.cmd == nil {
		c.t.Fatalf("no TaskManager process %s", id)
	}
	return h.cmd.Process.Pid
}

// parentPid reads the parent pid from /proc/<pid>/stat (0 if gone).
func parentPid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:]) // f[0] state, f[1] ppid
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// runnerOf is the job's runner process that is a child of the process tm.
func runnerOf(jobID string, tm int) int {
	for _, pid := range runnerPids(jobID) {
		if parentPid(pid) == tm {
			return pid
		}
	}
	return 0
}

// errStopPolling, wrapped in an error of poll's f, ends the polling at
// once with that error.
var errStopPolling = errors.New("polling stopped")

// poll calls f until it returns nil or timeout passed; it returns f's last
// error.
func (c *cluster) poll(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil || errors.Is(err, errStopPolling) || time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("after %v: %w", timeout, err)
			}
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// vertexID is the ID of the job's vertex whose name contains name.
func (c *cluster) vertexID(jobID, name string) string {
	c.t.Helper()
	d, err := c.client.JobDetails(c.ctx, jobID)
	if err != nil {
		c.t.Fatal(err)
	}
	return vertexNamed(c.t, d, name).ID
}

// waitSubtasks polls the vertex's subtasks until ok accepts them.
func (c *cluster) waitSubtasks(jobID, vertexID string, timeout time.Duration, ok func([]restapi.SubtaskInfo) error) []restapi.SubtaskInfo {
	c.t.Helper()
	var subtasks []restapi.SubtaskInfo
	c.eventually(timeout, func() error {
		v, err := c.client.JobVertex(c.ctx, jobID, vertexID)
		if err != nil {
			return err
		}
		subtasks = v.Subtasks
		return ok(v.Subtasks)
	})
	return subtasks
}

func allIn(status string) func([]restapi.SubtaskInfo) error {
	return func(ss []restapi.SubtaskInfo) error {
		for _, s := range ss {
			if s.Status != status {
				return fmt.Errorf("subtask %d is %s, want %s", s.Subtask, s.Status, status)
			}
		}
		return nil
	}
}

// failuresRecorded waits until the job's exception history is not empty:
// the fault did reach the job.
func (c *cluster) failuresRecorded(jobID string, timeout time.Duration) {
	c.t.Helper()
	c.eventually(timeout, func() error {
		ex, err := c.client.JobExceptions(c.ctx, jobID)
		if err != nil {
			return err
		}
		if len(ex.ExceptionHistory.Entries) == 0 {
			return errors.New("no failure recorded")
		}
		return nil
	})
}

func (c *cluster) logExceptions(jobID string) {
	ex, err := c.client.JobExceptions(c.ctx, jobID)
	if err != nil {
		c.t.Logf("exceptions: %v", err)
		return
	}
	c.t.Logf("%d failures recorded (root: %.200s)", len(ex.ExceptionHistory.Entries), ex.RootException)
	for _, e := range ex.ExceptionHistory.Entries {
		c.t.Logf("  failure %s on %s in %s: %.200s", e.FailureType, e.Location, e.TaskName, e.ExceptionName)
	}
}

// faultText is a deterministic text of lines lines over a vocabulary of
// about 2000 words.
func faultText(lines int) string {
	rng := rand.New(rand.NewSource(9))
	var b strings.Builder
	for l := 0; l < lines; l++ {
		for n := 3 + rng.Intn(6); n > 0; n-- {
			fmt.Fprintf(&b, "w%d", rng.Intn(2000))
			if rng.Intn(20) == 0 {
				b.WriteString("Straße")
			}
			b.WriteString([]string{" ", ", ", ". ", "\t"}[rng.Intn(4)])
		}
		b.WriteString("\n")
	}
	return b.String()
}

// checkWordCounts compares wordcount's part files in dir with want.
func checkWordCounts(t *testing.T, dir string, want map[string]int64) {
	t.Helper()
	got := map[string]int64{}
	for _, l := range readParts(t, dir) {
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			t.Fatalf("bad output line %q", l)
		}
		n, err := strconv.ParseInt(l[i+1:], 10, 64)
		if err != nil {
			t.Fatalf("bad output line %q", l)
		}
		if _, dup := got[l[:i]]; dup {
			t.Errorf("word %q counted in two lines", l[:i])
		}
		got[l[:i]] = n
	}
	bad := 0
	for w, n := range want {
		if got[w] != n {
			if bad++; bad <= 10 {
				t.Errorf("%q: %d, want %d", w, got[w], n)
			}
		}
	}
	for w := range got {
		if _, ok := want[w]; !ok {
			if bad++; bad <= 10 {
				t.Errorf("%q counted, but it is not in the input", w)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d wrong counts of %d words", bad, len(want))
	}
}

// checkNumbers checks paced-numbers' part files in dir: every number in
// [0, n) exactly once, nothing else.
func checkNumbers(t *testing.T, dir string, n int64) {
	t.Helper()
	seen := make([]int, n)
	bad := 0
	for _, l := range readParts(t, dir) {
		v, err := strconv.ParseInt(l, 10, 64)
		if err != nil || v < 0 || v >= n {
			if bad++; bad <= 10 {
				t.Errorf("bad output line %q", l)
			}
			continue
		}
		seen[v]++
	}
	missing, dups := 0, 0
	for v, k := range seen {
		switch {
		case k == 0:
			if missing++; missing <= 5 {
				t.Errorf("%d is missing", v)
			}
		case k > 1:
			if dups++; dups <= 5 {
				t.Errorf("%d written %d times", v, k)
			}
		}
	}
	if bad+missing+dups > 0 {
		t.Fatalf("output of %d numbers: %d bad lines, %d missing, %d duplicated", n, bad, missing, dups)
	}
}

// logEntry is one JSON line of a gofl process log.
type logEntry struct {
	Level   string `json:"level"`
	Message string `json:"message"`
	Attempt string `json:"attempt"`
	Time    string `json:"time"`
}

// readLog parses a gofl process log (lines that are not JSON are skipped).
func readLog(t *testing.T, path string) []logEntry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []logEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e logEntry
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			out = append(out, e)
		}
	}
	return out
}

// countLog counts the log entries of the files whose message contains msg.
func countLog(t *testing.T, paths []string, msg string) int {
	t.Helper()
	n := 0
	for _, p := range paths {
		for _, e := range readLog(t, p) {
			if strings.Contains(e.Message, msg) {
				n++
			}
		}
	}
	return n
}

// TestFaultRunnerKilledWhileConsumersRun kills -9 a job runner (not its
// TaskManager) of a batch word count once the producers finished and the
// consumers read their BLOCKING partitions: the job restarts what it must,
// within its restart attempts, and FINISHES with the exact counts.
func TestFaultRunnerKilledWhileConsumersRun(t *testing.T) {
	parallel(t)
	c := newCluster(t, faultRestart)
	c.startTaskManagerProcessWith("tm-a", 1, nil)
	c.startTaskManagerProcessWith("tm-b", 1, nil)
	c.waitForTaskManagers(2)

	dir := t.TempDir()
	text := faultText(30000) // about 165,000 words
	input, out := filepath.Join(dir, "input.txt"), filepath.Join(dir, "out")
	if err := os.WriteFile(input, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	want := countWords(text)
	// Each consumer reads about 80,000 records at 12,000/s: about 7 s.
	id := c.runSDKJob(testJobBinary, 2, "slow-wordcount", "--input", input, "--output", out, "--rate", "12000")
	c.waitFor(id, 30*time.Second, "RUNNING")
	producers, consumers := c.vertexID(id, "Tokenizer"), c.vertexID(id, "Slow count")
	c.waitSubtasks(id, producers, 30*time.Second, allIn("FINISHED"))
	running := c.waitSubtasks(id, consumers, 30*time.Second, allIn("RUNNING"))
	victimTM := running[0].TaskManagerID
	var victim int
	c.eventually(10*time.Second, func() error {
		if victim = runnerOf(id, c.tmPid(victimTM)); victim == 0 {
			return fmt.Errorf("no runner of job %s under TaskManager %s", id, victimTM)
		}
		return nil
	})
	// Still reading: the fault lands while the consumers run.
	if v := c.jobVertex(id, consumers); v.Subtasks[0].Status != "RUNNING" {
		t.Fatalf("the consumer is %s before the kill; the job is too fast for the test", v.Subtasks[0].Status)
	}
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed runner %d of %s while the consumers ran", victim, victimTM)
	c.failuresRecorded(id, 30*time.Second)
	d := c.waitFor(id, 75*time.Second, "FINISHED")
	c.logExceptions(id)
	checkWordCounts(t, out, want)
	// The restarted consumer ran again; the fault did land.
	if v := c.jobVertex(id, consumers); v.Subtasks[0].Attempt == 0 {
		t.Errorf("consumer 0 finished in attempt 0; the runner kill did not restart it")
	}
	for _, v := range d.Vertices {
		if v.Status != "FINISHED" {
			t.Errorf("vertex %s is %s", v.Name, v.Status)
		}
	}
}

// localProviderSettings make the in-process JobManager a session cluster
// with an active ResourceManager that starts TaskManager processes through
// the local provider; dir is the provider's directory.
func localProviderSettings(dir, clusterID string, slots int) map[string]string {
	return map[string]string{
		"deployment.provider":           "local",
		"deployment.binary":             goflBinary,
		"deployment.cluster-id":         clusterID,
		"provider.local.dir":            dir,
		"taskmanager.numberOfTaskSlots": strconv.Itoa(slots),
		"log.level":                     "info",
	}
}

// localWorkerPid reads a local provider worker's pid file.
func localWorkerPid(t *testing.T, dir, clusterID, worker string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "clusters", clusterID, worker, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.Fields(string(b))[0])
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func localWorkerLogs(dir, clusterID string) []string {
	logs, _ := filepath.Glob(filepath.Join(dir, "clusters", clusterID, "*", "gofl.log"))
	return logs
}

// pacedJob runs paced-numbers at parallelism 4: count numbers, each
// subtask's quarter taking about perSubtask.
func (c *cluster) pacedJob(count int64, perSubtask time.Duration, out string, extra ...string) string {
	c.t.Helper()
	rate := float64(count) / perSubtask.Seconds()
	args := append([]string{"paced-numbers", "--count", strconv.FormatInt(count, 10), "--rate", strconv.FormatFloat(rate, 'f', 0, 64), "--output", out}, extra...)
	return c.runSDKJob(testJobBinary, 4, args...)
}

// TestFaultTaskManagerKilledInSession kills -9 a TaskManager of a session
// cluster whose active ResourceManager starts TaskManagers through the
// local provider, at default and at fast heartbeats. The job FINISHES with
// the exact output, and the TaskManagers' logs show no storm of rejected
// slot offers or JobMaster reconnections.
func TestFaultTaskManagerKilledInSession(t *testing.T) {
	parallel(t)
	for _, tc := range []struct {
		name              string
		interval, timeout string
		finishWithin      time.Duration
	}{
		{"default heartbeats", "10 s", "50 s", 80 * time.Second},
		{"fast heartbeats", "500 ms", "2 s", 60 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, clusterID := t.TempDir(), uniqueID("faults-kill")
			c := newCluster(t, merged(faultRestart, localProviderSettings(dir, clusterID, 2),
				map[string]string{"heartbeat.interval": tc.interval, "heartbeat.timeout": tc.timeout}))
			out := filepath.Join(t.TempDir(), "out")
			const n = 32000
			id := c.pacedJob(n, 10*time.Second, out)
			sources := c.waitSubtasks(id, c.vertexID(id, "Paced numbers"), 60*time.Second, allIn("RUNNING"))
			victim := sources[0].TaskManagerID
			pid := localWorkerPid(t, dir, clusterID, victim)
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			t.Logf("killed TaskManager %s (pid %d)", victim, pid)
			// However the job ends, no storm of slot offers or reconnections.
			defer func() {
				logs := localWorkerLogs(dir, clusterID)
				rejected := countLog(t, logs, "JobMaster rejected slot")
				connected := countLog(t, logs, "connected to the JobMaster")
				registered := countLog(t, logs, "registered at the ResourceManager")
				t.Logf("%d TaskManager logs: %d rejected slot offers, %d JobMaster connections, %d ResourceManager registrations",
					len(logs), rejected, connected, registered)
				if rejected >= 20 || connected >= 20 || registered >= 20 {
					t.Errorf("offer storm: %d rejected slot offers, %d JobMaster connections, %d ResourceManager registrations (want each < 20)",
						rejected, connected, registered)
				}
			}()
			c.failuresRecorded(id, tc.finishWithin)
			c.waitFor(id, tc.finishWithin, "FINISHED")
			c.logExceptions(id)
			checkNumbers(t, out, n)
			// Once the job is over, every slot comes back.
			c.eventually(30*time.Second, func() error {
				ov, err := c.client.Overview(c.ctx)
				if err != nil {
					return err
				}
				if ov.SlotsAvailable != ov.SlotsTotal {
					return fmt.Errorf("overview %+v: want every slot free", ov)
				}
				return nil
			})
		})
	}
}

// TestFaultTaskManagerKilledWhileSourcesRun kills -9 a TaskManager while
// the sources of a streaming job run, each subtask its own pipelined
// region (POINTWISE): only the regions that ran there restart; every
// subtask elsewhere finishes in attempt 0 where it started.
func TestFaultTaskManagerKilledWhileSourcesRun(t *testing.T) {
	parallel(t)
	c := newCluster(t, faultRestart)
	c.startTaskManagerProcessWith("tm-a", 2, nil)
	c.startTaskManagerProcessWith("tm-victim", 2, nil)
	c.waitForTaskManagers(2)
	out := filepath.Join(t.TempDir(), "out")
	const n = 32000
	id := c.pacedJob(n, 8*time.Second, out)
	c.waitFor(id, 30*time.Second, "RUNNING")
	vertices := []string{c.vertexID(id, "Paced numbers"), c.vertexID(id, "Format")}
	before := map[string][]restapi.SubtaskInfo{}
	for _, vid := range vertices {
		before[vid] = c.waitSubtasks(id, vid, 30*time.Second, allIn("RUNNING"))
	}
	onVictim := map[int]bool{}
	for _, s := range before[vertices[0]] {
		if s.TaskManagerID == "tm-victim" {
			onVictim[s.Subtask] = true
		}
	}
	if len(onVictim) != 2 {
		t.Fatalf("sources on the victim: %v, want 2 of 4", onVictim)
	}
	c.startTaskManagerProcessWith("tm-spare", 2, nil)
	c.waitForTaskManagers(3)
	if v := c.jobVertex(id, vertices[0]); allIn("RUNNING")(v.Subtasks) != nil {
		t.Fatalf("sources no longer all running before the kill: %+v; the job is too fast for the test", v.Subtasks)
	}
	c.kill9("tm-victim")
	c.failuresRecorded(id, 30*time.Second)
	c.waitFor(id, 60*time.Second, "FINISHED")
	c.logExceptions(id)
	checkNumbers(t, out, n)
	for _, vid := range vertices {
		v := c.jobVertex(id, vid)
		for _, s := range v.Subtasks {
			was := before[vid][s.Subtask]
			switch {
			case s.Status != "FINISHED":
				t.Errorf("%s#%d is %s", v.Name, s.Subtask, s.Status)
			case onVictim[s.Subtask] && (s.Attempt == 0 || s.TaskManagerID == "tm-victim"):
				t.Errorf("%s#%d ran on the killed TaskManager, yet finished in attempt %d on %s", v.Name, s.Subtask, s.Attempt, s.TaskManagerID)
			case !onVictim[s.Subtask] && (s.Attempt != 0 || s.TaskManagerID != was.TaskManagerID):
				t.Errorf("%s#%d of a healthy region restarted: attempt %d on %s (it ran in attempt 0 on %s)",
					v.Name, s.Subtask, s.Attempt, s.TaskManagerID, was.TaskManagerID)
			}
		}
	}
}

// TestFaultTaskManagerSIGTERMLocalProvider stops a TaskManager of the
// local provider gracefully (SIGTERM, as Nomad sends) mid-job, at default
// heartbeats: the job fails over at once, long before heartbeat.timeout,
// and FINISHES with the exact output instead of hanging.
func TestFaultTaskManagerSIGTERMLocalProvider(t *testing.T) {
	parallel(t)
	dir, clusterID := t.TempDir(), uniqueID("faults-term")
	c := newCluster(t, merged(faultRestart, localProviderSettings(dir, clusterID, 2),
		map[string]string{"heartbeat.interval": "10 s", "heartbeat.timeout": "50 s"}))
	out := filepath.Join(t.TempDir(), "out")
	const n = 32000
	id := c.pacedJob(n, 10*time.Second, out)
	src := c.vertexID(id, "Paced numbers")
	sources := c.waitSubtasks(id, src, 60*time.Second, allIn("RUNNING"))
	victim := sources[0].TaskManagerID
	pid := localWorkerPid(t, dir, clusterID, victim)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	t.Logf("sent SIGTERM to TaskManager %s (pid %d)", victim, pid)
	// A graceful stop is no silent death: the JobMaster restarts the
	// subtasks that ran there well before the 50 s heartbeat timeout.
	if err := c.poll(20*time.Second, func() error {
		v, err := c.client.JobVertex(c.ctx, id, src)
		if err != nil {
			return err
		}
		for _, s := range v.Subtasks {
			if s.TaskManagerID == victim && s.Attempt == 0 {
				return fmt.Errorf("subtask %d is still attempt 0 on the stopped %s (%s)", s.Subtask, victim, s.Status)
			}
		}
		return nil
	}); err != nil {
		t.Errorf("no failover after the graceful stop: %v", err)
	}
	c.waitFor(id, 60*time.Second, "FINISHED")
	c.logExceptions(id)
	checkNumbers(t, out, n)
}

// TestFaultTaskManagerStoppedLongerThanHeartbeatTimeout freezes a
// TaskManager and its job runner (SIGSTOP, as a long GC pause or a
// suspended VM would) for longer than heartbeat.timeout, until the
// JobMaster has restarted its subtasks elsewhere, then lets it go on
// (SIGCONT). The job FINISHES with the exact output; no execution attempt
// is deployed twice; the JobMaster's view of attempt numbers never goes
// back; at most one attempt of each subtask runs to its end; and the
// stale TaskManager's attempts are cancelled.
func TestFaultTaskManagerStoppedLongerThanHeartbeatTimeout(t *testing.T) {
	parallel(t)
	const interval, timeout = 500 * time.Millisecond, 2 * time.Second
	c := newCluster(t, merged(faultRestart, map[string]string{"heartbeat.interval": "500 ms", "heartbeat.timeout": "2 s"}))
	logs := map[string]string{}
	logs["tm-a"] = c.startTaskManagerProcessWith("tm-a", 2, nil)
	logs["tm-victim"] = c.startTaskManagerProcessWith("tm-victim", 2, nil)
	c.waitForTaskManagers(2)
	dir := t.TempDir()
	out, ledger := filepath.Join(dir, "out"), filepath.Join(dir, "ledger")
	const n = 32000
	id := c.pacedJob(n, 16*time.Second, out, "--ledger", ledger)
	c.waitFor(id, 30*time.Second, "RUNNING")
	src := c.vertexID(id, "Paced numbers")
	sources := c.waitSubtasks(id, src, 30*time.Second, allIn("RUNNING"))
	onVictim := map[int]bool{}
	for _, s := range sources {
		if s.TaskManagerID == "tm-victim" {
			onVictim[s.Subtask] = true
		}
	}
	if len(onVictim) != 2 {
		t.Fatalf("sources on the victim: %v, want 2 of 4", onVictim)
	}

	// Watch the JobMaster's view of attempt numbers until the job ends.
	var (
		viewMu      sync.Mutex
		maxAttempt  = map[string]int{}
		regressions []string
	)
	stopWatch, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		for {
			for _, vid := range []string{src, c.vertexID(id, "Format")} {
				v, err := c.client.JobVertex(c.ctx, id, vid)
				if err != nil {
					continue
				}
				viewMu.Lock()
				for _, s := range v.Subtasks {
					key := fmt.Sprintf("%s#%d", v.Name, s.Subtask)
					if s.Attempt < maxAttempt[key] {
						regressions = append(regressions, fmt.Sprintf("%s went back from attempt %d to %d (%s on %s)", key, maxAttempt[key], s.Attempt, s.Status, s.TaskManagerID))
					}
					maxAttempt[key] = max(maxAttempt[key], s.Attempt)
				}
				viewMu.Unlock()
			}
			select {
			case <-stopWatch:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	defer func() { close(stopWatch); <-watched }()

	logs["tm-spare"] = c.startTaskManagerProcessWith("tm-spare", 2, nil)
	c.waitForTaskManagers(3)
	tmPid := c.tmPid("tm-victim")
	var runner int
	c.eventually(10*time.Second, func() error {
		if runner = runnerOf(id, tmPid); runner == 0 {
			return errors.New("no runner under the victim TaskManager")
		}
		return nil
	})
	// Whatever happens, nothing stays frozen after the test.
	t.Cleanup(func() {
		_ = syscall.Kill(tmPid, syscall.SIGCONT) // not reaped yet: the cluster's cleanup runs after this one
		for _, pid := range runnerPids(id) {
			if pid == runner {
				_ = syscall.Kill(runner, syscall.SIGCONT)
				_ = syscall.Kill(runner, syscall.SIGKILL)
			}
		}
	})
	if v := c.jobVertex(id, src); allIn("RUNNING")(v.Subtasks) != nil {
		t.Fatalf("sources no longer all running before the freeze: %+v; the job is too fast for the test", v.Subtasks)
	}
	for _, pid := range []int{tmPid, runner} {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	stopped := time.Now()
	// Frozen at least 2 × heartbeat.timeout, and until the JobMaster runs
	// the frozen subtasks' new attempts elsewhere.
	if err := c.poll(45*time.Second, func() error {
		if d, err := c.client.JobDetails(c.ctx, id); err == nil && client.IsGloballyTerminal(d.State) {
			return fmt.Errorf("%w: the job is %s", errStopPolling, d.State)
		}
		v, err := c.client.JobVertex(c.ctx, id, src)
		if err != nil {
			return err
		}
		for _, s := range v.Subtasks {
			if onVictim[s.Subtask] && (s.Attempt == 0 || s.Status != "RUNNING") {
				return fmt.Errorf("subtask %d: attempt %d %s on %s", s.Subtask, s.Attempt, s.Status, s.TaskManagerID)
			}
		}
		return nil
	}); err != nil {
		t.Errorf("the frozen TaskManager's subtasks do not run elsewhere: %v", err)
		c.logExceptions(id)
	}
	if rest := 2*timeout + interval - time.Since(stopped); rest > 0 {
		time.Sleep(rest) // the required freeze, derived from heartbeat.timeout
	}
	staleAttempts := submittedNotEnded(t, logs["tm-victim"])
	for _, pid := range []int{runner, tmPid} {
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("froze tm-victim (pid %d) and its runner (pid %d) for %v; its running attempts: %v", tmPid, runner, time.Since(stopped).Round(time.Millisecond), staleAttempts)
	if len(staleAttempts) == 0 {
		t.Fatal("the victim's log shows no running attempt at the freeze")
	}

	// The stale TaskManager's attempts are cancelled (or failed), never
	// finished.
	if err := c.poll(30*time.Second, func() error {
		ended := attemptEnds(t, logs["tm-victim"])
		for _, a := range staleAttempts {
			switch ended[a] {
			case "":
				return fmt.Errorf("stale attempt %s on tm-victim has not ended", a)
			case "task finished":
				return fmt.Errorf("stale attempt %s on tm-victim finished", a)
			}
		}
		return nil
	}); err != nil {
		t.Errorf("the stale TaskManager's attempts: %v", err)
		if data, rerr := os.ReadFile(logs["tm-victim"]); rerr == nil {
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			t.Logf("tm-victim's log, last lines:\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	}
	ctx, cancel := context.WithTimeout(c.ctx, 60*time.Second)
	defer cancel()
	d, err := c.client.WaitForJobStatus(ctx, id, "FINISHED")
	c.logExceptions(id)
	finished := err == nil
	if finished {
		checkNumbers(t, out, n)
	} else {
		t.Errorf("job %s: %v", d.State, err)
	}

	// No execution attempt was deployed twice.
	where := map[string][]string{}
	for tm, path := range logs {
		for _, e := range readLog(t, path) {
			if e.Message == "task submitted" {
				where[e.Attempt] = append(where[e.Attempt], tm)
			}
		}
	}
	for a, tms := range where {
		if len(tms) > 1 {
			t.Errorf("attempt %s deployed %d times: %v", a, len(tms), tms)
		}
	}
	viewMu.Lock()
	for _, r := range regressions {
		t.Errorf("the JobMaster's view went back: %s", r)
	}
	viewMu.Unlock()
	if !finished {
		return
	}
	// Exactly one attempt of each subtask ran to its end.
	b, err := os.ReadFile(ledger)
	if err != nil {
		t.Fatal(err)
	}
	last := map[int][]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var what string
		var subtask, pid int
		var ns int64
		if _, err := fmt.Sscanf(l, "%s %d %d %d", &what, &subtask, &pid, &ns); err != nil {
			t.Fatalf("ledger line %q: %v", l, err)
		}
		if what == "last" {
			last[subtask] = append(last[subtask], pid)
		}
	}
	for k := 0; k < 4; k++ {
		if len(last[k]) != 1 {
			t.Errorf("subtask %d ran to its end %d times (runner pids %v), want once", k, len(last[k]), last[k])
		}
	}
}

// submittedNotEnded lists the attempts a TaskManager's log shows submitted
// and not yet ended.
func submittedNotEnded(t *testing.T, path string) []string {
	t.Helper()
	ended := attemptEnds(t, path)
	var out []string
	for _, e := range readLog(t, path) {
		if e.Message == "task submitted" && ended[e.Attempt] == "" {
			out = append(out, e.Attempt)
		}
	}
	return out
}

// attemptEnds maps each attempt in a TaskManager's log to how it ended
// ("task finished", "task canceled", "task failed").
func attemptEnds(t *testing.T, path string) map[string]string {
	t.Helper()
	ended := map[string]string{}
	for _, e := range readLog(t, path) {
		switch e.Message {
		case "task finished", "task canceled", "task failed", "task stopped by the TaskManager; reported as failed":
			ended[e.Attempt] = e.Message
		}
	}
	return ended
}

// keepLogsIfFailed copies the logs of a failed test (its TaskManager
// processes' and their runners', and extra ones) into a new directory
// under $GOFL_TEST_KEEP_LOGS, if set: the temporary directories that hold
// them are gone when the test ends. GOFL_TEST_KEEP_LOGS_ALWAYS=1 keeps
// those of a passed test too. Deferred by a test, so that it runs before
// the cleanups.
func (c *cluster) keepLogsIfFailed(extra ...string) {
	root := os.Getenv("GOFL_TEST_KEEP_LOGS")
	if root == "" || !c.t.Failed() && os.Getenv("GOFL_TEST_KEEP_LOGS_ALWAYS") != "1" {
		return
	}
	dst, err := os.MkdirTemp(root, strings.ReplaceAll(c.t.Name(), "/", "_")+"-")
	if err == nil {
		err = os.MkdirAll(dst, 0o755)
	}
	if err != nil {
		c.t.Logf("keeping logs: %v", err)
		return
	}
	logs := extra
	c.mu.Lock()
	for _, h := range c.tms {
		if h.logPath != "" {
			logs = append(logs, h.logPath)
		}
	}
	c.mu.Unlock()
	_ = filepath.WalkDir(c.dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".log") {
			logs = append(logs, path)
		}
		return nil
	})
	for i, path := range logs {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		name := fmt.Sprintf("%02d-%s", i, filepath.Base(path))
		if rel, err := filepath.Rel(c.dir, path); err == nil && !strings.HasPrefix(rel, "..") {
			name = fmt.Sprintf("%02d-%s", i, strings.ReplaceAll(rel, "/", "_"))
		}
		_ = os.WriteFile(filepath.Join(dst, name), data, 0o644)
	}
	c.t.Logf("kept %d logs in %s", len(logs), dst)
}
