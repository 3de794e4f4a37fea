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
// checkpointing, and the ratio (%-of-off). A bounded run ends after its
// final checkpoint, triggered as soon as every task ended its data.
// GOFL_BENCH_CHECKPOINT_RECORDS sets the records per run (default
// 60,000,000); use -benchtime Nx for N interleaved pairs.
func BenchmarkCheckpointThroughput(b *testing.B) {
	n := int64(60_000_000)
	if v, err := strconv.ParseInt(os.Getenv("GOFL_BENCH_CHECKPOINT_RECORDS"), 10, 64); err == nil && v > 0 {
		n = v
	}
	// Two clusters side by side, one without checkpoints and one with, and
	// their runs interleaved (off, on, on, off, ...): a change in the
	// machine's load hits both alike, so the ratio is steadier than that of
	// two separate runs.
	type variant struct {
		name  string
		c     *cluster
		total time.Duration
	}
	start := func(name string, extra map[string]string) *variant {
		settings := map[string]string{"state.checkpoints.dir": "file://" + filepath.Join(b.TempDir(), "checkpoints")}
		for k, v := range extra {
			settings[k] = v
		}
		c := newCluster(b, settings)
		c.startTaskManagerProcessWith("tm-0", 2, nil)
		c.startTaskManagerProcessWith("tm-1", 2, nil)
		c.waitForTaskManagers(2)
		return &variant{name: name, c: c}
	}
	// Two clusters at once: each one's goroutine check would see the
	// other's; TestMain checks the package at the end.
	parallelTests.Store(b.Name(), true)
	off := start("off", nil)
	on := start("every-1s", map[string]string{"execution.checkpointing.interval": "1 s"})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		order := []*variant{off, on}
		if i%2 == 1 {
			order[0], order[1] = on, off
		}
		for _, v := range order {
			out := filepath.Join(b.TempDir(), fmt.Sprintf("out-%s-%d", v.name, i))
			begin := time.Now()
			id := v.c.keyedCountsJob(2, n, 1024, 1e12, out)
			v.c.waitFor(id, 10*time.Minute, "FINISHED")
			d := time.Since(begin)
			v.total += d
			b.Logf("run %d %s: %.0f records/s", i, v.name, float64(n)/d.Seconds())
			if err := os.RemoveAll(out); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, v := range []*variant{off, on} {
		b.ReportMetric(float64(n)*float64(b.N)/v.total.Seconds(), "records/s-"+v.name)
	}
	b.ReportMetric(100*off.total.Seconds()/on.total.Seconds(), "%-of-off")
}
