package jobmanager_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFileSourceSplitsReassignedAfterTaskManagerKilled runs paced-lines
// (TextFileSource: the JobMaster's enumerator hands out 2 KiB splits on
// request) on two TaskManagers and kills -9 one of them while its readers
// are in the middle of their splits: those splits go back to the pool, are
// read again by the restarted readers or the others, and every line of the
// input is in the output exactly once.
func TestFileSourceSplitsReassignedAfterTaskManagerKilled(t *testing.T) {
	parallel(t)
	c := newCluster(t, faultRestart)
	c.startTaskManagerProcessWith("tm-a", 2, nil)
	c.startTaskManagerProcessWith("tm-victim", 2, nil)
	c.waitForTaskManagers(2)
	const n = 12000
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	in := filepath.Join(t.TempDir(), "numbers.txt")
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	// About 6 s of reading: 1000 lines a second per runner process.
	id := c.runSDKJob(testJobBinary, 4, "paced-lines", "--input", in, "--output", out, "--rate", "1000", "--split-size", "2048")
	src := c.vertexID(id, "Lines")
	before := c.waitSubtasks(id, src, 60*time.Second, allIn("RUNNING"))
	victims := 0
	for _, s := range before {
		if s.TaskManagerID == "tm-victim" {
			victims++
		}
	}
	if victims == 0 {
		t.Fatalf("no reader on the victim: %+v", before)
	}
	c.startTaskManagerProcessWith("tm-spare", 2, nil)
	c.waitForTaskManagers(3)
	if v := c.jobVertex(id, src); allIn("RUNNING")(v.Subtasks) != nil {
		t.Fatalf("readers no longer all running before the kill: %+v; the job is too fast for the test", v.Subtasks)
	}
	c.kill9("tm-victim")
	c.failuresRecorded(id, 30*time.Second)
	c.waitFor(id, 90*time.Second, "FINISHED")
	c.logExceptions(id)
	checkNumbers(t, out, n)
	restarted := 0
	for _, s := range c.jobVertex(id, src).Subtasks {
		if s.Attempt > 0 {
			restarted++
		}
	}
	if restarted == 0 {
		t.Errorf("no reader restarted after the kill")
	}
}
