package jobmanager_test

// End-to-end checkpoints (issue #10): a keyed, stateful streaming job reads
// a replayable source and writes through the transactional file sink while
// TaskManagers and job runners are killed; the committed output must equal
// the test's own computation exactly.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gofl/gofl/storage/storagetest"
)

// checkpointSettings turn on 200 ms checkpoints into dir, with a restart
// strategy that outlasts the test's kills.
func checkpointSettings(dir string) map[string]string {
	return map[string]string{
		"execution.checkpointing.interval":      "200 ms",
		"state.checkpoints.dir":                 dir,
		"restart-strategy.type":                 "fixed-delay",
		"restart-strategy.fixed-delay.attempts": "50",
		"restart-strategy.fixed-delay.delay":    "100 ms",
	}
}

// keyedCountsJob runs keyed-counts at parallelism p.
func (c *cluster) keyedCountsJob(p int, count, keys int64, rate float64, out string) string {
	c.t.Helper()
	return c.runSDKJob(testJobBinary, p, keyedCountsArgs(count, keys, rate, out)...)
}

// keyedCountsArgs are the test job's arguments for keyed-counts.
func keyedCountsArgs(count, keys int64, rate float64, out string) []string {
	return []string{"keyed-counts", "--count", strconv.FormatInt(count, 10),
		"--keys", strconv.FormatInt(keys, 10), "--rate", strconv.FormatFloat(rate, 'f', 0, 64), "--output", out}
}

// checkKeyedCounts checks the committed output of keyed-counts: every key
// k has exactly the lines "k 1" .. "k c(k)".
func checkKeyedCounts(t *testing.T, dir string, count, keys int64) {
	t.Helper()
	want := make([]int64, keys)
	for n := int64(0); n < count; n++ {
		want[n%keys]++
	}
	seen := make([]map[int64]int, keys)
	for i := range seen {
		seen[i] = map[int64]int{}
	}
	bad := 0
	for _, line := range readParts(t, dir) {
		f := strings.Fields(line)
		if len(f) != 2 {
			t.Fatalf("malformed line %q", line)
		}
		k, err1 := strconv.ParseInt(f[0], 10, 64)
		n, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil || k < 0 || k >= keys {
			t.Fatalf("malformed line %q", line)
		}
		seen[k][n]++
	}
	for k := int64(0); k < keys; k++ {
		for n := int64(1); n <= want[k]; n++ {
			if got := seen[k][n]; got != 1 && bad < 10 {
				bad++
				t.Errorf("key %d count %d appears %d times, want once", k, n, got)
			}
		}
		if len(seen[k]) != int(want[k]) && bad < 10 {
			bad++
			t.Errorf("key %d has %d distinct counts, want %d", k, len(seen[k]), want[k])
		}
	}
}

// waitCheckpointAfter waits until a checkpoint newer than after completed
// and returns its ID.
func (c *cluster) waitCheckpointAfter(jobID string, after int64, timeout time.Duration) int64 {
	c.t.Helper()
	var id int64
	c.eventually(timeout, func() error {
		st, err := c.client.JobCheckpoints(c.ctx, jobID)
		if err != nil {
			return err
		}
		if st.Latest.Completed == nil || st.Latest.Completed.ID <= after {
			cause := ""
			if f := st.Latest.Failed; f != nil {
				cause = "; the latest failed: " + f.FailureMessage
			}
			return fmt.Errorf("no checkpoint after %d completed (counts %+v)%s", after, st.Counts, cause)
		}
		id = st.Latest.Completed.ID
		return nil
	})
	return id
}

