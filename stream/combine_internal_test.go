package stream

import (
	"context"
	"fmt"
	"testing"
	"unsafe"

	"github.com/gofl/gofl/stream/runtime"
)

type combKV struct {
	K string
	V int
}

// collectOutput keeps the records collected.
type collectOutput struct{ recs []runtime.Record }

func (o *collectOutput) Collect(r runtime.Record) { o.recs = append(o.recs, r) }
func (o *collectOutput) EmitWatermark(int64)      {}

func TestReduceCombinerFoldsPerKeyAndSpillsPastItsBound(t *testing.T) {
	c := newReduceCombiner(func(v combKV) string { return v.K }, func(a, b combKV) combKV { return combKV{a.K, a.V + b.V} })
	out := &collectOutput{}
	// Every key twice in a row: the first key past the bound finds the
	// combiner full and flushes it.
	keys := combineMaxKeys + 10
	for i := 0; i < keys; i++ {
		c.Add(runtime.Record{Value: combKV{fmt.Sprint(i), i}}, out)
		c.Add(runtime.Record{Value: combKV{fmt.Sprint(i), i}}, out)
	}
	spilled := len(out.recs)
	if spilled != combineMaxKeys {
		t.Fatalf("%d records spilled, want %d (the bound)", spilled, combineMaxKeys)
	}
	c.Flush(out)
	sums := map[string]int{}
	for _, r := range out.recs {
		v := r.Value.(combKV)
		sums[v.K] += v.V
	}
	if len(sums) != keys {
		t.Fatalf("%d keys, want %d", len(sums), keys)
	}
	for i := 0; i < keys; i++ {
		if got := sums[fmt.Sprint(i)]; got != 2*i {
			t.Fatalf("key %d sums to %d, want %d", i, got, 2*i)
		}
	}
	// Flushed: the next flush emits nothing.
	n := len(out.recs)
	c.Flush(out)
	if len(out.recs) != n {
		t.Fatalf("an empty combiner emitted %d records", len(out.recs)-n)
	}
}

// TestReduceCombinerCopiesStringKeys checks that the table keeps its own
// copy of a new string key, not the input it was cut from: a word of a
// line would keep the whole line alive for as long as the key stays.
func TestReduceCombinerCopiesStringKeys(t *testing.T) {
	c := newReduceCombiner(func(v combKV) string { return v.K }, func(a, b combKV) combKV { return combKV{a.K, a.V + b.V} })
	line := "alpha beta"
	c.addValue(combKV{line[6:], 1}, &collectOutput{})
	c.addValue(combKV{line[6:], 1}, &collectOutput{})
	if len(c.idx) != 1 {
		t.Fatalf("%d keys, want 1", len(c.idx))
	}
	for k := range c.idx {
		if k != "beta" {
			t.Fatalf("key %q, want beta", k)
		}
		p := uintptr(unsafe.Pointer(unsafe.StringData(k)))
		if from := uintptr(unsafe.Pointer(unsafe.StringData(line))); p >= from && p < from+uintptr(len(line)) {
			t.Fatal("the combiner's key points into the input line")
		}
	}
	out := &collectOutput{}
	c.Flush(out)
	if len(out.recs) != 1 || out.recs[0].Value.(combKV) != (combKV{"beta", 2}) {
		t.Fatalf("flushed %v, want one {beta 2}", out.recs)
	}
}

// directCollector is the Collector a FlatMap's function gets when its
// output feeds a reduce combiner, as a task sets it up (resolved, not
// through DirectCombinerOf).
func directCollector() (Collector[combKV], *reduceCombiner[combKV, string]) {
	comb := newReduceCombiner(func(v combKV) string { return v.K }, func(a, b combKV) combKV { return combKV{a.K, a.V + b.V} })
	d := &runtime.DirectCombiner{Combiner: comb, Next: &collectOutput{}, Running: new(runtime.Caller)}
	return comb.collector(d), comb
}

