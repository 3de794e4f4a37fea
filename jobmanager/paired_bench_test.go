package jobmanager_test

// Paired benchmarks: two clusters that differ in one setting live side by
// side, and each pair of runs runs the same job on both, in alternating
// order (a, b; b, a; ...), so a change in the machine's load hits both
// alike and the pair's ratio is steadier than that of two separate runs.
// A run's cost is its wall time and the CPU time (user+sys, from /proc)
// its cluster's TaskManager processes and their job runners spent: on a
// shared machine CPU time varies far less than wall time.

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/jobgraph"
)

// pairedSide is one cluster of a paired benchmark: a JobManager in this
// process and two TaskManager processes.
type pairedSide struct {
	name string
	c    *cluster
	tms  []int // TaskManager pids
	// beside, if not nil, runs next to each of this side's runs, from
	// before the submission until the job ended, and returns once stop
	// is closed: load the setting brings, such as a metrics scraper.
	beside func(stop <-chan struct{})
}

// startPairedSide starts a side: its JobManager with settings, its two
// TaskManagers with slots slots each and tmSettings. A job that takes
// fewer slots than there are may land on one TaskManager in one run and
// on both in the next, and exchanging records in one runner costs less
// than across two: runs then differ by placement, not by the setting, so
// a benchmark gives each side exactly the slots its job takes.
func startPairedSide(b *testing.B, name string, slots int, settings, tmSettings map[string]string) *pairedSide {
	b.Helper()
	c := newCluster(b, settings)
	s := &pairedSide{name: name, c: c}
	for _, id := range []string{name + "-tm-0", name + "-tm-1"} {
		c.startTaskManagerProcessWith(id, slots, tmSettings)
		s.tms = append(s.tms, c.tmPid(id))
	}
	c.waitForTaskManagers(2)
	return s
}

// benchPairs is the number of measured pairs a paired benchmark runs in
// each of its b.N iterations: GOFL_BENCH_PAIRS, else def. Run paired
// benchmarks with -benchtime 1x; the pairs, not b.N, set the sample size.
func benchPairs(def int) int {
	if v, err := strconv.Atoi(os.Getenv("GOFL_BENCH_PAIRS")); err == nil && v > 0 {
		return v
	}
	return def
}

// pairedRun is the cost of one run: the job's duration as its JobMaster
// measured it and the CPU time of the side's processes.
type pairedRun struct{ wall, cpu time.Duration }

// runPairs runs a warm-up pair (pair -1: binary fetches, page cache), then
// n measured pairs, side 0 first in even pairs and side 1 first in odd
// ones. plan (not measured) returns the job of side s in a pair; check, if
// not nil, checks a run's output after it was measured. A run is measured
// from its submission until it is FINISHED (wall time) and its job runners
// have exited (CPU time: their shutdown counts too).
func runPairs(b *testing.B, n int, sides [2]*pairedSide, plan func(s *pairedSide, pair int) *jobgraph.JobGraph,
	check func(s *pairedSide, pair int)) (runs [2][]pairedRun) {
	b.Helper()
	for pair := -1; pair < n; pair++ {
		order := []int{0, 1}
		if pair%2 != 0 && pair >= 0 {
			order = []int{1, 0}
		}
		for _, i := range order {
			s := sides[i]
			jg := plan(s, pair)
			r := s.run(b, jg)
			if check != nil {
				check(s, pair)
			}
			if pair < 0 {
				continue
			}
			runs[i] = append(runs[i], r)
		}
	}
	return runs
}

// run submits jg to the side's cluster and measures it until its job
// runners exited.
func (s *pairedSide) run(b *testing.B, jg *jobgraph.JobGraph) pairedRun {
	b.Helper()
	stop, done := make(chan struct{}), make(chan struct{})
	if s.beside != nil {
		go func() { defer close(done); s.beside(stop) }()
	} else {
		close(done)
	}
	cpu0 := s.cpu()
	id := s.c.submit(jg)
	d := s.c.waitFor(id, 10*time.Minute, "FINISHED")
	close(stop)
	<-done
	s.awaitRunnersExited()
	return pairedRun{wall: time.Duration(d.Duration) * time.Millisecond, cpu: s.cpu() - cpu0}
}

// awaitRunnersExited waits until the side's job runners exited (they end
// when the JobMaster released the job's slots), so that cpu counts their
// time: a runner's CPU moves to its TaskManager's children time when
// reaped.
func (s *pairedSide) awaitRunnersExited() {
	s.c.eventually(waitLimit, func() error {
		if kids := s.children(); len(kids) > 0 {
			return fmt.Errorf("%s: job runners %v still running", s.name, kids)
		}
		return nil
	})
}

// procStat is a process's CPU times from /proc/<pid>/stat.
type procStat struct {
	ppid int
	// self is its own user+sys time, children that of its children it
	// waited for.
	self, children time.Duration
}

// clockTick is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

func readProcStat(pid int) (procStat, bool) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, false
	}
	// The fields after the command name (which may hold spaces), from
	// field 3 (state): ppid is field 4, utime..cstime are 14..17.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 15 {
		return procStat{}, false
	}
	n := func(k int) time.Duration {
		v, _ := strconv.ParseInt(f[k-3], 10, 64)
		return time.Duration(v) * clockTick
	}
	ppid, _ := strconv.Atoi(f[1])
	return procStat{ppid: ppid, self: n(14) + n(15), children: n(16) + n(17)}, true
}

// children lists the live (or not yet reaped) child processes of the
// side's TaskManagers: its job runners.
func (s *pairedSide) children() map[int]procStat {
	out := map[int]procStat{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readProcStat(pid); ok && slices.Contains(s.tms, st.ppid) {
			out[pid] = st
		}
	}
	return out
}

