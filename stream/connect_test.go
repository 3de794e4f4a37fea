package stream_test

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/stream"
)

type reading struct {
	Sensor string
	Seq    int
	V      int64
}

type rule struct {
	Sensor string
	Factor int64
}

// TestCoProcessEnrichment enriches a data stream with per-key rules from a
// control stream. Whichever input a key's records arrive on first, the
// state is shared: readings before their rule wait in ValueState and are
// enriched when it comes; a timer at the end of input reports per key.
func TestCoProcessEnrichment(t *testing.T) {
	const n, sensors = 2000, 11
	var readings []reading
	for i := 0; i < n; i++ {
		readings = append(readings, reading{Sensor: fmt.Sprint("s", (i*7)%sensors), Seq: i, V: int64(i % 100)})
	}
	// Rules for s0..s8 (s9 and s10 have none) and for s20, which has no
	// readings.
	var rules []rule
	for s := 0; s < 9; s++ {
		rules = append(rules, rule{Sensor: fmt.Sprint("s", s), Factor: int64(s + 2)})
	}
	rules = append(rules, rule{Sensor: "s20", Factor: 100})

	var want []string
	enriched, unruled := map[string]int{}, map[string]int{}
	factor := map[string]int64{}
	for _, r := range rules {
		factor[r.Sensor] = r.Factor
	}
	for _, r := range readings {
		if f, ok := factor[r.Sensor]; ok {
			want = append(want, fmt.Sprintf("%s #%d %d", r.Sensor, r.Seq, r.V*f))
			enriched[r.Sensor]++
		} else {
			unruled[r.Sensor]++
		}
	}
	for s := 0; s < sensors; s++ {
		k := fmt.Sprint("s", s)
		want = append(want, fmt.Sprintf("%s: factor %d, %d enriched, %d without rule", k, factor[k], enriched[k], unruled[k]))
	}
	want = append(want, "s20: factor 100, 0 enriched, 0 without rule")
	sort.Strings(want)

	const end = 1 << 50 // fires at the end of input (the final watermark)
	ruleOf := stream.NewValueState[int64]("rule")
	pending := stream.NewValueState[[]reading]("pending")
	count := stream.NewValueState[int]("enriched")
	subtask := stream.NewValueState[int]("subtask")
	sameSubtask := func(ctx *stream.KeyedContext[string]) error {
		if s, ok := subtask.Value(ctx); ok && s != ctx.SubtaskIndex() {
			return fmt.Errorf("key %s on subtasks %d and %d", ctx.CurrentKey(), s, ctx.SubtaskIndex())
		}
		subtask.Update(ctx, ctx.SubtaskIndex())
		return nil
	}
	for _, p := range []int{1, 3} {
		env := stream.NewEnvironment(stream.WithParallelism(p))
		data := stream.KeyBy(stream.FromCollection(env, readings), func(r reading) string { return r.Sensor })
		control := stream.KeyBy(stream.FromCollection(env, rules).SetParallelism(1), func(r rule) string { return r.Sensor })
		res := stream.CoProcess(stream.Connect(data, control), stream.KeyedCoProcessFunction[string, reading, rule, string]{
			ProcessElement1: func(ctx *stream.KeyedContext[string], r reading, out stream.Collector[string]) error {
				if err := sameSubtask(ctx); err != nil {
					return err
				}
				ctx.RegisterEventTimeTimer(end)
				if f, ok := ruleOf.Value(ctx); ok {
					out.Collect(fmt.Sprintf("%s #%d %d", r.Sensor, r.Seq, r.V*f))
					c, _ := count.Value(ctx)
					count.Update(ctx, c+1)
					return nil
				}
				l, _ := pending.Value(ctx)
				pending.Update(ctx, append(l, r))
				return nil
			},
			ProcessElement2: func(ctx *stream.KeyedContext[string], r rule, out stream.Collector[string]) error {
				if err := sameSubtask(ctx); err != nil {
					return err
				}
				ctx.RegisterEventTimeTimer(end)
				ruleOf.Update(ctx, r.Factor)
				l, _ := pending.Value(ctx)
				for _, x := range l {
					out.Collect(fmt.Sprintf("%s #%d %d", x.Sensor, x.Seq, x.V*r.Factor))
				}
				c, _ := count.Value(ctx)
				count.Update(ctx, c+len(l))
				pending.Clear(ctx)
				return nil
			},
			OnTimer: func(ctx *stream.KeyedContext[string], ts int64, out stream.Collector[string]) error {
				if ts != end {
					return fmt.Errorf("timer at %d", ts)
				}
				f, _ := ruleOf.Value(ctx)
				c, _ := count.Value(ctx)
				l, _ := pending.Value(ctx)
				out.Collect(fmt.Sprintf("%s: factor %d, %d enriched, %d without rule", ctx.CurrentKey(), f, c, len(l)))
				return nil
			},
		}).Name("Enrich").Collect()
		if _, err := env.Execute(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := res.Values()
		sort.Strings(got)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("p=%d: %d lines, want %d; diff: %s", p, len(got), len(want), diffLines(got, want))
		}
	}
}

