package jobmanager_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofl/gofl/internal/joinsuite"
)

func joinArgs(s joinsuite.Spec, out string, extra ...string) []string {
	return append([]string{"join-suite", "--na", strconv.FormatInt(s.NA, 10), "--nb", strconv.FormatInt(s.NB, 10),
		"--keys", strconv.FormatInt(s.Keys, 10), "--pad", strconv.Itoa(s.Pad), "--output", out}, extra...)
}

func diffLines(got, want []string) string {
	count := map[string]int{}
	for _, l := range got {
		count[l]++
	}
	for _, l := range want {
		count[l]--
	}
	var diff []string
	for l, d := range count {
		if d != 0 {
			diff = append(diff, strconv.Itoa(d)+" "+l)
		}
	}
	sort.Strings(diff)
	if len(diff) > 30 {
		diff = diff[:30]
	}
	return strings.Join(diff, "\n")
}

// The batch inner join, left outer join and CoGroup on a cluster of two
// TaskManagers at parallelism 1 and 3 (records and sorted runs cross the
// network's blocking partitions), with duplicate keys, keys one side
// lacks, and an empty side, against the plain-Go reference.
func TestJoinSuiteOnCluster(t *testing.T) {
	parallel(t)
	c := newCluster(t, nil)
	c.startTaskManager("tm-a", 2)
	c.startTaskManager("tm-b", 2)
	c.waitForTaskManagers(2)
	cases := []struct {
		name string
		p    int
		spec joinsuite.Spec
	}{
		{"dups-p1", 1, joinsuite.Spec{NA: 2000, NB: 1500, Keys: 300}},
		{"dups-p3", 3, joinsuite.Spec{NA: 2000, NB: 1500, Keys: 300}},
		{"emptyRight-p3", 3, joinsuite.Spec{NA: 500, Keys: 100}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			id := c.runSDKJob(testJobBinary, tc.p, joinArgs(tc.spec, out)...)
			c.waitFor(id, 90*time.Second, "FINISHED")
			got := readParts(t, out)
			want := joinsuite.Expected(tc.spec)
			if len(want) == 0 {
				t.Fatal("empty reference")
			}
			if d := diffLines(got, want); d != "" {
				t.Fatalf("%d lines, want %d; differences (+extra, -missing):\n%s", len(got), len(want), d)
			}
		})
	}
}

// peakWatcher polls the VmHWM of a job's runner processes until stopped
// and keeps the highest reading per process (a process's VmHWM only
// grows, so the last reading before it exits is its peak).
type peakWatcher struct {
	mu   sync.Mutex
	peak map[int]int // pid -> KiB
	stop chan struct{}
	done chan struct{}
}

func watchPeaks(pids func() []int) *peakWatcher {
	w := &peakWatcher{peak: map[int]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			for _, pid := range pids() {
				if kib := readHWM(pid); kib > 0 {
					w.mu.Lock()
					w.peak[pid] = max(w.peak[pid], kib)
					w.mu.Unlock()
				}
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *peakWatcher) Stop() map[int]int {
	close(w.stop)
	<-w.done
	return w.peak
}

func readHWM(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kib int
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kib)
			return kib
		}
	}
	return 0
}

// runJoinUnderBudget runs the checksum join of spec at parallelism p on
// TaskManager processes with managed memory managed and spill directory
// under the test, checks the result against the per-key reference and that
// no spill file is left, and returns the peak RSS per process (MiB, TMs
// and runners) and the wall time.
func runJoinUnderBudget(t testing.TB, spec joinsuite.Spec, p, tms, slots int, managed string) (map[string]int, time.Duration) {
	return runSuiteUnderBudget(t, joinsuite.ExpectedChecksum(spec), p, tms, slots, managed, joinArgs(spec, "", "--checksum"))
}

