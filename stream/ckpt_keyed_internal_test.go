package stream

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gofl/gofl/stream/runtime"
)

type kv struct {
	K string
	V int
}

func kvSteps(from, to int) []step {
	var s []step
	for i := from; i < to; i++ {
		k := fmt.Sprintf("k%d", i%7)
		s = append(s, rec(k, kv{k, i}))
	}
	return s
}

func kvTsSteps(from, to int) []step {
	var s []step
	for i := from; i < to; i++ {
		k := fmt.Sprintf("k%d", i%7)
		s = append(s, recTs(k, kv{k, i}, int64(i*100)))
		if i%5 == 4 {
			s = append(s, wmStep(int64(i*100-150)))
		}
	}
	return s
}

var parallelisms = [][2]int{{1, 1}, {4, 2}, {4, 6}}

func forEachRescale(t *testing.T, fn func(t *testing.T, p1, p2 int)) {
	for _, p := range parallelisms {
		t.Run(fmt.Sprintf("p%d-to-p%d", p[0], p[1]), func(t *testing.T) { fn(t, p[0], p[1]) })
	}
}

func TestCheckpointKeyedReduce(t *testing.T) {
	env := NewEnvironment()
	op := opOf(KeyBy(FromElements(env, kv{}), func(x kv) string { return x.K }).Reduce(func(a, b kv) kv { return kv{a.K, a.V + b.V} }))
	forEachRescale(t, func(t *testing.T, p1, p2 int) {
		checkRestore(t, op, 1, kvSteps(0, 40), kvSteps(40, 80), p1, p2)
	})
}

func TestCheckpointKeyedAggregate(t *testing.T) {
	env := NewEnvironment()
	type acc struct{ N, Sum int }
	op := opOf(Aggregate(KeyBy(FromElements(env, kv{}), func(x kv) string { return x.K }), NewAggregator(
		func() acc { return acc{} },
		func(v kv, a acc) acc { return acc{a.N + 1, a.Sum + v.V} },
		func(a acc) string { return fmt.Sprintf("%d/%d", a.Sum, a.N) })))
	forEachRescale(t, func(t *testing.T, p1, p2 int) {
		checkRestore(t, op, 1, kvSteps(0, 40), kvSteps(40, 80), p1, p2)
	})
}

// A keyed process with value state, an event-time and a processing-time
// timer per key.
func TestCheckpointKeyedProcessStateAndTimers(t *testing.T) {
	env := NewEnvironment()
	sum := NewValueState[int]("sum")
	op := opOf(KeyedProcess(KeyBy(FromElements(env, kv{}), func(x kv) string { return x.K }), KeyedProcessFunction[string, kv, string]{
		ProcessElement: func(ctx *KeyedContext[string], v kv, out Collector[string]) error {
			s, _ := sum.Value(ctx)
			sum.Update(ctx, s+v.V)
			ts, _ := ctx.Timestamp()
			ctx.RegisterEventTimeTimer(ts + 1000)
			ctx.RegisterProcessingTimeTimer(ctx.ProcessingTime() + 500)
			return nil
		},
		OnTimer: func(ctx *KeyedContext[string], ts int64, out Collector[string]) error {
			s, _ := sum.Value(ctx)
			out.Collect(fmt.Sprintf("%s:%d@%d", ctx.CurrentKey(), s, ts))
			return nil
		},
	}))
	first := append(kvTsSteps(0, 30), clockStep(1000), rec("k1", kv{"k1", 1000}), clockStep(1200))
	second := append([]step{clockStep(1600)}, kvTsSteps(30, 60)...)
	second = append(second, clockStep(3000))
	forEachRescale(t, func(t *testing.T, p1, p2 int) {
		checkRestore(t, op, 1, first, second, p1, p2)
	})
}

func TestCheckpointEventTimeWindows(t *testing.T) {
	env := NewEnvironment()
	ks := KeyBy(FromElements(env, kv{}), func(x kv) string { return x.K })
	ops := map[string]func() runtime.Operator{
		"reduce": opOf(Window(ks, TumblingEventTime(time.Second)).Reduce(func(a, b kv) kv { return kv{a.K, a.V + b.V} })),
		"aggregate": opOf(WindowAggregate(Window(ks, SlidingEventTime(2*time.Second, time.Second)), NewAggregator(
			func() int { return 0 }, func(v kv, a int) int { return a + v.V }, func(a int) int { return a }))),
		"process": opOf(WindowProcess(Window(ks, TumblingEventTime(time.Second)), func(k string, w TimeWindow, es []kv, out Collector[string]) error {
			out.Collect(fmt.Sprintf("%s %v %v", k, w, es))
			return nil
		})),
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			forEachRescale(t, func(t *testing.T, p1, p2 int) {
				checkRestore(t, op, 1, kvTsSteps(0, 33), kvTsSteps(33, 70), p1, p2)
			})
		})
	}
}