func TestCheckpointExactlyOnceUnderKills(t *testing.T) {
	parallel(t)
	for _, tc := range []struct {
		name string
		dir  func(t *testing.T) string
	}{
		{"file", func(t *testing.T) string { return "file://" + filepath.Join(t.TempDir(), "checkpoints") }},
		{"hdfs", func(t *testing.T) string {
			return storagetest.HDFS(t) + fmt.Sprintf("/gofl-test/checkpoints-%d", time.Now().UnixNano())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, checkpointSettings(tc.dir(t)))
			tms := []string{"tm-0", "tm-1", "tm-2"}
			for _, id := range tms {
				c.startTaskManagerProcessWith(id, 2, nil)
			}
			c.waitForTaskManagers(len(tms))
			out := filepath.Join(t.TempDir(), "out")
			// 30 s of input at least: the job outlasts the seven kills on a
			// loaded machine (at 20 s it ended before the last one).
			const count, keys = 30000, 16
			id := c.keyedCountsJob(2, count, keys, 1000, out)
			c.waitFor(id, 30*time.Second, "RUNNING")
			rnd := rand.New(rand.NewSource(time.Now().UnixNano()))
			var last int64
			next := 3
			for kill := 0; kill < 7; kill++ {
				last = c.waitCheckpointAfter(id, last, 60*time.Second)
				if kill < 5 {
					victim := tms[rnd.Intn(len(tms))]
					t.Logf("kill -9 TaskManager %s after checkpoint %d", victim, last)
					c.kill9(victim)
					repl := fmt.Sprintf("tm-%d", next)
					next++
					c.startTaskManagerProcessWith(repl, 2, nil)
					for i, v := range tms {
						if v == victim {
							tms[i] = repl
						}
					}
				} else {
					var pids []int
					c.eventually(waitLimit, func() error {
						if pids = runnerPids(id); len(pids) == 0 {
							d, _ := c.client.JobDetails(c.ctx, id)
							return fmt.Errorf("no runner of job %s (%s) to kill", id, d.State)
						}
						return nil
					})
					pid := pids[rnd.Intn(len(pids))]
					t.Logf("kill -9 job runner %d after checkpoint %d", pid, last)
					if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
						t.Fatal(err)
					}
				}
			}
			c.waitFor(id, 3*time.Minute, "FINISHED")
			checkKeyedCounts(t, out, count, keys)
		})
	}
}

// TestCheckpointStopWithSavepointAndRescale stops keyed-counts at p=4
// with a savepoint and restores it at p=2 and at p=6: keyed state, the
// sources' split positions and the sink's transactions carry over, and
// the output of each continuation, added to the first run's, is exact.
func TestCheckpointStopWithSavepointAndRescale(t *testing.T) {
	parallel(t)
	ckDir := "file://" + filepath.Join(t.TempDir(), "checkpoints")
	c := newCluster(t, checkpointSettings(ckDir))
	c.startTaskManagerProcessWith("tm-0", 6, nil)
	c.startTaskManagerProcessWith("tm-1", 6, nil)
	c.waitForTaskManagers(2)
	const count, keys = 12000, 16
	first := filepath.Join(t.TempDir(), "out")
	id := c.keyedCountsJob(4, count, keys, 1500, first)
	c.waitFor(id, 30*time.Second, "RUNNING")
	c.waitCheckpointAfter(id, 0, 60*time.Second)
	spDir := "file://" + filepath.Join(t.TempDir(), "savepoints")
	trigger, err := c.client.StopWithSavepoint(c.ctx, id, spDir, false)
	if err != nil {
		t.Fatal(err)
	}
	savepoint, err := c.client.WaitForSavepoint(c.ctx, id, trigger)
	if err != nil {
		t.Fatal(err)
	}
	c.waitFor(id, 60*time.Second, "FINISHED")
	if lines := len(readParts(t, first)); lines == 0 || lines >= count {
		t.Fatalf("the first run wrote %d of %d lines; the stop did not land mid-run", lines, count)
	}
	t.Logf("stopped with savepoint %s", savepoint)
	for _, p := range []int{2, 6} {
		t.Run(fmt.Sprintf("p=%d", p), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			copyDir(t, first, out)
			jg := c.planSDKJobFrom(savepoint, testJobBinary, p, "keyed-counts", "--count", strconv.Itoa(count),
				"--keys", strconv.Itoa(keys), "--rate", "4000", "--output", out)
			id := c.submit(jg)
			c.waitFor(id, 2*time.Minute, "FINISHED")
			checkKeyedCounts(t, out, count, keys)
			// A finished job keeps no checkpoints (the savepoint stays).
			if left, _ := filepath.Glob(filepath.Join(strings.TrimPrefix(ckDir, "file://"), id, "chk-*")); len(left) != 0 {
				t.Errorf("checkpoints left after the job finished: %v", left)
			}
			if _, err := os.Stat(filepath.Join(strings.TrimPrefix(savepoint, "file://"), "_metadata")); err != nil {
				t.Errorf("the savepoint restored from is gone: %v", err)
			}
		})
	}
}

