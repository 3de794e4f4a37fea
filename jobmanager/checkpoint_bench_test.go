package jobmanager_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/gofl/gofl/jobgraph"
)

// BenchmarkCheckpointThroughput runs keyed-counts (a keyed running count
// per record through the transactional text sink) unthrottled at p=2 on a
// cluster of real processes (two TaskManagers of one slot each), with
// checkpoints every second and with checkpointing off, and reports
// records/s of each: Flink's cost of checkpointing, and the ratio (%-of-off). A bounded run ends after its
// final checkpoint, triggered as soon as every task ended its data.
// GOFL_BENCH_CHECKPOINT_RECORDS sets the records per run (default
// 60,000,000). Run it with -benchtime 1x: GOFL_BENCH_PAIRS sets the
// interleaved pairs (default 6).
func BenchmarkCheckpointThroughput(b *testing.B) {
	n, pairs := int64(60_000_000), benchPairs(6)
	if v, err := strconv.ParseInt(os.Getenv("GOFL_BENCH_CHECKPOINT_RECORDS"), 10, 64); err == nil && v > 0 {
		n = v
	}
	// Two clusters side by side, one without checkpoints and one with, and
	// their runs interleaved (runPairs). Two clusters at once: each one's
	// goroutine check would see the other's; TestMain checks the package
	// at the end.
	parallelTests.Store(b.Name(), true)
	dirs := func() map[string]string {
		return map[string]string{"state.checkpoints.dir": "file://" + filepath.Join(b.TempDir(), "checkpoints")}
	}
	off := startPairedSide(b, "off", 1, dirs(), nil)
	on := startPairedSide(b, "every-1s", 1, merged(dirs(), map[string]string{"execution.checkpointing.interval": "1 s"}), nil)
	dir := b.TempDir()
	out := func(s *pairedSide, pair int) string {
		return filepath.Join(dir, fmt.Sprintf("out-%s-%d", s.name, pair))
	}
	b.ResetTimer()
	runs := runPairs(b, pairs*b.N, [2]*pairedSide{off, on}, func(s *pairedSide, pair int) *jobgraph.JobGraph {
		count := n
		if pair < 0 { // warm-up
			count = 100_000
		}
		return s.c.planSDKJob(testJobBinary, 2, keyedCountsArgs(count, 1024, 1e12, out(s, pair))...)
	}, func(s *pairedSide, pair int) {
		if err := os.RemoveAll(out(s, pair)); err != nil {
			b.Fatal(err)
		}
	})
	b.StopTimer()
	reportPairs(b, [2]*pairedSide{off, on}, runs, pairedWork{"Mrecords", float64(n) / 1e6}, pairedWork{"records", float64(n)})
	var total [2]float64
	for i := range runs {
		for _, r := range runs[i] {
			total[i] += r.wall.Seconds()
		}
	}
	b.ReportMetric(100*total[0]/total[1], "%-of-off")
}
