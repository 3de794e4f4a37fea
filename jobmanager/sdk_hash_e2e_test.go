package jobmanager_test

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gofl/gofl/internal/joinsuite"
	"github.com/gofl/gofl/taskmanager"
	"github.com/gofl/gofl/taskmanager/runner"
)

// The hybrid hash join (building on either input) and the spilling batch
// aggregation on a cluster of two TaskManagers with 512 KiB of managed
// memory per slot, at parallelism 3: the results match the plain-Go
// references, and no spill file is left in io.tmp.dirs.
func TestHashJoinAndAggregationOnCluster(t *testing.T) {
	parallel(t)
	c := newCluster(t, nil)
	tmp := t.TempDir()
	for _, id := range []string{"tm-a", "tm-b"} {
		c.startTaskManagerWith(id, 2, func(cfg *taskmanager.Config) {
			cfg.RunnerEnv = append(cfg.RunnerEnv, runner.EnvManagedMemory+"="+strconv.Itoa(512<<10), runner.EnvTmpDirs+"="+tmp)
		})
	}
	c.waitForTaskManagers(2)
	join := joinsuite.Spec{NA: 20_000, NB: 15_000, Keys: 2000, Pad: 24}
	agg := joinsuite.Spec{NA: 60_000, Keys: 40_000, Pad: 24}
	cases := []struct {
		name string
		args func(out string) []string
		want []string
	}{
		{"hash-first", func(out string) []string { return joinArgs(join, out, "--hint", "hash-first") }, joinsuite.Expected(join)},
		{"hash-second", func(out string) []string { return joinArgs(join, out, "--hint", "hash-second") }, joinsuite.Expected(join)},
		{"aggregate", func(out string) []string { return joinArgs(agg, out, "--aggregate") }, joinsuite.ExpectedAggregation(agg)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			id := c.runSDKJob(testJobBinary, 3, tc.args(out)...)
			c.waitFor(id, 3*time.Minute, "FINISHED")
			got := readParts(t, out)
			if d := diffLines(got, tc.want); d != "" {
				t.Fatalf("%d lines, want %d; differences (+extra, -missing):\n%s", len(got), len(tc.want), d)
			}
		})
	}
	if left := filesUnder(tmp); len(left) > 0 {
		t.Errorf("spill files left after the jobs: %v", left)
	}
}
