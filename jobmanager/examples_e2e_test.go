package jobmanager_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/examples/keyed-join/keyedjoin"
	"github.com/gofl/gofl/examples/windowed-count/windowedcount"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/stream"
)

// The example binaries, built by TestMain.
var windowedCountBinary, keyedJoinBinary string

// runLocally runs a job builder with args in this process (env.Execute) at
// parallelism p, checks that its plan exchanges records PIPELINED across at
// least one keyed ALL_TO_ALL edge, and returns its output lines, sorted.
func runLocally(t *testing.T, build stream.Builder, p int, args ...string) []string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "local")
	env := stream.NewEnvironment(stream.WithParallelism(p))
	if err := build(env, append(args, "--output", out)); err != nil {
		t.Fatal(err)
	}
	plan, err := env.Plan()
	if err != nil {
		t.Fatal(err)
	}
	hash := 0
	for _, e := range plan.Graph.Edges {
		if e.PartitionType != jobgraph.Pipelined {
			t.Fatalf("edge %s -> %s is %v, want PIPELINED", e.Source, e.Target, e.PartitionType)
		}
		if e.ShipStrategy == "HASH" && e.Distribution == jobgraph.AllToAll {
			hash++
		}
	}
	if hash == 0 {
		t.Fatal("no keyed all-to-all exchange in the plan")
	}
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	lines := readParts(t, out)
	sort.Strings(lines)
	return lines
}

// runExampleOnCluster runs an example binary on the cluster at parallelism
// 4 and asserts that it writes exactly the lines the local executor writes
// for the same arguments.
func (c *cluster) runExampleOnCluster(t *testing.T, bin string, build stream.Builder, args ...string) []string {
	const p = 4
	want := runLocally(t, build, p, args...)
	if len(want) == 0 {
		t.Fatal("the local run wrote nothing")
	}
	out := filepath.Join(t.TempDir(), "cluster")
	id := c.runSDKJob(bin, p, append(args, "--output", out)...)
	c.waitFor(id, 60*time.Second, "FINISHED")
	got := readParts(t, out)
	sort.Strings(got)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%d lines on the cluster, %d locally; diff: %s", len(got), len(want), lineDiff(got, want))
	}
	if files, _ := filepath.Glob(filepath.Join(out, "part-*")); len(files) != p {
		t.Errorf("%d part files, want %d", len(files), p)
	}
	return got
}

// TestExamplesOnCluster runs the streaming examples on two TaskManagers
// with two slots each (parallelism 4, so subtasks and PIPELINED exchanges
// span both processes) and compares their output with a local run.
func TestExamplesOnCluster(t *testing.T) {
	parallel(t)
	c := newCluster(t, nil)
	c.startTaskManager("tm-a", 2)
	c.startTaskManager("tm-b", 2)
	c.waitForTaskManagers(2)

	// Out-of-order events through BoundedOutOfOrderness watermarks into
	// tumbling event-time windows, from one source subtask (so which late
	// events are dropped is deterministic) to four window subtasks.
	t.Run("windowed-count", func(t *testing.T) {
		cfg := windowedcount.DefaultConfig()
		cfg.Events = 6000
		lines := c.runExampleOnCluster(t, windowedCountBinary, windowedcount.Job,
			"--events", fmt.Sprint(cfg.Events), "--source-parallelism", "1")
		// Fewer events are counted than generated: late ones were dropped,
		// the same ones as locally.
		var counted int64
		for _, l := range lines {
			var w windowedcount.WindowCount
			if _, err := fmt.Sscanf(l, "%s %d %d %d", &w.Key, &w.Start, &w.End, &w.Count); err != nil {
				t.Fatalf("bad line %q: %v", l, err)
			}
			counted += w.Count
		}
		if counted >= cfg.Events || counted < cfg.Events*9/10 {
			t.Fatalf("%d of %d events counted", counted, cfg.Events)
		}
		t.Logf("%d windows, %d of %d events counted", len(lines), counted, cfg.Events)
	})

	// Orders and payments joined in event-time windows, then running
	// totals per user in ValueState applied by event-time timers.
	t.Run("keyed-join", func(t *testing.T) {
		lines := c.runExampleOnCluster(t, keyedJoinBinary, keyedjoin.Job, "--orders", "3000")
		users := map[string]bool{}
		for _, l := range lines {
			users[strings.Fields(l)[0]] = true
		}
		if len(users) != keyedjoin.DefaultConfig().Users {
			t.Fatalf("totals for %d users", len(users))
		}
		t.Logf("%d updates of %d users", len(lines), len(users))
	})
}

// lineDiff describes the first few lines only in got or only in want.
func lineDiff(got, want []string) string {
	count := func(l []string) map[string]int {
		m := map[string]int{}
		for _, s := range l {
			m[s]++
		}
		return m
	}
	g, w := count(got), count(want)
	var d []string
	for s, n := range g {
		if w[s] < n {
			d = append(d, "+"+s)
		}
	}
	for s, n := range w {
		if g[s] < n {
			d = append(d, "-"+s)
		}
	}
	sort.Strings(d)
	if len(d) > 10 {
		d = append(d[:10], fmt.Sprintf("... (%d in all)", len(d)))
	}
	return strings.Join(d, "; ")
}