type tick struct {
	Key string
	Ts  int64
}

type version struct {
	Key   string
	Ts    int64
	Price int64
}

// TestCoProcessEventTime is a temporal join: each tick is enriched with its
// key's price version valid at the tick's event time. Ticks wait in state
// for an event-time timer at their timestamp; the operator's watermark is
// the minimum of both inputs', so when it passes a tick every version up to
// it has arrived, whatever the interleaving and parallelism.
func TestCoProcessEventTime(t *testing.T) {
	const keys, n = 5, 3000
	var ticks []tick
	for i := 0; i < n; i++ {
		// Out of order by up to 400 ms.
		ticks = append(ticks, tick{Key: fmt.Sprint("k", i%keys), Ts: int64(i*10 - (i*37)%5*100)})
	}
	var versions []version
	for ts := int64(0); ts < n*10; ts += 700 {
		for k := 0; k < keys; k++ {
			if (ts/700+int64(k))%3 != 0 {
				versions = append(versions, version{Key: fmt.Sprint("k", k), Ts: ts + int64(k)*13, Price: ts + int64(k)})
			}
		}
	}
	var want []string
	for _, tk := range ticks {
		price := int64(-1)
		best := int64(-1)
		for _, v := range versions {
			if v.Key == tk.Key && v.Ts <= tk.Ts && v.Ts > best {
				best, price = v.Ts, v.Price
			}
		}
		want = append(want, fmt.Sprintf("%s@%d=%d", tk.Key, tk.Ts, price))
	}
	sort.Strings(want)

	waiting := stream.NewValueState[[]int64]("ticks")
	prices := stream.NewValueState[[]version]("versions")
	for _, p := range []int{1, 3} {
		env := stream.NewEnvironment(stream.WithParallelism(p))
		tk := stream.FromCollection(env, ticks).
			AssignTimestampsAndWatermarks(stream.BoundedOutOfOrderness(500*time.Millisecond, func(x tick) int64 { return x.Ts }))
		vs := stream.FromCollection(env, versions).SetParallelism(1).
			AssignTimestampsAndWatermarks(stream.MonotonousTimestamps(func(v version) int64 { return v.Ts })).SetParallelism(1)
		res := stream.CoProcess(stream.Connect(stream.KeyBy(tk, func(x tick) string { return x.Key }), stream.KeyBy(vs, func(v version) string { return v.Key })),
			stream.KeyedCoProcessFunction[string, tick, version, string]{
				ProcessElement1: func(ctx *stream.KeyedContext[string], x tick, _ stream.Collector[string]) error {
					if ts, ok := ctx.Timestamp(); !ok || ts != x.Ts {
						return fmt.Errorf("tick %v has timestamp %d %v", x, ts, ok)
					}
					if x.Ts <= ctx.CurrentWatermark() {
						return fmt.Errorf("tick %v behind the watermark %d", x, ctx.CurrentWatermark())
					}
					l, _ := waiting.Value(ctx)
					waiting.Update(ctx, append(l, x.Ts))
					ctx.RegisterEventTimeTimer(x.Ts)
					return nil
				},
				ProcessElement2: func(ctx *stream.KeyedContext[string], v version, _ stream.Collector[string]) error {
					l, _ := prices.Value(ctx)
					prices.Update(ctx, append(l, v))
					return nil
				},
				OnTimer: func(ctx *stream.KeyedContext[string], now int64, out stream.Collector[string]) error {
					l, _ := waiting.Value(ctx)
					vs, _ := prices.Value(ctx)
					var rest []int64
					for _, ts := range l {
						if ts > now {
							rest = append(rest, ts)
							continue
						}
						price, best := int64(-1), int64(-1)
						for _, v := range vs {
							if v.Ts <= ts && v.Ts > best {
								best, price = v.Ts, v.Price
							}
						}
						out.Collect(fmt.Sprintf("%s@%d=%d", ctx.CurrentKey(), ts, price))
					}
					waiting.Update(ctx, rest)
					return nil
				},
			}).Collect()
		if _, err := env.Execute(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := res.Values()
		sort.Strings(got)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("p=%d: %d lines, want %d; diff: %s", p, len(got), len(want), diffLines(got, want))
		}
	}
}

