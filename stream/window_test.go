package stream_test

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/gofl/gofl/stream"
)

type ev struct {
	Key string
	Ts  int64
	V   int
}

type winSum struct {
	Key        string
	Start, End int64
	Sum        int
}

func windowSums(t *testing.T, p int, events []ev, a stream.WindowAssigner, bound time.Duration) []winSum {
	t.Helper()
	env := stream.NewEnvironment(stream.WithParallelism(p))
	src := stream.FromCollection(env, events).
		AssignTimestampsAndWatermarks(stream.BoundedOutOfOrderness(bound, func(e ev) int64 { return e.Ts }))
	res := stream.WindowProcess(stream.Window(stream.KeyBy(src, func(e ev) string { return e.Key }), a),
		func(k string, w stream.TimeWindow, es []ev, out stream.Collector[winSum]) error {
			s := 0
			for _, e := range es {
				s += e.V
			}
			out.Collect(winSum{k, w.Start, w.End, s})
			return nil
		}).Collect()
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := res.Values()
	sort.Slice(got, func(i, j int) bool {
		if got[i].Key != got[j].Key {
			return got[i].Key < got[j].Key
		}
		return got[i].Start < got[j].Start
	})
	return got
}

// Out of order by at most 2s.
var events = []ev{
	{"a", 1000, 1}, {"b", 1500, 10}, {"a", 3000, 2}, {"a", 2500, 4}, {"a", 5500, 8},
	{"b", 4000, 20}, {"a", 4999, 16}, {"b", 7000, 40}, {"a", 9999, 32}, {"b", 8000, 80},
}

func TestTumblingEventTime(t *testing.T) {
	want := []winSum{
		{"a", 0, 5000, 1 + 2 + 4 + 16}, {"a", 5000, 10000, 8 + 32},
		{"b", 0, 5000, 30}, {"b", 5000, 10000, 120},
	}
	for _, p := range []int{1, 3} {
		if got := windowSums(t, p, events, stream.TumblingEventTime(5*time.Second), 2*time.Second); !reflect.DeepEqual(got, want) {
			t.Fatalf("p=%d: got %v, want %v", p, got, want)
		}
	}
}

func TestSlidingEventTime(t *testing.T) {
	var want []winSum
	for _, k := range []string{"a", "b"} {
		for start := int64(-4000); start < 10000; start += 2000 {
			s, any := 0, false
			for _, e := range events {
				if e.Key == k && e.Ts >= start && e.Ts < start+6000 {
					s += e.V
					any = true
				}
			}
			if any {
				want = append(want, winSum{k, start, start + 6000, s})
			}
		}
	}
	for _, p := range []int{1, 2} {
		if got := windowSums(t, p, events, stream.SlidingEventTime(6*time.Second, 2*time.Second), 2*time.Second); !reflect.DeepEqual(got, want) {
			t.Fatalf("p=%d: got %v, want %v", p, got, want)
		}
	}
}

