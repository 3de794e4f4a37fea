package jobmanager_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"
)

// tmLogAllocations lists, in order, the allocation IDs of the TaskManager
// log lines with message msg (JSON lines, zerolog's "message" key).
func tmLogAllocations(t *testing.T, logPath, msg string) []string {
	t.Helper()
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^.*"message":"` + regexp.QuoteMeta(msg) + `".*$`)
	alloc := regexp.MustCompile(`"allocation_id":"([^"]+)"`)
	var out []string
	for _, line := range re.FindAllString(string(b), -1) {
		if m := alloc.FindStringSubmatch(line); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

func sortedUnique(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// TestHATaskManagerKeepsTheJobsSlots: on leader loss the TaskManager
// cancels the job's tasks but keeps its slots (taskmanager.slot.timeout),
// reports them allocated to the new leader and offers them to the
// recovered JobMaster, which takes them: the job runs again on the same
// allocations (no new RequestSlot, no slot freed or expired), resumes
// from its latest checkpoint, and the output is exact. One TaskManager
// with just the job's 2 slots, so the job can run nowhere else.
func TestHATaskManagerKeepsTheJobsSlots(t *testing.T) {
	parallel(t)
	settings := checkpointSettings("file://" + filepath.Join(t.TempDir(), "checkpoints"))
	settings["deployment.provider"] = "standalone"
	// Far beyond the test's waits: the slots must come back because the
	// TaskManager kept them, not after a timeout.
	settings["heartbeat.timeout"] = "60 s"
	h := newHACluster(t, settings)
	h.startJobManager()
	h.startJobManager()
	leader := h.leader(nil)
	const tm = "tm-kept"
	h.startTaskManager(tm, 2)
	tmLog := filepath.Join(h.dir, tm+".log")
	h.waitForTaskManagers(1)
	out := filepath.Join(t.TempDir(), "out")
	const count, keys = 16000, 8
	id := h.keyedCountsJob(2, count, keys, 1000, out)
	h.waitFor(id, 60*time.Second, "RUNNING")
	last := h.waitCheckpointAfter(id, 0, 60*time.Second)
	allocs := sortedUnique(tmLogAllocations(t, tmLog, "slot allocated"))
	if len(allocs) != 2 {
		t.Fatalf("allocations before the kill: %v, want 2", allocs)
	}
	killed := time.Now()
	h.kill9(leader)
	h.leader(leader)
	h.waitFor(id, 60*time.Second, "RUNNING")
	running := time.Since(killed)
	next := h.waitCheckpointAfter(id, last, 60*time.Second)
	t.Logf("job RUNNING on the new leader %v after the kill; checkpoint %d (after %d) completed %v after the kill (measured under load)",
		running.Round(time.Millisecond), next, last, time.Since(killed).Round(time.Millisecond))
	if got := sortedUnique(tmLogAllocations(t, tmLog, "keeping the slot for the job's next JobMaster")); !slices.Equal(got, allocs) {
		t.Errorf("kept allocations %v, want %v", got, allocs)
	}
	if got := sortedUnique(tmLogAllocations(t, tmLog, "slot allocated")); !slices.Equal(got, allocs) {
		t.Errorf("allocations after the failover %v, want only the kept %v (no new RequestSlot)", got, allocs)
	}
	// The TaskManager has just these 2 slots: the job runs again on the
	// kept allocations, which were never freed.
	if freed := tmLogAllocations(t, tmLog, "freeing slot"); len(freed) > 0 {
		t.Errorf("slots freed during the failover: %v", freed)
	}
	if expired := tmLogAllocations(t, tmLog, "no JobMaster took the kept slot in time; freeing it"); len(expired) > 0 {
		t.Errorf("kept slots expired: %v", expired)
	}
	h.waitFor(id, 3*time.Minute, "FINISHED")
	checkKeyedCounts(t, out, count, keys)
}
