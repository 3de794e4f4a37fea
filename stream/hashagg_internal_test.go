package stream

import (
	"fmt"
	"os"
	"testing"

	"github.com/gofl/gofl/stream/runtime"
)

type aggKV struct {
	K string
	V int64
}

type aggAcc struct {
	N, Sum int64
}

// runHashAgg feeds n records over keys distinct keys (each key's values
// spread over the input) through op under budget bytes and returns the
// results by key, the bytes spilled and the memory manager.
func runHashAgg[ACC, OUT any](t *testing.T, op *hashAggOp[aggKV, string, ACC, OUT], n, keys int, budget int64, keyOf func(OUT) string) (map[string]OUT, *runtime.MemoryManager) {
	t.Helper()
	dir := t.TempDir()
	iom := runtime.NewIOManager([]string{dir})
	defer func() { _ = iom.Close() }()
	mem := runtime.NewMemoryManager(budget)
	defer func() { _ = mem.Close() }()
	out := &collectOutput{}
	ctx := &runtime.Context{OperatorName: "Agg", Parallelism: 1, MaxParallelism: 128, Output: out,
		Metrics: runtime.NewLocalMetrics(), Batch: runtime.BatchMemory{Memory: mem, IO: iom}}
	if err := op.Open(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		k := fmt.Sprintf("key-%07d-%s", (i*7919)%keys, "padding-padding")
		if err := op.ProcessElement(0, runtime.Record{Value: aggKV{k, int64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := op.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := op.Close(); err != nil {
		t.Fatal(err)
	}
	if mem.Used() != 0 {
		t.Fatalf("%d bytes of managed memory reserved after Close", mem.Used())
	}
	if mem.Peak() > mem.Size() {
		t.Fatalf("managed memory peaked at %d bytes, over the budget of %d", mem.Peak(), mem.Size())
	}
	for _, d := range iom.Dirs() {
		if es, _ := os.ReadDir(d); len(es) != 0 {
			t.Fatalf("%d spill files left after Close", len(es))
		}
	}
	res := map[string]OUT{}
	for _, r := range out.recs {
		v := r.Value.(OUT)
		k := keyOf(v)
		if _, dup := res[k]; dup {
			t.Fatalf("key %q emitted twice", k)
		}
		res[k] = v
	}
	if len(res) != keys {
		t.Fatalf("%d keys emitted, want %d", len(res), keys)
	}
	t.Logf("spilled %d files, %d bytes; peak %d of %d", iom.SpillFiles(), iom.SpilledBytes(), mem.Peak(), mem.Size())
	return res, mem
}

// reference sums are per key: count and sum of the values i with
// (i*7919)%keys == key.
func aggReference(n, keys int) map[string]aggAcc {
	want := map[string]aggAcc{}
	for i := range n {
		k := fmt.Sprintf("key-%07d-%s", (i*7919)%keys, "padding-padding")
		a := want[k]
		a.N++
		a.Sum += int64(i)
		want[k] = a
	}
	return want
}

// The batch hash aggregation against a plain-Go reference: a budget that
// fits, and a 256 KiB budget with many distinct keys that forces spilling,
// for a Reduce (sorted runs of partial results), an Aggregate that cannot
// merge (frozen table, records sorted) and one that can. The managed
// memory accounting never exceeds the budget; no memory or file is left.
func TestHashAggregationSpillsAndIsExact(t *testing.T) {
	const n, keys = 60_000, 20_000
	want := aggReference(n, keys)
	noMerge := NewAggregator(func() aggAcc { return aggAcc{} },
		func(v aggKV, a aggAcc) aggAcc { return aggAcc{a.N + 1, a.Sum + v.V} },
		func(a aggAcc) aggAcc { return a })
	type kacc struct {
		K string
		A aggAcc
	}
	keyed := NewAggregator(func() kacc { return kacc{} },
		func(v aggKV, a kacc) kacc { return kacc{v.K, aggAcc{a.A.N + 1, a.A.Sum + v.V}} },
		func(a kacc) kacc { return a }).
		WithMerge(func(a, b kacc) kacc { return kacc{a.K, aggAcc{a.A.N + b.A.N, a.A.Sum + b.A.Sum}} })
	for _, budget := range []int64{64 << 20, 256 << 10} {
		spill := budget < 1<<20
		t.Run(fmt.Sprintf("reduce/%d", budget), func(t *testing.T) {
			// Reduce keeps the key in V's place: N counts, via a pair.
			op := newHashAggOp(func(v aggKV) string { return v.K }, reduceFuncs(func(a, b aggKV) aggKV { return aggKV{a.K, a.V + b.V} }))
			if op.mode != aggMerge {
				t.Fatalf("Reduce spills in mode %d, want sorted runs", op.mode)
			}
			got, _ := runHashAgg(t, op, n, keys, budget, func(v aggKV) string { return v.K })
			for k, w := range want {
				if got[k].V != w.Sum {
					t.Fatalf("key %q sums to %d, want %d", k, got[k].V, w.Sum)
				}
			}
			if spill != (op.sorter != nil) {
				t.Fatalf("spilled: %v, want %v", op.sorter != nil, spill)
			}
		})
		t.Run(fmt.Sprintf("aggregateNoMerge/%d", budget), func(t *testing.T) {
			op := newHashAggOp(func(v aggKV) string { return v.K }, aggregateFuncs[aggKV, aggAcc, aggAcc](noMerge))
			if op.mode != aggFreeze {
				t.Fatalf("an Aggregate without merge spills in mode %d, want a frozen table", op.mode)
			}
			// The result has no key: count results by their sums instead.
			i := 0
			got, _ := runHashAgg(t, op, n, keys, budget, func(a aggAcc) string { i++; return fmt.Sprint(i) })
			wantCounts := map[string]int{}
			for _, w := range want {
				wantCounts[fmt.Sprint(w.N, w.Sum)]++
			}
			gotCounts := map[string]int{}
			for _, a := range got {
				gotCounts[fmt.Sprint(a.N, a.Sum)]++
			}
			for k, c := range wantCounts {
				if gotCounts[k] != c {
					t.Fatalf("%d results (count sum) %s, want %d", gotCounts[k], k, c)
				}
			}
			if spill != op.frozen {
				t.Fatalf("frozen: %v, want %v", op.frozen, spill)
			}
		})
		t.Run(fmt.Sprintf("aggregateMerge/%d", budget), func(t *testing.T) {
			op := newHashAggOp(func(v aggKV) string { return v.K }, aggregateFuncs[aggKV, kacc, kacc](keyed))
			if op.mode != aggMerge {
				t.Fatalf("an Aggregate with merge spills in mode %d, want sorted runs", op.mode)
			}
			got, _ := runHashAgg(t, op, n, keys, budget, func(a kacc) string { return a.K })
			for k, w := range want {
				if got[k].A != w {
					t.Fatalf("key %q aggregates to %+v, want %+v", k, got[k].A, w)
				}
			}
		})
	}
}
