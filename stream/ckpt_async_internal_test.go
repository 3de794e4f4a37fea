package stream

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/stream/runtime"
)

// asyncSnapshot snapshots h's operator and serializes its keyed state on
// another goroutine: the serializer stops at its first key group until
// during() has run (the task changing the state meanwhile), then races
// with after(). It returns the snapshot with Keyed filled.
func asyncSnapshot(t *testing.T, h *harness, during, after func()) *runtime.OperatorSnapshot {
	t.Helper()
	snap := h.snapshot(1)
	stream := snap.KeyedStream
	if stream == nil {
		t.Fatal("the hashmap backend snapshotted synchronously")
	}
	snap.KeyedStream = nil
	gate, done := make(chan struct{}), make(chan error, 1)
	keyed := map[int]map[string][]byte{}
	go func() {
		first := true
		done <- stream(func(g int, sections map[string][]byte) error {
			if first {
				first = false
				<-gate
			}
			keyed[g] = map[string][]byte{}
			for n, d := range sections {
				keyed[g][n] = append([]byte(nil), d...)
			}
			return nil
		})
	}()
	during()
	h.sync()
	close(gate)
	after()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serializing the snapshot: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the snapshot was not serialized")
	}
	h.sync()
	for g, secs := range snap.Keyed { // synchronous sections (timers)
		if keyed[g] == nil {
			keyed[g] = map[string][]byte{}
		}
		for n, d := range secs {
			if _, dup := keyed[g][n]; dup {
				t.Fatalf("section %s of key group %d is both synchronous and asynchronous", n, g)
			}
			keyed[g][n] = d
		}
	}
	snap.Keyed = keyed
	return snap
}

// While a snapshot is serialized the task goes on changing every kind of
// keyed state (replaced and in place, with and without TTL): the snapshot
// must hold exactly the state at the barrier.
func TestAsyncSnapshotKeyedStateTypes(t *testing.T) {
	env := NewEnvironment()
	ttl := StateTtlConfig{TTL: time.Hour, UpdateType: OnReadAndWrite}
	v := NewValueState[int]("v")
	sl := NewValueState[[]int]("slice") // changed in place by the user
	l := NewListState[int]("l")
	m := NewMapState[int, string]("m")
	agg := NewAggregatingState[int]("agg", NewAggregator(
		func() map[int]int { return map[int]int{} },
		func(x int, acc map[int]int) map[int]int { acc[x%5]++; return acc }, // in place
		func(acc map[int]int) string { return fmt.Sprint(acc) }))
	tv := NewValueState[int]("tv", WithTTL(ttl))
	tl := NewListState[int]("tl", WithTTL(ttl))
	tm := NewMapState[int, int]("tm", WithTTL(ttl))
	op := opOf(KeyedProcess(KeyBy(FromElements(env, kv{}), func(x kv) string { return x.K }), KeyedProcessFunction[string, kv, string]{
		ProcessElement: func(ctx *KeyedContext[string], x kv, out Collector[string]) error {
			switch {
			case x.V < 0: // dump
				a, _ := agg.Get(ctx)
				vv, _ := v.Value(ctx)
				s, _ := sl.Value(ctx)
				tvv, _ := tv.Value(ctx)
				mk, tmk := m.Entries(ctx), tm.Entries(ctx)
				out.Collect(fmt.Sprintf("%s v=%d slice=%v l=%v m=%v agg=%s tv=%d tl=%v tm=%v",
					x.K, vv, s, l.Get(ctx), sortedMap(mk), a, tvv, tl.Get(ctx), sortedMap(tmk)))
			case x.V%17 == 0:
				v.Clear(ctx)
				l.Clear(ctx)
				m.Clear(ctx)
				tl.Clear(ctx)
			default:
				v.Update(ctx, x.V)
				s, ok := sl.Value(ctx)
				if !ok {
					s = make([]int, 3)
				}
				s[x.V%3] += x.V // in place
				sl.Update(ctx, s)
				l.Add(ctx, x.V)
				if x.V%4 == 0 {
					l.Update(ctx, l.Get(ctx)[1:])
				}
				m.Put(ctx, x.V%6, fmt.Sprint(x.V))
				if x.V%5 == 0 {
					m.Remove(ctx, (x.V+1)%6)
				}
				agg.Add(ctx, x.V)
				old, _ := tv.Value(ctx)
				tv.Update(ctx, old+x.V)
				tl.Add(ctx, x.V)
				_ = tl.Get(ctx) // renews (rewrites) every element
				tm.Put(ctx, x.V%4, x.V)
				if x.V%3 == 0 {
					tm.Remove(ctx, (x.V+1)%4)
				}
				_, _ = tm.Get(ctx, x.V%4)
			}
			return nil
		},
	}))
	const keys = 200
	send := func(h *harness, from, to int) {
		for i := from; i < to; i++ {
			for k := 0; k < keys; k++ {
				h.send(0, kv{fmt.Sprintf("k%03d", k), i*keys + k + 1})
			}
		}
	}
	dump := func(h *harness) []string {
		before := len(h.outputs())
		for k := 0; k < keys; k++ {
			h.send(0, kv{fmt.Sprintf("k%03d", k), -1})
		}
		return values(h.outputs()[before:])
	}
	h := startHarnessWith(t, op, 1, 0, 1, 128, nil, 1000, true)
	send(h, 0, 6)
	h.sync()
	var want []string
	snap := asyncSnapshot(t, h,
		func() { want = dump(h); send(h, 6, 12) },
		func() { send(h, 12, 20) })
	if changed := dump(h); fmt.Sprint(changed) == fmt.Sprint(want) {
		t.Fatal("the state did not change after the barrier: the test proves nothing")
	}
	h.fail()
	r := startHarness(t, op, 1, 0, 1, 128, redistribute([]*runtime.OperatorSnapshot{snap}, 1, 128)[0], 1000)
	if got := dump(r); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("restored state differs from the state at the barrier:\n got %v\nwant %v", got, want)
	}
}

func sortedMap[K int, V any](m map[K]V) string {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, int(k))
	}
	sort.Ints(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%d:%v ", k, m[K(k)])
	}
	return b.String()
}

// Window contents (reduce, aggregate, and the element lists of a process
// window, changed in place) are serialized while records keep arriving in
// the same windows: the snapshot holds the windows at the barrier.
func TestAsyncSnapshotWindows(t *testing.T) {
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
	const keys = 100
	send := func(h *harness, from, to int) {
		for i := from; i < to; i++ {
			for k := 0; k < keys; k++ {
				key := fmt.Sprintf("k%03d", k)
				h.sendTs(0, int64(i%30)*100, kv{key, i*keys + k})
			}
		}
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			ref := startHarness(t, op, 1, 0, 1, 128, nil, 0)
			send(ref, 0, 10)
			ref.watermark(1 << 40)
			want := values(ref.outputs())
			h := startHarnessWith(t, op, 1, 0, 1, 128, nil, 0, true)
			send(h, 0, 10)
			h.sync()
			snap := asyncSnapshot(t, h, func() { send(h, 10, 20) }, func() { send(h, 20, 30) })
			h.fail()
			r := startHarness(t, op, 1, 0, 1, 128, redistribute([]*runtime.OperatorSnapshot{snap}, 1, 128)[0], 0)
			r.watermark(1 << 40)
			if got := values(r.outputs()); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("restored windows differ from those at the barrier:\n got %v\nwant %v", got, want)
			}
			if len(want) == 0 {
				t.Fatal("no window fired")
			}
		})
	}
}