// cpu is the CPU time the side's TaskManagers and their job runners spent
// so far: an ended runner's time moves to its TaskManager's children time
// when reaped, so the sum only grows.
func (s *pairedSide) cpu() time.Duration {
	var total time.Duration
	for _, pid := range s.tms {
		if st, ok := readProcStat(pid); ok {
			total += st.self + st.children
		}
	}
	for _, st := range s.children() {
		total += st.self + st.children
	}
	return total
}

// pairedWork is what one run does, in a unit rates are reported in.
type pairedWork struct {
	unit   string // "MB", "records"
	amount float64
}

// reportPairs logs each pair and reports, per side, the median rate in
// every unit of rates (<unit>/s-<side>) and the median CPU time per
// cpuPer's unit (cpu-ms/<unit>-<side>); and the cost of side 1 over side 0
// from the pairs' ratios (the ratio of each pair's wall times and of its
// CPU times, as a % over 1): their median, min, max and the half-width of
// the 95% confidence interval of their mean (%cost-{wall,cpu}-...), so a
// figure comes with its noise.
func reportPairs(b *testing.B, sides [2]*pairedSide, runs [2][]pairedRun, cpuPer pairedWork, rates ...pairedWork) {
	b.Helper()
	// Go keeps 10 lines of a benchmark's log: one line per side and cost.
	var wallCost, cpuCost []float64
	for i := range runs[0] {
		r0, r1 := runs[0][i], runs[1][i]
		wallCost = append(wallCost, 100*(r1.wall.Seconds()/r0.wall.Seconds()-1))
		cpuCost = append(cpuCost, 100*(r1.cpu.Seconds()/r0.cpu.Seconds()-1))
	}
	for i, s := range sides {
		var wall, cpuRuns []string
		for _, r := range runs[i] {
			wall, cpuRuns = append(wall, r.wall.Round(time.Millisecond).String()), append(cpuRuns, r.cpu.String())
		}
		b.Logf("%s runs: wall %v, cpu %v", s.name, wall, cpuRuns)
		for _, u := range rates {
			var v []float64
			for _, r := range runs[i] {
				v = append(v, u.amount/r.wall.Seconds())
			}
			b.ReportMetric(median(v), u.unit+"/s-"+s.name)
		}
		var cpu []float64
		for _, r := range runs[i] {
			cpu = append(cpu, float64(r.cpu.Milliseconds())/cpuPer.amount)
		}
		b.ReportMetric(median(cpu), "cpu-ms/"+cpuPer.unit+"-"+s.name)
	}
	for _, c := range []struct {
		name string
		v    []float64
	}{{"wall", wallCost}, {"cpu", cpuCost}} {
		b.ReportMetric(median(c.v), "%cost-"+c.name+"-median")
		b.ReportMetric(slices.Min(c.v), "%cost-"+c.name+"-min")
		b.ReportMetric(slices.Max(c.v), "%cost-"+c.name+"-max")
		mean, half := meanCI95(c.v)
		b.ReportMetric(half, "%cost-"+c.name+"-ci95")
		pairs := make([]string, len(c.v))
		for i, x := range c.v {
			pairs[i] = fmt.Sprintf("%+.1f", x)
		}
		b.Logf("%s cost of %s over %s: median %+.1f%%, mean %+.1f%% ± %.1f%% (95%% CI, %d pairs), min %+.1f%%, max %+.1f%%; pairs %v",
			c.name, sides[1].name, sides[0].name, median(c.v), mean, half, len(c.v), slices.Min(c.v), slices.Max(c.v), pairs)
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// meanCI95 is the mean of v and the half-width of its 95% confidence
// interval (Student's t; +Inf for fewer than two values).
func meanCI95(v []float64) (mean, half float64) {
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	if len(v) < 2 {
		return mean, math.Inf(1)
	}
	var ss float64
	for _, x := range v {
		ss += (x - mean) * (x - mean)
	}
	sd := math.Sqrt(ss / float64(len(v)-1))
	// t(0.975, df) for df = 1..10; at most 2.2 beyond.
	t := []float64{12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23}
	q := 2.2
	if df := len(v) - 1; df <= len(t) {
		q = t[df-1]
	}
	return mean, q * sd / math.Sqrt(float64(len(v)))
}

// TestPairedStats checks the paired benchmarks' arithmetic and their
// reading of /proc.
func TestPairedStats(t *testing.T) {
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median of 3, 1, 2 = %v", got)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median of 4, 1, 3, 2 = %v", got)
	}
	// Mean 2, sd 1, 3 values: t(0.975, 2) × 1 / √3.
	mean, half := meanCI95([]float64{1, 2, 3})
	if mean != 2 || math.Abs(half-4.30/math.Sqrt(3)) > 1e-9 {
		t.Errorf("meanCI95(1, 2, 3) = %v ± %v", mean, half)
	}
	if _, half := meanCI95([]float64{5}); !math.IsInf(half, 1) {
		t.Errorf("one value's interval ± %v, want +Inf", half)
	}
	st, ok := readProcStat(os.Getpid())
	if !ok || st.ppid != os.Getppid() {
		t.Fatalf("this process's stat %+v (%v), parent %d", st, ok, os.Getppid())
	}
	// Its CPU time grows as it works.
	var sink float64
	for deadline := time.Now().Add(waitLimit); ; {
		now, _ := readProcStat(os.Getpid())
		if now.self < st.self {
			t.Fatalf("CPU time went from %v back to %v", st.self, now.self)
		}
		if now.self > st.self {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU time stayed %v", st.self)
		}
		for i := 0; i < 1e6; i++ {
			sink += math.Sqrt(float64(i))
		}
	}
	_ = sink
	if _, ok := readProcStat(-1); ok {
		t.Error("read the stat of pid -1")
	}
}