// TestNoAllocCollectIntoCombiner checks that a FlatMap's collector hands
// a value of a key the combiner holds to it without allocating: the path
// of every word of a word count.
func TestNoAllocCollectIntoCombiner(t *testing.T) {
	c, comb := directCollector()
	line := "alpha beta"
	c.Collect(combKV{line[:5], 1}) // a new key: its entry is allocated
	if n := testing.AllocsPerRun(1000, func() { c.Collect(combKV{line[:5], 1}) }); n != 0 {
		t.Errorf("Collect into the combiner allocates %.1f times per value", n)
	}
	if got := *comb.idx["alpha"]; got.V != 1002 {
		t.Errorf("alpha counted %d, want 1002", got.V)
	}
}

// BenchmarkCollectIntoCombiner is the per-word cost of a word count's
// FlatMap → combiner hand-off, over a vocabulary of 1000 keys.
func BenchmarkCollectIntoCombiner(b *testing.B) {
	c, _ := directCollector()
	words := make([]string, 1000)
	for i := range words {
		words[i] = fmt.Sprintf("word%d", i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c.Collect(combKV{words[i%len(words)], 1})
	}
}

func TestBatchReduceHasACombinerAndStreamingNone(t *testing.T) {
	for _, mode := range []RuntimeMode{Batch, Streaming} {
		env := NewEnvironment(WithParallelism(2), WithRuntimeMode(mode))
		src := FromElements(env, combKV{"a", 1}, combKV{"b", 2}, combKV{"a", 3})
		sums := KeyBy(src, func(v combKV) string { return v.K }).Reduce(func(a, b combKV) combKV { return combKV{a.K, a.V + b.V} }).Name("Sum")
		res := sums.Collect()
		p, err := env.Plan()
		if err != nil {
			t.Fatal(err)
		}
		var combiners []string
		for _, spec := range p.Tasks {
			for _, o := range spec.Outputs {
				if o.NewCombiner != nil {
					combiners = append(combiners, o.CombinerName)
				}
			}
		}
		want := 0
		if mode == Batch {
			want = 1
		}
		if len(combiners) != want || want == 1 && combiners[0] != "Combine (Sum)" {
			t.Fatalf("%v: combiners %q, want %d named \"Combine (Sum)\"", mode, combiners, want)
		}
		if _, err := env.Execute(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, v := range res.Values() {
			got[v.K] = v.V // the last value per key is the final one
		}
		if got["a"] != 4 || got["b"] != 2 || len(got) != 2 {
			t.Fatalf("%v: sums %v", mode, got)
		}
	}
}

// Under a managed-memory budget the combiner flushes (emits its partial
// results) before its key bound, the sums stay exact, the accounting never
// exceeds the budget, and nothing stays reserved after a flush or Close.
func TestReduceCombinerFlushesPastItsBudget(t *testing.T) {
	mem := runtime.NewMemoryManager(2 * runtime.PageSize)
	c := newReduceCombiner(func(v combKV) string { return v.K }, func(a, b combKV) combKV { return combKV{a.K, a.V + b.V} })
	var mc runtime.ManagedCombiner = c
	mc.SetBatchMemory(runtime.BatchMemory{Memory: mem})
	out := &collectOutput{}
	const keys = 5000
	for round := 0; round < 2; round++ {
		for i := 0; i < keys; i++ {
			c.Add(runtime.Record{Value: combKV{fmt.Sprint("key-", i), i}}, out)
		}
	}
	if len(out.recs) == 0 {
		t.Fatalf("no flush under a budget of %d bytes for %d keys", mem.Size(), keys)
	}
	if mem.Peak() > mem.Size() {
		t.Fatalf("managed memory peaked at %d, over the budget of %d", mem.Peak(), mem.Size())
	}
	c.Flush(out)
	if mem.Used() != 0 {
		t.Fatalf("%d bytes reserved after a flush", mem.Used())
	}
	sums := map[string]int{}
	for _, r := range out.recs {
		v := r.Value.(combKV)
		sums[v.K] += v.V
	}
	for i := 0; i < keys; i++ {
		if got := sums[fmt.Sprint("key-", i)]; got != 2*i {
			t.Fatalf("key %d sums to %d, want %d", i, got, 2*i)
		}
	}
	c.Add(runtime.Record{Value: combKV{"x", 1}}, out)
	mc.Close()
	mc.Close()
	if mem.Used() != 0 {
		t.Fatalf("%d bytes reserved after Close", mem.Used())
	}
}