func TestCheckpointProcessingTimeWindows(t *testing.T) {
	env := NewEnvironment()
	op := opOf(Window(KeyBy(FromElements(env, kv{}), func(x kv) string { return x.K }), TumblingProcessingTime(time.Second)).
		Reduce(func(a, b kv) kv { return kv{a.K, a.V + b.V} }))
	var first, second []step
	for i := 0; i < 30; i++ {
		first = append(first, clockStep(int64(i*150)))
		first = append(first, kvSteps(i, i+1)...)
	}
	for i := 30; i < 60; i++ {
		second = append(second, clockStep(int64(i*150)))
		second = append(second, kvSteps(i, i+1)...)
	}
	second = append(second, clockStep(20000))
	forEachRescale(t, func(t *testing.T, p1, p2 int) {
		checkRestore(t, op, 1, first, second, p1, p2)
	})
}

func joinSteps(from, to int) []step {
	var s []step
	for i := from; i < to; i++ {
		k := fmt.Sprintf("k%d", i%5)
		s = append(s, rec2Ts(i%2, k, kv{k, i}, int64(i*100)))
		if i%4 == 3 {
			s = append(s, wmStep(int64(i*100-300)))
		}
	}
	return s
}

func TestCheckpointJoins(t *testing.T) {
	env := NewEnvironment()
	a := KeyBy(FromElements(env, kv{}), func(x kv) string { return x.K })
	b := KeyBy(FromElements(env, kv{}), func(x kv) string { return x.K })
	join := func(x, y kv) string { return fmt.Sprintf("%d-%d", x.V, y.V) }
	cnt := NewValueState[int]("count")
	ops := map[string]func() runtime.Operator{
		"window":   opOf(Join(a, b, TumblingEventTime(time.Second), join)),
		"interval": opOf(IntervalJoin(a, b, -300*time.Millisecond, 500*time.Millisecond, join)),
		"coprocess": opOf(CoProcess(Connect(a, b), KeyedCoProcessFunction[string, kv, kv, string]{
			ProcessElement1: func(ctx *KeyedContext[string], v kv, out Collector[string]) error {
				n, _ := cnt.Value(ctx)
				cnt.Update(ctx, n+v.V)
				return nil
			},
			ProcessElement2: func(ctx *KeyedContext[string], v kv, out Collector[string]) error {
				n, _ := cnt.Value(ctx)
				out.Collect(fmt.Sprintf("%s %d %d", v.K, n, v.V))
				return nil
			},
		})),
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			forEachRescale(t, func(t *testing.T, p1, p2 int) {
				checkRestore(t, op, 2, joinSteps(0, 30), joinSteps(30, 60), p1, p2)
			})
		})
	}
}

// Restoring a state under another type fails the operator with
// runtime.ErrIncompatibleState naming the state.
func TestCheckpointIncompatibleStateType(t *testing.T) {
	env := NewEnvironment()
	ks := KeyBy(FromElements(env, kv{}), func(x kv) string { return x.K })
	asInt := NewValueState[int]("s")
	asString := NewValueState[string]("s")
	opInt := opOf(KeyedProcess(ks, KeyedProcessFunction[string, kv, int]{ProcessElement: func(ctx *KeyedContext[string], v kv, out Collector[int]) error {
		asInt.Update(ctx, v.V)
		return nil
	}}))
	opString := opOf(KeyedProcess(ks, KeyedProcessFunction[string, kv, int]{ProcessElement: func(ctx *KeyedContext[string], v kv, out Collector[int]) error {
		asString.Update(ctx, "x")
		return nil
	}}))
	_, snaps := runSteps(t, opInt, 1, 1, 128, nil, kvSteps(0, 5), 0, 1)
	h := startHarness(t, opString, 1, 0, 1, 128, redistribute(snaps, 1, 128)[0], 0)
	h.send(0, kv{"k1", 1})
	err := h.waitErr()
	if !errors.Is(err, runtime.ErrIncompatibleState) {
		t.Fatalf("got %v, want ErrIncompatibleState", err)
	}
	t.Log(err)

	// A running aggregation's values too.
	opA := opOf(KeyBy(FromElements(env, kv{}), func(x kv) string { return x.K }).Reduce(func(a, b kv) kv { return a }))
	opB := opOf(Aggregate(KeyBy(FromElements(env, kv{}), func(x kv) string { return x.K }), NewAggregator(
		func() string { return "" }, func(v kv, a string) string { return a }, func(a string) string { return a })))
	_, snaps = runSteps(t, opA, 1, 1, 128, nil, kvSteps(0, 5), 0, 1)
	h = startHarness(t, opB, 1, 0, 1, 128, redistribute(snaps, 1, 128)[0], 0)
	if err := h.waitErr(); !errors.Is(err, runtime.ErrIncompatibleState) {
		t.Fatalf("got %v, want ErrIncompatibleState", err)
	}
}