// runSuiteUnderBudget is runJoinUnderBudget for any join-suite arguments
// (their --output is set here) and reference want.
func runSuiteUnderBudget(t testing.TB, want []string, p, tms, slots int, managed string, args []string) (map[string]int, time.Duration) {
	c := newCluster(t, nil)
	tmp := t.TempDir()
	for i := range tms {
		c.startTaskManagerProcessWith(fmt.Sprintf("tm-%d", i), slots, map[string]string{
			"taskmanager.memory.managed.size": managed, "io.tmp.dirs": tmp})
	}
	c.waitForTaskManagers(tms)
	out := filepath.Join(t.TempDir(), "out")
	args = append(slices.Clip(args), "--output", out)
	start := time.Now()
	id := c.runSDKJob(testJobBinary, p, args...)
	w := watchPeaks(func() []int {
		pids := runnerPids(id)
		for i := range tms {
			pids = append(pids, c.tmPid(fmt.Sprintf("tm-%d", i)))
		}
		return pids
	})
	spillPeak := make(chan int64, 1)
	stopDu := make(chan struct{})
	go func() { // the most spill bytes on disk at once
		var most int64
		defer func() { spillPeak <- most }()
		for {
			var n int64
			_ = filepath.WalkDir(tmp, func(_ string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					if fi, err := d.Info(); err == nil {
						n += fi.Size()
					}
				}
				return nil
			})
			most = max(most, n)
			select {
			case <-stopDu:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	c.waitFor(id, 60*time.Minute, "FINISHED")
	wall := time.Since(start)
	peaks := w.Stop()
	close(stopDu)
	spilled := <-spillPeak
	got := readParts(t, out)
	sort.Strings(got)
	if d := diffLines(got, want); d != "" {
		t.Fatalf("%d lines, want %d; differences (+extra, -missing):\n%s", len(got), len(want), d)
	}
	if left := filesUnder(tmp); len(left) > 0 {
		t.Errorf("spill files left after the job: %v", left)
	}
	tmPids := map[int]string{}
	for i := range tms {
		tmPids[c.tmPid(fmt.Sprintf("tm-%d", i))] = fmt.Sprintf("tm-%d", i)
	}
	res := map[string]int{}
	for pid, kib := range peaks {
		name := tmPids[pid]
		if name == "" {
			name = "runner-" + strconv.Itoa(pid)
		}
		res[name] = kib / 1024
	}
	res["spill-on-disk-peak"] = int(spilled >> 20)
	return res, wall
}

// A join of about 64 MB of generated input under 8 MiB of managed memory
// per TaskManager spills, is exact, and no gofl process's peak RSS passes
// a bound far below what holding the input would take.
func TestJoinUnderSmallManagedMemoryOnCluster(t *testing.T) {
	parallel(t)
	// Left and right records of ~110 bytes (padded keys): 300k a side.
	spec := joinsuite.Spec{NA: 300_000, NB: 300_000, Keys: 100_000, Pad: 100}
	peaks, wall := runJoinUnderBudget(t, spec, 2, 1, 2, "8m")
	const boundMiB = 128
	t.Logf("wall time %v, peak RSS MiB per process: %v", wall, peaks)
	if len(peaks) < 2 {
		t.Fatalf("watched %d processes, want the TaskManager and its runner", len(peaks))
	}
	if peaks["spill-on-disk-peak"] == 0 {
		t.Errorf("nothing was spilled under 8 MiB of managed memory")
	}
	delete(peaks, "spill-on-disk-peak")
	for name, mib := range peaks {
		if mib > boundMiB {
			t.Errorf("%s peaked at %d MiB, above %d MiB", name, mib, boundMiB)
		}
	}
}

// BenchmarkJoin2GB (make bench-join; not in make test) joins about 2 GB of
// generated input, 1 GB a side (records of ~110 bytes), on one TaskManager
// process of 2 slots with taskmanager.memory.managed.size 256m at
// parallelism 2: the result must match the per-key reference and every
// gofl process (TaskManager and runner) must peak below 600 MiB RSS. It
// reports the wall time and the peaks.
func BenchmarkJoin2GB(b *testing.B) {
	spec := joinsuite.Spec{NA: 9_500_000, NB: 9_500_000, Keys: 3_000_000, Pad: 100}
	if v := os.Getenv("GOFL_BENCH_JOIN_RECORDS"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		spec.NA, spec.NB, spec.Keys = n, n, max(n/3, 1)
	}
	for range b.N {
		peaks, wall := runJoinUnderBudget(b, spec, 2, 1, 2, "256m")
		b.ReportMetric(float64(peaks["spill-on-disk-peak"]), "MiB-spilled-peak")
		b.Logf("inputs %d + %d records; wall time %v; peak RSS MiB per process: %v", spec.NA, spec.NB, wall, peaks)
		worst := 0
		delete(peaks, "spill-on-disk-peak")
		for name, mib := range peaks {
			worst = max(worst, mib)
			if mib >= 600 {
				b.Errorf("%s peaked at %d MiB, want under 600 MiB", name, mib)
			}
		}
		b.ReportMetric(wall.Seconds(), "s-wall")
		b.ReportMetric(float64(worst), "MiB-peak-rss-max")
	}
}

// BenchmarkJoin64MB (not in make test) runs the memory-bound test's setup
// (about 64 MB of input, 8 MiB of managed memory, one TaskManager process
// of 2 slots, p=2) with each join strategy, and the aggregation suite
// over the left input, and reports each wall time:
//
//	go test -run '^$' -bench '^BenchmarkJoin64MB$' -benchtime 1x ./jobmanager/
func BenchmarkJoin64MB(b *testing.B) {
	spec := joinsuite.Spec{NA: 300_000, NB: 300_000, Keys: 100_000, Pad: 100}
	for _, hint := range []string{"sort-merge", "hash-first", "hash-second"} {
		b.Run("join-"+hint, func(b *testing.B) {
			for range b.N {
				peaks, wall := runSuiteUnderBudget(b, joinsuite.ExpectedChecksum(spec), 2, 1, 2, "8m", joinArgs(spec, "", "--checksum", "--hint", hint))
				b.ReportMetric(wall.Seconds(), "s-wall")
				b.Logf("join %s: wall time %v; peak RSS MiB per process: %v", hint, wall, peaks)
			}
		})
	}
	b.Run("aggregate", func(b *testing.B) {
		agg := joinsuite.Spec{NA: 600_000, Keys: 200_000, Pad: 100}
		for range b.N {
			peaks, wall := runSuiteUnderBudget(b, joinsuite.ExpectedAggregation(agg), 2, 1, 2, "8m", joinArgs(agg, "", "--aggregate"))
			b.ReportMetric(wall.Seconds(), "s-wall")
			b.Logf("aggregation: wall time %v; peak RSS MiB per process: %v", wall, peaks)
		}
	})
}

// filesUnder lists the files under dir, in any depth.
func filesUnder(dir string) []string {
	var files []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, path)
		}
		return nil
	})
	return files
}