// copyDir copies the regular files of src into a new directory dst.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// stopWithSavepoint stops a running job with a savepoint under a new
// directory and returns the savepoint's path once the job FINISHED.
func (c *cluster) stopWithSavepoint(id string) string {
	c.t.Helper()
	c.waitCheckpointAfter(id, 0, 60*time.Second)
	trigger, err := c.client.StopWithSavepoint(c.ctx, id, "file://"+filepath.Join(c.t.TempDir(), "savepoints"), false)
	if err != nil {
		c.t.Fatal(err)
	}
	path, err := c.client.WaitForSavepoint(c.ctx, id, trigger)
	if err != nil {
		c.t.Fatal(err)
	}
	c.waitFor(id, 60*time.Second, "FINISHED")
	return path
}

// TestCheckpointUpgradeAndBadSavepoints is the CI upgrade path: version a
// of a job binary stops with a savepoint, version b (one more operator)
// restores it and its output continues exactly. A version without the
// stateful operator is refused without --allowNonRestoredState, naming the
// operator, and so are a missing and a corrupt savepoint; the cluster
// stays up and runs the next job.
func TestCheckpointUpgradeAndBadSavepoints(t *testing.T) {
	parallel(t)
	c := newCluster(t, checkpointSettings("file://"+filepath.Join(t.TempDir(), "checkpoints")))
	c.startTaskManagerProcessWith("tm-0", 4, nil)
	c.waitForTaskManagers(1)
	const count, keys = 8000, 8
	out := filepath.Join(t.TempDir(), "out")
	args := func(version string) []string {
		return []string{"keyed-counts", "--count", strconv.Itoa(count), "--keys", strconv.Itoa(keys), "--rate", "1000",
			"--output", out, "--version", version}
	}
	savepoint := c.stopWithSavepoint(c.submit(c.planSDKJob(testJobBinary, 2, args("a")...)))
	// The output as of the savepoint, for the version without the count.
	atSavepoint := filepath.Join(t.TempDir(), "at-savepoint")
	copyDir(t, out, atSavepoint)
	before := len(readParts(t, atSavepoint))

	submitFrom := func(path string, allowNonRestored bool, version string) (string, error) {
		jg := c.planSDKJobFrom(path, testJobBinary, 2, args(version)...)
		if allowNonRestored {
			jg.Config["execution.savepoint.ignore-unclaimed-state"] = "true"
		}
		return c.client.SubmitJob(c.ctx, jg)
	}
	// Bad inputs first: nothing of them may run.
	corrupt := filepath.Join(t.TempDir(), "corrupt")
	if err := os.MkdirAll(corrupt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(corrupt, "_metadata"), []byte("not a checkpoint"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, version string
		want                []string
	}{
		{"unclaimed operator", savepoint, "no-count", []string{savepoint, `"Count"`, "--allowNonRestoredState"}},
		{"missing savepoint", "file://" + filepath.Join(t.TempDir(), "nowhere"), "b", []string{"nowhere"}},
		{"corrupt savepoint", "file://" + corrupt, "b", []string{corrupt}},
	} {
		id, err := submitFrom(tc.path, false, tc.version)
		if err == nil {
			t.Fatalf("%s: job %s was accepted", tc.name, id)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not name %s", tc.name, err, w)
			}
		}
		t.Logf("%s: %v", tc.name, err)
	}
	// A version keeping the count as a string cannot read the int64 count:
	// the job FAILS (restarting cannot help) naming the state and both types.
	incompatible, err := submitFrom(savepoint, false, "string-count")
	if err != nil {
		t.Fatal(err)
	}
	c.waitFor(incompatible, 2*time.Minute, "FAILED")
	ex, err := c.client.JobExceptions(c.ctx, incompatible)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(ex.RootException, "non-recoverable") != 1 {
		t.Errorf("root cause %q repeats its classification", ex.RootException)
	}
	for _, w := range []string{"incompatible state type", `count"`, "int64", "string"} {
		if !strings.Contains(ex.RootException, w) {
			t.Errorf("root cause %q does not name %s", ex.RootException, w)
		}
	}
	// Savepoints are relocatable: version b restores a's state from
	// where the savepoint was moved, and continues exactly.
	moved := filepath.Join(t.TempDir(), "moved-savepoint")
	if err := os.Rename(strings.TrimPrefix(savepoint, "file://"), moved); err != nil {
		t.Fatal(err)
	}
	savepoint = "file://" + moved
	id, err := submitFrom(savepoint, false, "b")
	if err != nil {
		t.Fatal(err)
	}
	c.waitFor(id, 2*time.Minute, "FINISHED")
	checkKeyedCounts(t, out, count, keys)
	// Dropping the count is fine when asked for: the numbers go on exactly
	// where the savepoint left them, one line each.
	jg := c.planSDKJobFrom(savepoint, testJobBinary, 2, "keyed-counts", "--count", strconv.Itoa(count), "--keys", strconv.Itoa(keys), "--rate", "100000",
		"--output", atSavepoint, "--version", "no-count")
	jg.Config["execution.savepoint.ignore-unclaimed-state"] = "true"
	id = c.submit(jg)
	c.waitFor(id, 2*time.Minute, "FINISHED")
	if lines := len(readParts(t, atSavepoint)); lines != count {
		t.Errorf("after no-count from the savepoint the output has %d lines (%d before it), want %d", lines, before, count)
	}
}