func TestLateElementDropped(t *testing.T) {
	late := []ev{{"a", 1000, 1}, {"a", 2000, 2}, {"a", 9000, 4}, {"a", 1500, 100}, {"a", 9500, 8}}
	// After 9000 the watermark is 9000-1000-1 = 7999: window [0,5000) fired,
	// so the record at 1500 is late and dropped.
	got := windowSums(t, 1, late, stream.TumblingEventTime(5*time.Second), time.Second)
	want := []winSum{{"a", 0, 5000, 3}, {"a", 5000, 10000, 12}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestWindowReduceAndAggregate(t *testing.T) {
	env := stream.NewEnvironment(stream.WithParallelism(2))
	src := stream.FromCollection(env, events).
		AssignTimestampsAndWatermarks(stream.BoundedOutOfOrderness(2*time.Second, func(e ev) int64 { return e.Ts }))
	w := stream.Window(stream.KeyBy(src, func(e ev) string { return e.Key }), stream.TumblingEventTime(5*time.Second))
	red := w.Reduce(func(a, b ev) ev { return ev{a.Key, max(a.Ts, b.Ts), a.V + b.V} }).Collect()
	avg := stream.WindowAggregate(w, stream.NewAggregator(
		func() [2]int { return [2]int{} },
		func(e ev, acc [2]int) [2]int { return [2]int{acc[0] + e.V, acc[1] + 1} },
		func(acc [2]int) string { return fmt.Sprintf("%d/%d", acc[0], acc[1]) })).Collect()
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	var sums []int
	for _, e := range red.Values() {
		sums = append(sums, e.V)
	}
	sort.Ints(sums)
	if want := []int{23, 30, 40, 120}; !reflect.DeepEqual(sums, want) {
		t.Fatalf("reduce %v, want %v", sums, want)
	}
	got := avg.Values()
	sort.Strings(got)
	if want := []string{"120/2", "23/4", "30/2", "40/2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("aggregate %v, want %v", got, want)
	}
}

func TestProcessingTimeWindows(t *testing.T) {
	env := stream.NewEnvironment(stream.WithParallelism(2))
	// 60 records at 200/s: at least 300ms. The second source subtask's
	// records (30..59) wait until a window fired, so they fall into later
	// windows however the machine's load stretches or squeezes the run.
	fired := make(chan struct{})
	var fireOnce sync.Once
	src := stream.Map(stream.Generate(env, 60, func(i int64) int64 { return i }, stream.RateLimit(200)), func(i int64) int64 {
		if i >= 30 {
			select {
			case <-fired:
			case <-time.After(time.Minute):
				t.Errorf("record %d: no window fired by the clock within a minute", i)
			}
		}
		return i
	})
	type cnt struct {
		W stream.TimeWindow
		N int
	}
	res := stream.WindowProcess(stream.Window(stream.KeyBy(src, func(int64) int { return 0 }), stream.TumblingProcessingTime(100*time.Millisecond)),
		func(_ int, w stream.TimeWindow, es []int64, out stream.Collector[cnt]) error {
			fireOnce.Do(func() { close(fired) })
			out.Collect(cnt{w, len(es)})
			return nil
		}).Collect()
	start := time.Now()
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("rate limit not applied: %v", d)
	}
	total := 0
	for _, c := range res.Values() {
		total += c.N
		if c.W.End-c.W.Start != 100 || c.W.Start%100 != 0 {
			t.Errorf("window %+v is not a 100 ms tumbling window", c.W)
		}
	}
	if total != 60 || len(res.Values()) < 2 {
		t.Fatalf("windows %v: %d records, want 60 in at least 2 windows", res.Values(), total)
	}
}

func TestKeyedState(t *testing.T) {
	count := stream.NewValueState[int]("count")
	for _, p := range []int{1, 4} {
		env := stream.NewEnvironment(stream.WithParallelism(p))
		src := stream.Generate(env, 1000, func(i int64) string { return fmt.Sprint("k", i%7) })
		type kc struct {
			K string
			N int
		}
		res := stream.KeyedProcess(stream.KeyBy(src, func(s string) string { return s }), stream.KeyedProcessFunction[string, string, kc]{
			ProcessElement: func(ctx *stream.KeyedContext[string], v string, out stream.Collector[kc]) error {
				n, _ := count.Value(ctx)
				n++
				count.Update(ctx, n)
				out.Collect(kc{ctx.CurrentKey(), n})
				return nil
			},
		}).Collect()
		if _, err := env.Execute(context.Background()); err != nil {
			t.Fatal(err)
		}
		final := map[string]int{}
		seen := map[kc]bool{}
		for _, v := range res.Values() {
			if seen[v] {
				t.Fatalf("count %v twice: state not scoped to the key's subtask", v)
			}
			seen[v] = true
			final[v.K] = max(final[v.K], v.N)
		}
		for i := 0; i < 7; i++ {
			k := fmt.Sprint("k", i)
			want := 1000 / 7
			if i < 1000%7 {
				want++
			}
			if final[k] != want {
				t.Fatalf("p=%d: %s counted %d, want %d", p, k, final[k], want)
			}
		}
	}
}

func TestEventTimeTimers(t *testing.T) {
	env := stream.NewEnvironment(stream.WithParallelism(2))
	src := stream.FromCollection(env, events).AssignTimestampsAndWatermarks(stream.MonotonousTimestamps(func(e ev) int64 { return e.Ts }))
	sum := stream.NewValueState[int]("sum")
	res := stream.KeyedProcess(stream.KeyBy(src, func(e ev) string { return e.Key }), stream.KeyedProcessFunction[string, ev, string]{
		ProcessElement: func(ctx *stream.KeyedContext[string], e ev, _ stream.Collector[string]) error {
			s, _ := sum.Value(ctx)
			sum.Update(ctx, s+e.V)
			ctx.RegisterEventTimeTimer(100000)
			return nil
		},
		OnTimer: func(ctx *stream.KeyedContext[string], ts int64, out stream.Collector[string]) error {
			s, _ := sum.Value(ctx)
			out.Collect(fmt.Sprintf("%s=%d@%d", ctx.CurrentKey(), s, ts))
			return nil
		},
	}).Collect()
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := res.Values()
	sort.Strings(got)
	if want := []string{"a=63@100000", "b=150@100000"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestWindowJoin(t *testing.T) {
	type order struct {
		User string
		Ts   int64
		Item string
	}
	type click struct {
		User string
		Ts   int64
		Page string
	}
	for _, p := range []int{1, 3} {
		env := stream.NewEnvironment(stream.WithParallelism(p))
		orders := stream.FromElements(env, order{"u1", 1000, "book"}, order{"u2", 2000, "pen"}, order{"u1", 6000, "cup"}, order{"u3", 3000, "hat"}).
			AssignTimestampsAndWatermarks(stream.BoundedOutOfOrderness(time.Second, func(o order) int64 { return o.Ts }))
		clicks := stream.FromElements(env, click{"u1", 500, "home"}, click{"u1", 4000, "cart"}, click{"u2", 5500, "late-window"}, click{"u1", 7000, "pay"}).
			AssignTimestampsAndWatermarks(stream.BoundedOutOfOrderness(time.Second, func(c click) int64 { return c.Ts }))
		res := stream.Join(
			stream.KeyBy(orders, func(o order) string { return o.User }),
			stream.KeyBy(clicks, func(c click) string { return c.User }),
			stream.TumblingEventTime(5*time.Second),
			func(o order, c click) string { return o.User + ":" + o.Item + "+" + c.Page }).Collect()
		if _, err := env.Execute(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := res.Values()
		sort.Strings(got)
		if want := []string{"u1:book+cart", "u1:book+home", "u1:cup+pay"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("p=%d: got %v, want %v", p, got, want)
		}
	}
}

func TestUnionBroadcastRebalance(t *testing.T) {
	env := stream.NewEnvironment(stream.WithParallelism(3))
	a := stream.Generate(env, 100, func(i int64) int64 { return i })
	b := stream.Generate(env, 50, func(i int64) int64 { return 1000 + i }).SetParallelism(2)
	c := stream.Map(stream.FromElements(env, int64(-1)), func(v int64) int64 { return v })
	u := stream.Union(a, b, c).Collect()

	type at struct {
		V       int64
		Subtask int
	}
	withSubtask := func(s stream.DataStream[int64], p int) *stream.Collected[at] {
		c := stream.Process(s, func(ctx *stream.ProcessContext, v int64, out stream.Collector[at]) error {
			out.Collect(at{v, ctx.SubtaskIndex()})
			return nil
		}).SetParallelism(p).Collect()
		c.SetParallelism(p)
		return c
	}
	bc := withSubtask(stream.FromElements(env, int64(1), 2, 3).Broadcast(), 4)
	rb := withSubtask(stream.Generate(env, 40, func(i int64) int64 { return i }).SetParallelism(1).Rebalance(), 4)
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[int64]bool{}
	for _, v := range u.Values() {
		got[v] = true
	}
	if len(u.Values()) != 151 || len(got) != 151 || !got[-1] || !got[99] || !got[1049] {
		t.Fatalf("union: %d records", len(u.Values()))
	}
	seen := map[at]bool{}
	for _, v := range bc.Values() {
		seen[v] = true
	}
	if len(bc.Values()) != 12 || len(seen) != 12 {
		t.Fatalf("broadcast to 4 subtasks: %v", bc.Values())
	}
	per := map[int]int{}
	for _, v := range rb.Values() {
		per[v.Subtask]++
	}
	if !reflect.DeepEqual(per, map[int]int{0: 10, 1: 10, 2: 10, 3: 10}) {
		t.Fatalf("rebalance per subtask: %v", per)
	}
}