func TestCoProcessDeleteTimerAndProcessingTime(t *testing.T) {
	env := stream.NewEnvironment(stream.WithParallelism(2))
	a := stream.KeyBy(stream.FromElements(env, "x", "y", "z"), func(s string) string { return s })
	b := stream.KeyBy(stream.FromElements(env, "y"), func(s string) string { return s })
	res := stream.CoProcess(stream.Connect(a, b), stream.KeyedCoProcessFunction[string, string, string, string]{
		ProcessElement1: func(ctx *stream.KeyedContext[string], v string, _ stream.Collector[string]) error {
			ctx.RegisterEventTimeTimer(100)
			ctx.RegisterProcessingTimeTimer(ctx.ProcessingTime() + 3_600_000)
			return nil
		},
		// A record on the second input cancels the key's event-time timer.
		ProcessElement2: func(ctx *stream.KeyedContext[string], v string, _ stream.Collector[string]) error {
			ctx.DeleteEventTimeTimer(100)
			return nil
		},
		OnTimer: func(ctx *stream.KeyedContext[string], ts int64, out stream.Collector[string]) error {
			kind := "processing"
			if ts == 100 {
				kind = "event"
			}
			out.Collect(ctx.CurrentKey() + " " + kind)
			return nil
		},
	}).Collect()
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := res.Values()
	sort.Strings(got)
	// The second input may come before or after y's first: the timer is
	// deleted only in the second case.
	want := []string{"x event", "x processing", "y processing", "z event", "z processing"}
	if len(got) == 6 {
		want = append(want, "y event")
		sort.Strings(want)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestCoMapCoFlatMap(t *testing.T) {
	for _, p := range []int{1, 3} {
		env := stream.NewEnvironment(stream.WithParallelism(p))
		nums := stream.KeyBy(stream.Generate(env, 100, func(i int64) int64 { return i }), func(i int64) int64 { return i % 10 })
		words := stream.KeyBy(stream.FromElements(env, "3 a", "5 b c"), func(s string) int64 { return int64(s[0] - '0') })
		cs := stream.Connect(nums, words)
		mapped := stream.CoMap(cs, func(i int64) string { return fmt.Sprint("n", i) }, func(s string) string { return "w" + s }).Collect()
		flat := stream.CoFlatMap(cs,
			func(i int64, out stream.Collector[string]) error {
				if i%25 == 0 {
					out.Collect(fmt.Sprint(i))
				}
				return nil
			},
			func(s string, out stream.Collector[string]) error {
				for _, f := range strings.Fields(s)[1:] {
					out.Collect(f)
				}
				return nil
			}).Collect()
		if _, err := env.Execute(context.Background()); err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := 0; i < 100; i++ {
			want = append(want, fmt.Sprint("n", i))
		}
		want = append(want, "w3 a", "w5 b c")
		sort.Strings(want)
		got := mapped.Values()
		sort.Strings(got)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("p=%d: CoMap: %s", p, diffLines(got, want))
		}
		got = flat.Values()
		sort.Strings(got)
		if want := []string{"0", "25", "50", "75", "a", "b", "c"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("p=%d: CoFlatMap: got %v", p, got)
		}
	}
}

func TestConnectPlan(t *testing.T) {
	env := stream.NewEnvironment(stream.WithParallelism(3))
	a := stream.KeyBy(stream.Generate(env, 10, func(i int64) int64 { return i }).SetParallelism(1), func(i int64) int64 { return i })
	b := stream.KeyBy(stream.Generate(env, 10, func(i int64) int64 { return i }), func(i int64) int64 { return i })
	stream.CoMap(stream.Connect(a, b), func(i int64) int64 { return i }, func(i int64) int64 { return -i }).Name("Co").Print()
	g, err := env.JobGraph()
	if err != nil {
		t.Fatal(err)
	}
	var co *jobgraph.Vertex
	for _, v := range g.Vertices {
		if strings.HasPrefix(v.Name, "Co") {
			co = v
		}
	}
	if co == nil || co.Name != "Co -> Print to Std. Out" || co.Parallelism != 3 {
		for _, v := range g.Vertices {
			t.Logf("vertex %q p=%d", v.Name, v.Parallelism)
		}
		t.Fatal("no vertex Co -> Print to Std. Out at parallelism 3")
	}
	var in []string
	for _, e := range g.Edges {
		if e.Target == co.ID {
			in = append(in, e.ShipStrategy)
		}
	}
	if !reflect.DeepEqual(in, []string{"HASH", "HASH"}) {
		t.Fatalf("inputs of the co-operator: %v", in)
	}
}

type order struct {
	ID   int64
	User string
	Ts   int64
}

type shipment struct {
	User string
	Box  int64
	Ts   int64
}

// TestIntervalJoin joins each order with the shipments of its user from
// 1 s before to 2 s after it; the result carries the later timestamp.
func TestIntervalJoin(t *testing.T) {
	const n = 600
	var orders []order
	var ships []shipment
	for i := int64(0); i < n; i++ {
		// Out of order by up to 300 ms.
		orders = append(orders, order{ID: i, User: fmt.Sprint("u", i%7), Ts: i*100 - (i*13)%4*100})
		if i%3 != 1 {
			ships = append(ships, shipment{User: fmt.Sprint("u", (i*3)%7), Box: i, Ts: i*100 + (i*11)%5*100})
		}
	}
	var want []string
	for _, o := range orders {
		for _, s := range ships {
			if s.User == o.User && s.Ts >= o.Ts-1000 && s.Ts <= o.Ts+2000 {
				want = append(want, fmt.Sprintf("%d/%d@%d", o.ID, s.Box, max(o.Ts, s.Ts)))
			}
		}
	}
	sort.Strings(want)
	if len(want) < n {
		t.Fatalf("test data: %d pairs", len(want))
	}
	for _, p := range []int{1, 3} {
		env := stream.NewEnvironment(stream.WithParallelism(p))
		os := stream.FromCollection(env, orders).
			AssignTimestampsAndWatermarks(stream.BoundedOutOfOrderness(300*time.Millisecond, func(o order) int64 { return o.Ts }))
		ss := stream.FromCollection(env, ships).
			AssignTimestampsAndWatermarks(stream.BoundedOutOfOrderness(400*time.Millisecond, func(s shipment) int64 { return s.Ts }))
		type pair struct {
			Order, Box int64
		}
		joined := stream.IntervalJoin(stream.KeyBy(os, func(o order) string { return o.User }), stream.KeyBy(ss, func(s shipment) string { return s.User }),
			-time.Second, 2*time.Second, func(o order, s shipment) pair { return pair{o.ID, s.Box} })
		res := stream.Process(joined, func(ctx *stream.ProcessContext, x pair, out stream.Collector[string]) error {
			ts, _ := ctx.Timestamp()
			out.Collect(fmt.Sprintf("%d/%d@%d", x.Order, x.Box, ts))
			return nil
		}).Collect()
		if _, err := env.Execute(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := res.Values()
		sort.Strings(got)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("p=%d: %d pairs, want %d; diff: %s", p, len(got), len(want), diffLines(got, want))
		}
	}
}

func TestIntervalJoinBadBounds(t *testing.T) {
	env := stream.NewEnvironment()
	a := stream.KeyBy(stream.FromElements(env, 1), func(i int) int { return i })
	stream.IntervalJoin(a, a, time.Second, 0, func(x, y int) int { return x + y }).Print()
	if _, err := env.Plan(); err == nil || !strings.Contains(err.Error(), "lower bound") {
		t.Fatalf("plan error %v", err)
	}
}