// TestCheckpointRetainedOnCancelRestores cancels a job whose checkpoints
// are retained on cancellation and resumes it from its latest checkpoint
// with -s: the output goes on exactly.
func TestCheckpointRetainedOnCancelRestores(t *testing.T) {
	parallel(t)
	settings := checkpointSettings("file://" + filepath.Join(t.TempDir(), "checkpoints"))
	settings["execution.checkpointing.externalized-checkpoint-retention"] = "RETAIN_ON_CANCELLATION"
	c := newCluster(t, settings)
	c.startTaskManagerProcessWith("tm-0", 4, nil)
	c.waitForTaskManagers(1)
	const count, keys = 8000, 8
	out := filepath.Join(t.TempDir(), "out")
	id := c.keyedCountsJob(2, count, keys, 1000, out)
	c.waitFor(id, 30*time.Second, "RUNNING")
	c.waitCheckpointAfter(id, 2, 60*time.Second)
	if err := c.client.CancelJob(c.ctx, id); err != nil {
		t.Fatal(err)
	}
	c.waitFor(id, 60*time.Second, "CANCELED")
	st, err := c.client.JobCheckpoints(c.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Latest.Completed == nil || st.Latest.Completed.ExternalPath == "" || st.Latest.Completed.Discarded {
		t.Fatalf("no retained checkpoint: %+v", st.Latest.Completed)
	}
	path := st.Latest.Completed.ExternalPath
	jg := c.planSDKJobFrom(path, testJobBinary, 2, "keyed-counts", "--count", strconv.Itoa(count), "--keys", strconv.Itoa(keys), "--rate", "4000", "--output", out)
	id = c.submit(jg)
	c.waitFor(id, 2*time.Minute, "FINISHED")
	checkKeyedCounts(t, out, count, keys)
}

// TestCheckpointFinalAtEndOfData runs a bounded checkpointed job whose
// interval is far longer than the job: its tasks tell the JobMaster when
// they ended their data, so the final checkpoint (FLIP-147) is triggered
// at once and the job ends long before the first interval would.
func TestCheckpointFinalAtEndOfData(t *testing.T) {
	parallel(t)
	settings := checkpointSettings("file://" + filepath.Join(t.TempDir(), "checkpoints"))
	settings["execution.checkpointing.interval"] = "30 min"
	c := newCluster(t, settings)
	c.startTaskManagerProcessWith("tm-0", 4, nil)
	c.waitForTaskManagers(1)
	const count, keys = 5000, 16
	out := filepath.Join(t.TempDir(), "out")
	id := c.keyedCountsJob(2, count, keys, 1e12, out)
	c.waitFor(id, 3*time.Minute, "FINISHED")
	checkKeyedCounts(t, out, count, keys)
	st, err := c.client.JobCheckpoints(c.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Counts.Completed != 1 || st.Latest.Completed == nil {
		t.Fatalf("completed checkpoints %d (latest %+v), want exactly the final one", st.Counts.Completed, st.Latest.Completed)
	}
}

// TestCheckpointRegionFailoverRestoresOnlyItsRegions runs paced-numbers
// (four pointwise pipelined regions) with checkpoints and kills -9 the
// TaskManager of two of them: only those regions restart, from the latest
// completed checkpoint, and the committed output is exact.
func TestCheckpointRegionFailoverRestoresOnlyItsRegions(t *testing.T) {
	parallel(t)
	c := newCluster(t, checkpointSettings("file://"+filepath.Join(t.TempDir(), "checkpoints")))
	c.startTaskManagerProcessWith("tm-a", 2, nil)
	c.startTaskManagerProcessWith("tm-victim", 2, nil)
	c.waitForTaskManagers(2)
	out := filepath.Join(t.TempDir(), "out")
	const n = 24000
	id := c.pacedJob(n, 8*time.Second, out)
	c.waitFor(id, 30*time.Second, "RUNNING")
	sources := c.vertexID(id, "Paced numbers")
	before := c.waitSubtasks(id, sources, 30*time.Second, allIn("RUNNING"))
	onVictim := map[int]bool{}
	for _, s := range before {
		if s.TaskManagerID == "tm-victim" {
			onVictim[s.Subtask] = true
		}
	}
	if len(onVictim) != 2 {
		t.Fatalf("sources on the victim: %v, want 2 of 4", onVictim)
	}
	c.startTaskManagerProcessWith("tm-spare", 2, nil)
	c.waitForTaskManagers(3)
	c.waitCheckpointAfter(id, 1, 60*time.Second)
	c.kill9("tm-victim")
	c.waitFor(id, 2*time.Minute, "FINISHED")
	checkNumbers(t, out, n)
	for _, s := range c.jobVertex(id, sources).Subtasks {
		switch {
		case onVictim[s.Subtask] && s.Attempt == 0:
			t.Errorf("source %d ran on the killed TaskManager, yet finished in attempt 0", s.Subtask)
		case !onVictim[s.Subtask] && s.Attempt != 0:
			t.Errorf("source %d of a healthy region restarted (attempt %d)", s.Subtask, s.Attempt)
		}
	}
	st, err := c.client.JobCheckpoints(c.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Counts.Restored == 0 {
		t.Errorf("no restore counted: %+v", st.Counts)
	}
}

// TestCheckpointUnreachableStorage points checkpoints at an HDFS that does
// not answer: each checkpoint fails naming the storage and the cause, the
// job fails over as tolerable-failed-checkpoints says, and the cluster
// stays up and runs the next job.
func TestCheckpointUnreachableStorage(t *testing.T) {
	parallel(t)
	settings := checkpointSettings("hdfs://127.0.0.1:1/gofl/checkpoints")
	settings["restart-strategy.fixed-delay.attempts"] = "1"
	c := newCluster(t, settings)
	c.startTaskManagerProcessWith("tm-0", 4, nil)
	c.waitForTaskManagers(1)
	id := c.keyedCountsJob(2, 1_000_000, 8, 1000, filepath.Join(t.TempDir(), "out"))
	c.waitFor(id, 2*time.Minute, "FAILED")
	st, err := c.client.JobCheckpoints(c.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.Latest.Failed == nil {
		t.Fatalf("no failed checkpoint recorded: %+v", st.Counts)
	}
	msg := st.Latest.Failed.FailureMessage
	for _, w := range []string{"127.0.0.1:1", "connection refused"} {
		if !strings.Contains(msg, w) {
			t.Errorf("checkpoint failure %q does not name %s", msg, w)
		}
	}
	// The cluster is still there for a job without checkpoints to storage.
	out := filepath.Join(t.TempDir(), "numbers")
	jg := c.planSDKJob(testJobBinary, 2, "paced-numbers", "--count", "2000", "--rate", "100000", "--output", out)
	jg.Config["execution.checkpointing.interval"] = "0"
	next := c.submit(jg)
	c.waitFor(next, time.Minute, "FINISHED")
	checkNumbers(t, out, 2000)
}

// restoreLine is a task's "restored the task's state" log line.
type restoreLine struct {
	Attempt     string  `json:"attempt"`
	Checkpoint  int64   `json:"checkpoint_id"`
	Local       bool    `json:"local_recovery"`
	LocalFiles  int     `json:"local_files"`
	RemoteFiles int     `json:"remote_files"`
	Fallbacks   int     `json:"local_fallbacks"`
	DurationMs  float64 `json:"duration"`
}

// restoreLines reads the restore lines of a runner log.
func restoreLines(t *testing.T, path string) []restoreLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []restoreLine
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, `"message":"restored the task's state"`) {
			continue
		}
		var r restoreLine
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("restore line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// subtasksWithLocalCopies counts the subtasks with a state file copy of
// checkpoint id under a job's local state directory
// (<vertex>-<subtask>/chk-<id>/<file>).
func subtasksWithLocalCopies(dir string, id int64) int {
	files, _ := filepath.Glob(filepath.Join(dir, "*", fmt.Sprintf("chk-%d", id), "*"))
	subtasks := map[string]bool{}
	for _, f := range files {
		if !strings.HasPrefix(filepath.Base(f), ".") {
			subtasks[filepath.Dir(filepath.Dir(f))] = true
		}
	}
	return len(subtasks)
}

// TestCheckpointLocalRecovery runs keyed-counts with
// state.backend.local-recovery on one TaskManager and kills its job runner
// with -9: the tasks restart on the same TaskManager and restore their
// keyed state from the local copies; with those deleted first, from
// checkpoint storage. The output is exact either way, and the job's local
// state is deleted once the job is released.
func TestCheckpointLocalRecovery(t *testing.T) {
	parallel(t)
	for _, tc := range []struct {
		name        string
		deleteLocal bool
	}{{"local", false}, {"fallback", true}} {
		t.Run(tc.name, func(t *testing.T) {
			settings := checkpointSettings("file://" + filepath.Join(t.TempDir(), "checkpoints"))
			settings["state.backend.local-recovery"] = "true"
			// Time to delete the local copies between the kill and the restart;
			// idle slots stay with the job meanwhile (a TaskManager holding no
			// slot of a job releases it there, local state included).
			settings["restart-strategy.fixed-delay.delay"] = "2 s"
			settings["slot.idle.timeout"] = "60 s"
			c := newCluster(t, settings)
			c.startTaskManagerProcessWith("tm-0", 4, nil)
			c.waitForTaskManagers(1)
			out := filepath.Join(t.TempDir(), "out")
			// Enough keys that each counting subtask's state outgrows the
			// inline threshold and goes to a file, and records for 40 s, so
			// the kill lands before the input ends even on a loaded machine
			// (a job restored after its final checkpoint has nothing to read).
			const count, keys = 100000, 16000
			id := c.keyedCountsJob(2, count, keys, 2500, out)
			c.waitFor(id, 30*time.Second, "RUNNING")
			var pid int
			var jobDir, localDir string
			c.eventually(90*time.Second, func() error {
				pids := runnerPids(id)
				if len(pids) != 1 {
					return fmt.Errorf("runners of the job: %v", pids)
				}
				cwd, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pids[0]), "cwd"))
				if err != nil {
					return err
				}
				pid, jobDir = pids[0], cwd
				localDir = filepath.Join(cwd, "..", "..", "localState", id)
				return nil
			})
			// The kill follows a checkpoint whose state has files (local
			// copies) for at least two subtasks: state grows, so the one
			// restored has them too. Early checkpoints' small state travels
			// inline, and a restore of one reads no file at all.
			var last int64
			c.eventually(90*time.Second, func() error {
				st, err := c.client.JobCheckpoints(c.ctx, id)
				if err != nil {
					return err
				}
				if st.Latest.Completed == nil {
					return errors.New("no checkpoint completed yet")
				}
				last = st.Latest.Completed.ID
				if n := subtasksWithLocalCopies(localDir, last); n < 2 {
					return fmt.Errorf("%d subtasks have local state copies of checkpoint %d in %s, want one per counting subtask", n, last, localDir)
				}
				return nil
			})
			if got := restoreLines(t, filepath.Join(jobDir, "runner.log")); len(got) != 0 {
				t.Fatalf("restores before any failure: %+v", got)
			}
			t.Logf("kill -9 job runner %d after checkpoint %d", pid, last)
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			if tc.deleteLocal {
				c.eventually(30*time.Second, func() error {
					if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !strings.Contains(string(b), ") Z ") {
						return fmt.Errorf("runner %d still alive", pid)
					}
					return nil
				})
				if err := os.RemoveAll(localDir); err != nil {
					t.Fatal(err)
				}
				if pids := runnerPids(id); len(pids) != 0 && !(len(pids) == 1 && pids[0] == pid) {
					t.Fatalf("a new runner %v started before the local state was deleted", pids)
				}
			}
			var lines []restoreLine
			c.eventually(90*time.Second, func() error {
				lines = restoreLines(t, filepath.Join(jobDir, "runner.log"))
				// Both counting subtasks, each with its own file: one alone
				// may read two (the other's for the sink's union list state).
				withFiles := 0
				for _, l := range lines {
					if l.LocalFiles+l.RemoteFiles > 0 {
						withFiles++
					}
				}
				if withFiles < 2 {
					return fmt.Errorf("restores so far: %+v", lines)
				}
				return nil
			})
			local, remote, fallbacks := 0, 0, 0
			for _, l := range lines {
				if !l.Local {
					t.Errorf("task %s restored without local recovery", l.Attempt)
				}
				local, remote, fallbacks = local+l.LocalFiles, remote+l.RemoteFiles, fallbacks+l.Fallbacks
				if l.LocalFiles+l.RemoteFiles > 0 {
					t.Logf("%s restored checkpoint %d in %.1f ms: %d local, %d remote files", l.Attempt, l.Checkpoint, l.DurationMs, l.LocalFiles, l.RemoteFiles)
				}
			}
			if tc.deleteLocal && (local != 0 || remote < 2 || fallbacks != 0) {
				t.Fatalf("with the local copies deleted: %d local, %d remote files, %d fallbacks: %+v", local, remote, fallbacks, lines)
			}
			// A counting subtask reads its own file locally; the other's only
			// for the union list state of the sink chained to it.
			if !tc.deleteLocal && (local < 2 || fallbacks != 0) {
				t.Fatalf("want every subtask's own state file from its local copy: %d local, %d remote files, %d fallbacks: %+v", local, remote, fallbacks, lines)
			}
			for _, l := range lines {
				if !tc.deleteLocal && l.RemoteFiles > 0 && l.LocalFiles != 1 {
					t.Errorf("task %s read %d remote files and %d local ones; its own file has a local copy", l.Attempt, l.RemoteFiles, l.LocalFiles)
				}
			}
			c.waitFor(id, 3*time.Minute, "FINISHED")
			checkKeyedCounts(t, out, count, keys)
			c.eventually(60*time.Second, func() error {
				if _, err := os.Stat(localDir); !os.IsNotExist(err) {
					return fmt.Errorf("the finished job's local state %s is still there (%v)", localDir, err)
				}
				return nil
			})
		})
	}
}
