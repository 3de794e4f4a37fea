package jobmanager_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// BenchmarkCheckpointThroughput runs keyed-counts (a keyed running count
// per record through the transactional text sink) unthrottled on a
// cluster of real processes, with checkpoints every second and with
// checkpointing off, and reports records/s of each: Flink's cost of
// checkpointing. A bounded run ends only after a final checkpoint (up to
// one interval after its input ended), so runs are long enough for that to
// stay small: at about a million records/s, a run of 20 million spent up to
// 6% of its time waiting for that checkpoint. GOFL_BENCH_CHECKPOINT_RECORDS
// sets the records per run (default 60,000,000).
func BenchmarkCheckpointThroughput(b *testing.B) {
	n := int64(60_000_000)
	if v, err := strconv.ParseInt(os.Getenv("GOFL_BENCH_CHECKPOINT_RECORDS"), 10, 64); err == nil && v > 0 {
		n = v
	}
	for _, tc := range []struct {
		name     string
		settings map[string]string
	}{
		{"off", nil},
		{"every-1s", map[string]string{"execution.checkpointing.interval": "1 s"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			settings := map[string]string{"state.checkpoints.dir": "file://" + filepath.Join(b.TempDir(), "checkpoints")}
			for k, v := range tc.settings {
				settings[k] = v
			}
			c := newCluster(b, settings)
			c.startTaskManagerProcessWith("tm-0", 2, nil)
			c.startTaskManagerProcessWith("tm-1", 2, nil)
			c.waitForTaskManagers(2)
			b.ResetTimer()
			var total time.Duration
			for i := 0; i < b.N; i++ {
				out := filepath.Join(b.TempDir(), fmt.Sprintf("out-%d", i))
				start := time.Now()
				id := c.keyedCountsJob(2, n, 1024, 1e12, out)
				c.waitFor(id, 10*time.Minute, "FINISHED")
				total += time.Since(start)
			}
			b.ReportMetric(float64(n)*float64(b.N)/total.Seconds(), "records/s")
		})
	}
}
