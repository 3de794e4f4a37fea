package jobmanager_test

// Unaligned checkpoints end to end: under back-pressure (a fast source
// feeding a slow map) an unaligned checkpoint completes in well under a
// second, while an aligned one waits for the in-flight buffers to drain;
// and with unaligned checkpoints on, keyed-counts through the
// transactional sink stays exactly once across a TaskManager kill.

import (
	"math/rand"
	"path/filepath"
	"testing"
	"time"
)

// Not parallel: it bounds a checkpoint's duration, which other clusters
// on the same cores would stretch.
func TestUnalignedCheckpointUnderBackPressure(t *testing.T) {
	durations := map[bool]int64{}
	for _, unaligned := range []bool{true, false} {
		name := "aligned"
		if unaligned {
			name = "unaligned"
		}
		t.Run(name, func(t *testing.T) {
			settings := checkpointSettings("file://" + filepath.Join(t.TempDir(), "checkpoints"))
			settings["execution.checkpointing.interval"] = "1 s"
			if unaligned {
				settings["execution.checkpointing.unaligned.enabled"] = "true"
			}
			c := newCluster(t, settings)
			c.startTaskManagerProcessWith("tm-0", 1, nil)
			c.startTaskManagerProcessWith("tm-1", 1, nil)
			c.waitForTaskManagers(2)
			id := c.runSDKJob(testJobBinary, 2, "slow-sink", "--delay", "2ms", "--output", filepath.Join(t.TempDir(), "out"))
			c.waitFor(id, 30*time.Second, "RUNNING")
			// Let the back-pressure build up, then take the second
			// completed checkpoint (the first may start before it).
			first := c.waitCheckpointAfter(id, 0, 3*time.Minute)
			c.waitCheckpointAfter(id, first, 3*time.Minute)
			st, err := c.client.JobCheckpoints(c.ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			ck := st.Latest.Completed
			durations[unaligned] = ck.EndToEndDuration
			t.Logf("%s checkpoint %d under back-pressure: %d ms end to end, %d bytes in-flight data persisted",
				name, ck.ID, ck.EndToEndDuration, ck.PersistedData)
			if unaligned {
				if ck.EndToEndDuration >= 1000 {
					t.Errorf("unaligned checkpoint took %d ms, want < 1 s", ck.EndToEndDuration)
				}
				if ck.PersistedData <= 0 {
					t.Errorf("unaligned checkpoint persisted no in-flight data under back-pressure")
				}
			}
			if err := c.client.CancelJob(c.ctx, id); err != nil {
				t.Fatal(err)
			}
			c.waitFor(id, time.Minute, "CANCELED")
		})
	}
	if a, u := durations[false], durations[true]; a > 0 && u > 0 && a < 3*u {
		t.Errorf("aligned %d ms vs unaligned %d ms: want the aligned one much longer", a, u)
	}
}

func TestUnalignedCheckpointExactlyOnceAfterKill(t *testing.T) {
	parallel(t)
	settings := checkpointSettings("file://" + filepath.Join(t.TempDir(), "checkpoints"))
	settings["execution.checkpointing.unaligned.enabled"] = "true"
	c := newCluster(t, settings)
	tms := []string{"tm-0", "tm-1"}
	for _, id := range tms {
		c.startTaskManagerProcessWith(id, 2, nil)
	}
	c.waitForTaskManagers(len(tms))
	out := filepath.Join(t.TempDir(), "out")
	const count, keys = 12000, 16
	id := c.keyedCountsJob(2, count, keys, 1500, out)
	c.waitFor(id, 30*time.Second, "RUNNING")
	last := c.waitCheckpointAfter(id, 0, 60*time.Second)
	victim := tms[rand.Intn(len(tms))]
	t.Logf("kill -9 TaskManager %s after checkpoint %d", victim, last)
	c.kill9(victim)
	c.startTaskManagerProcessWith("tm-2", 2, nil)
	c.waitCheckpointAfter(id, last, 2*time.Minute)
	c.waitFor(id, 3*time.Minute, "FINISHED")
	checkKeyedCounts(t, out, count, keys)
}
