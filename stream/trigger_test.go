package stream_test

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/gofl/gofl/stream"
)

// runWindows runs a one-key window pipeline on events (in order,
// watermark = latest timestamp - 1) and returns the sorted results.
func runWindows(t *testing.T, events []ev, window func(stream.KeyedStream[ev, string]) stream.WindowedStream[ev, string]) []string {
	t.Helper()
	env := stream.NewEnvironment()
	src := stream.FromCollection(env, events).AssignTimestampsAndWatermarks(stream.MonotonousTimestamps(func(e ev) int64 { return e.Ts }))
	res := stream.WindowProcess(window(stream.KeyBy(src, func(e ev) string { return e.Key })),
		func(k string, w stream.TimeWindow, es []ev, out stream.Collector[string]) error {
			vs := make([]int, len(es))
			for i, e := range es {
				vs[i] = e.V
			}
			out.Collect(fmt.Sprintf("%s %v %v", k, w, vs))
			return nil
		}).Collect()
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := res.Values()
	sort.Strings(got)
	return got
}

func TestContinuousEventTimeTrigger(t *testing.T) {
	events := []ev{{"a", 500, 1}, {"a", 1500, 2}, {"a", 2500, 4}, {"a", 4100, 8}, {"a", 9000, 16}, {"a", 10500, 32}}
	got := runWindows(t, events, func(ks stream.KeyedStream[ev, string]) stream.WindowedStream[ev, string] {
		return stream.Window(ks, stream.TumblingEventTime(10*time.Second)).Trigger(stream.ContinuousEventTimeTrigger(2 * time.Second))
	})
	// Window [0, 10000) fires at 2000 (watermark 2499: 1, 2, 4), 4000
	// (watermark 4099), 6000 and 8000 (watermark 8999) and at its end;
	// [10000, 20000) at 12000, 14000, 16000, 18000 and its end, all on the
	// final watermark.
	want := []string{
		"a [0, 10000) [1 2 4 8 16]", "a [0, 10000) [1 2 4 8 16]", "a [0, 10000) [1 2 4 8 16]",
		"a [0, 10000) [1 2 4 8]", "a [0, 10000) [1 2 4]",
	}
	for i := 0; i < 5; i++ {
		want = append(want, "a [10000, 20000) [32]")
	}
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}

func TestEvictors(t *testing.T) {
	events := []ev{{"a", 1000, 1}, {"a", 5000, 2}, {"a", 7000, 3}, {"a", 8000, 4}, {"a", 9000, 5}, {"a", 9500, 6}}
	cases := map[string]struct {
		window func(stream.KeyedStream[ev, string]) stream.WindowedStream[ev, string]
		want   []string
	}{
		// Keeps the elements above the latest timestamp (9500) - 3000.
		"time": {func(ks stream.KeyedStream[ev, string]) stream.WindowedStream[ev, string] {
			return stream.Window(ks, stream.TumblingEventTime(10*time.Second)).Evictor(stream.TimeEvictor(3 * time.Second))
		}, []string{"a [0, 10000) [3 4 5 6]"}},
		// The function sees every element, then the last 2 are kept: 1 2, then
		// 1 2 3 4, then 3 4 5 6.
		"count-after": {func(ks stream.KeyedStream[ev, string]) stream.WindowedStream[ev, string] {
			return stream.Window(ks, stream.GlobalWindows()).Trigger(stream.CountTrigger(2)).Evictor(stream.CountEvictor(2).DoEvictAfter())
		}, []string{"a GlobalWindow [1 2 3 4]", "a GlobalWindow [1 2]", "a GlobalWindow [3 4 5 6]"}},
		// Drops those 3 or more away from the last element.
		"delta": {func(ks stream.KeyedStream[ev, string]) stream.WindowedStream[ev, string] {
			return stream.Window(ks, stream.GlobalWindows()).Trigger(stream.CountTrigger(3)).
				Evictor(stream.DeltaEvictor(3, func(a, b ev) float64 { return float64(b.V - a.V) }))
		}, []string{"a GlobalWindow [1 2 3]", "a GlobalWindow [4 5 6]"}},
		// Purges the window every 4 elements: 5 and 6 are never evaluated.
		"purging-count": {func(ks stream.KeyedStream[ev, string]) stream.WindowedStream[ev, string] {
			return stream.Window(ks, stream.GlobalWindows()).Trigger(stream.PurgingTrigger(stream.CountTrigger(4)))
		}, []string{"a GlobalWindow [1 2 3 4]"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := runWindows(t, events, c.window); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %q\nwant %q", got, c.want)
			}
		})
	}
}

// A ProcessWindowFunction keeps per-window state (fires of one window,
// re-fired by late records within the allowed lateness) and keyed state
// across the key's windows.
func TestProcessWindowState(t *testing.T) {
	events := []ev{{"a", 1000, 1}, {"a", 6000, 2}, {"a", 4000, 4}, {"a", 4500, 8}, {"a", 12000, 16}, {"a", 3000, 32}}
	env := stream.NewEnvironment()
	src := stream.FromCollection(env, events).AssignTimestampsAndWatermarks(stream.MonotonousTimestamps(func(e ev) int64 { return e.Ts }))
	fires := stream.NewWindowValueState[int]("fires")
	windows := stream.NewValueState[int]("windows")
	res := stream.ProcessWindow(stream.Window(stream.KeyBy(src, func(e ev) string { return e.Key }), stream.TumblingEventTime(5*time.Second)).
		AllowedLateness(5*time.Second), stream.ProcessWindowFunction[ev, string, string]{
		Process: func(ctx *stream.WindowContext[string], es []ev, out stream.Collector[string]) error {
			n, _, err := fires.Value(ctx)
			if err != nil {
				return err
			}
			if err := fires.Update(ctx, n+1); err != nil {
				return err
			}
			w, _ := windows.Value(ctx)
			if n == 0 {
				w++
				windows.Update(ctx, w)
			}
			s := 0
			for _, e := range es {
				s += e.V
			}
			out.Collect(fmt.Sprintf("%v fire %d window %d sum %d", ctx.Window(), n+1, w, s))
			return nil
		}}).Collect()
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := res.Values()
	// [0, 5000) fires at watermark 5999 (1), again for 4000 and 4500 (late
	// within 5 s), not for 3000 (watermark 11999: past 4999 + 5000, dropped);
	// [5000, 10000) at 11999; [10000, 15000) at the end.
	want := []string{
		"[0, 5000) fire 1 window 1 sum 1", "[0, 5000) fire 2 window 1 sum 5", "[0, 5000) fire 3 window 1 sum 13",
		"[5000, 10000) fire 1 window 2 sum 2", "[10000, 15000) fire 1 window 3 sum 16",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}
