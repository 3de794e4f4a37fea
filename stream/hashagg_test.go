package stream_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gofl/gofl/stream"
	"github.com/gofl/gofl/stream/runtime"
)

type aggRec struct {
	Key string
	V   int64
}

func aggRecAt(keys int64) func(i int64) aggRec {
	return func(i int64) aggRec {
		return aggRec{Key: fmt.Sprintf("key-%08d-with-some-padding", (i*7919)%keys), V: i % 1000}
	}
}

// aggReference sums V per key, in plain Go.
func aggReference(n, keys int64) map[string]int64 {
	want := map[string]int64{}
	at := aggRecAt(keys)
	for i := range n {
		r := at(i)
		want[r.Key] += r.V
	}
	return want
}

// A batch Reduce and Aggregate (no merge function) over many distinct
// keys under a 1 MiB budget spill (numSpilledBytes), their results match
// the reference, and no spill file is left.
func TestHashAggregationSpillsLocal(t *testing.T) {
	const n, keys = 200_000, 60_000
	want := aggReference(n, keys)
	dir := t.TempDir()
	m := runtime.NewLocalMetrics()
	env := stream.NewEnvironment(stream.WithRuntimeMode(stream.Batch), stream.WithParallelism(2),
		stream.WithManagedMemory(1<<20), stream.WithTmpDirs(dir), stream.WithMetrics(m))
	src := stream.Generate(env, n, aggRecAt(keys))
	keyed := stream.KeyBy(src, func(r aggRec) string { return r.Key })
	sums := keyed.Reduce(func(a, b aggRec) aggRec { return aggRec{a.Key, a.V + b.V} }).Collect()
	aggs := stream.Aggregate(keyed, stream.NewAggregator(func() aggRec { return aggRec{} },
		func(v aggRec, acc aggRec) aggRec { return aggRec{v.Key, acc.V + v.V} },
		func(acc aggRec) aggRec { return acc })).Collect()
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	for name, res := range map[string][]aggRec{"Reduce": sums.Values(), "Aggregate": aggs.Values()} {
		got := map[string]int64{}
		for _, r := range res {
			if _, dup := got[r.Key]; dup {
				t.Fatalf("%s emitted key %q twice", name, r.Key)
			}
			got[r.Key] = r.V
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d keys, want %d", name, len(got), len(want))
		}
		for k, w := range want {
			if got[k] != w {
				t.Fatalf("%s: key %q sums to %d, want %d", name, k, got[k], w)
			}
		}
	}
	spilled := map[string]float64{}
	for name, v := range m.Snapshot() {
		if strings.HasSuffix(name, ".numSpilledBytes") {
			for _, op := range []string{"Reduce", "Aggregate"} {
				if strings.Contains(name, op) {
					spilled[op] += v
				}
			}
		}
	}
	if spilled["Reduce"] == 0 || spilled["Aggregate"] == 0 {
		t.Fatalf("spilled bytes %v: want both aggregations to spill under a 1 MiB budget", spilled)
	}
	if left := spillFiles(t, dir); len(left) != 0 {
		t.Fatalf("spill files left after the job: %v", left)
	}
}

// Cancelling a job while its aggregation spills leaves no spill file.
func TestHashAggregationCancelMidSpillLeavesNoFiles(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := stream.NewEnvironment(stream.WithRuntimeMode(stream.Batch), stream.WithManagedMemory(1<<20), stream.WithTmpDirs(dir))
	src := stream.Generate(env, 100_000, aggRecAt(50_000))
	// The aggregation stalls near the end of its input until the job is
	// cancelled: by then it spilled (an Aggregate has no combiner, so
	// its function runs in the aggregation only).
	var calls atomic.Int64
	stream.Aggregate(stream.KeyBy(src, func(r aggRec) string { return r.Key }), stream.NewAggregator(func() int64 { return 0 },
		func(v aggRec, acc int64) int64 {
			if calls.Add(1) == 90_000 {
				<-ctx.Done()
			}
			return acc + v.V
		},
		func(acc int64) int64 { return acc })).Collect()
	cancelOnceSpilled(t, ctx, cancel, env, dir, "agg-")
}
