// Package windowsuite is a set of window, trigger, evictor, lateness and
// side-output pipelines over one generated event stream, with a reference
// computation of their results in plain Go that shares no code with the
// SDK. Tests run it in the local executor and, through the testjob binary,
// on a cluster.
package windowsuite

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/gofl/gofl/stream"
)

// Event is one generated record.
type Event struct {
	Key string
	Ts  int64
	V   int
}

// Bound is the watermarks' out-of-orderness.
const Bound = 2 * time.Second

// Events generates n events of 5 keys: timestamps 250 ms apart, up to 2 s
// out of order, and every 17th event 9 s late (within or past the allowed
// lateness).
func Events(n int) []Event {
	seed := uint64(42)
	next := func() uint64 {
		seed = seed*6364136223846793005 + 1442695040888963407
		return seed >> 33
	}
	out := make([]Event, n)
	for i := range out {
		ts := int64(i*250) - int64(next()%2000)
		if i%17 == 16 {
			ts -= 9000
		}
		out[i] = Event{Key: fmt.Sprintf("k%d", next()%5), Ts: max(ts, 0), V: int(next() % 100)}
	}
	return out
}

// everySeventh fires and purges the global window at every element whose
// value is a multiple of 7: the suite's custom Trigger.
type everySeventh struct{}

func (everySeventh) OnElement(v any, _ int64, _ stream.TimeWindow, _ *stream.TriggerContext) stream.TriggerResult {
	if v.(Event).V%7 == 0 {
		return stream.FireAndPurge
	}
	return stream.Continue
}

func (everySeventh) OnEventTime(int64, stream.TimeWindow, *stream.TriggerContext) stream.TriggerResult {
	return stream.Continue
}

func (everySeventh) OnProcessingTime(int64, stream.TimeWindow, *stream.TriggerContext) stream.TriggerResult {
	return stream.Continue
}

func (everySeventh) CanMerge() bool                                    { return false }
func (everySeventh) OnMerge(stream.TimeWindow, *stream.TriggerContext) {}
func (everySeventh) Clear(stream.TimeWindow, *stream.TriggerContext)   {}

// Build adds the suite's pipelines to env; their results are lines
// "<pipeline>|..." of one stream.
func Build(env *stream.Environment, events []Event) stream.DataStream[string] {
	src := stream.FromCollection(env, events).Name("Events")
	// One watermark generator: the watermark each record sees is the
	// reference's.
	timed := src.AssignTimestampsAndWatermarks(stream.BoundedOutOfOrderness(Bound, func(e Event) int64 { return e.Ts })).
		SetParallelism(1).Name("Timestamps")
	ks := stream.KeyBy(timed, func(e Event) string { return e.Key })
	sum := func(a, b Event) Event { return Event{a.Key, max(a.Ts, b.Ts), a.V + b.V} }
	show := func(name string) stream.WindowFunction[Event, string, string] {
		return func(k string, w stream.TimeWindow, v Event, out stream.Collector[string]) error {
			if w == stream.GlobalWindow {
				out.Collect(fmt.Sprintf("%s|%s|%d", name, k, v.V))
			} else {
				out.Collect(fmt.Sprintf("%s|%s|%d|%d|%d", name, k, w.Start, w.End, v.V))
			}
			return nil
		}
	}
	var outs []stream.DataStream[string]

	late := stream.NewOutputTag[Event]("late")
	tumble := stream.ReduceWindow(stream.Window(ks, stream.TumblingEventTime(10*time.Second)).
		AllowedLateness(5*time.Second).SideOutputLateData(late), sum, show("tumble")).Name("Tumble")
	outs = append(outs, tumble, stream.Map(stream.GetSideOutput(tumble, late), func(e Event) string {
		return fmt.Sprintf("late|%s|%d|%d", e.Key, e.Ts, e.V)
	}))

	countSum := stream.NewAggregator(func() [2]int { return [2]int{} },
		func(e Event, a [2]int) [2]int { return [2]int{a[0] + 1, a[1] + e.V} },
		func(a [2]int) [2]int { return a }).WithMerge(func(a, b [2]int) [2]int { return [2]int{a[0] + b[0], a[1] + b[1]} })
	outs = append(outs, stream.AggregateWindow(stream.Window(ks, stream.EventTimeSessionWindows(3*time.Second)), countSum,
		func(k string, w stream.TimeWindow, a [2]int, out stream.Collector[string]) error {
			out.Collect(fmt.Sprintf("session|%s|%d|%d|%d|%d", k, w.Start, w.End, a[0], a[1]))
			return nil
		}).Name("Session"))

	outs = append(outs, stream.ReduceWindow(ks.CountWindow(3), sum, show("count")).Name("Count"))
	outs = append(outs, stream.ReduceWindow(ks.CountWindowSlide(4, 2), sum, show("slide")).Name("CountSlide"))
	outs = append(outs, stream.WindowProcess(stream.Window(ks, stream.GlobalWindows()).Trigger(everySeventh{}),
		func(k string, _ stream.TimeWindow, es []Event, out stream.Collector[string]) error {
			s := 0
			for _, e := range es {
				s += e.V
			}
			out.Collect(fmt.Sprintf("custom|%s|%d|%d", k, len(es), s))
			return nil
		}).Name("Custom"))
	delta := stream.DeltaEvictor(50, func(a, b Event) float64 { return math.Abs(float64(a.V - b.V)) })
	outs = append(outs, stream.ReduceWindow(stream.Window(ks, stream.GlobalWindows()).Trigger(stream.CountTrigger(5)).Evictor(delta),
		sum, show("delta")).Name("Delta"))
	outs = append(outs, stream.ProcessWindow(stream.Window(ks, stream.ProcessingTimeSessionWindows(time.Hour)),
		stream.ProcessWindowFunction[Event, string, string]{Process: func(ctx *stream.WindowContext[string], es []Event, out stream.Collector[string]) error {
			out.Collect(fmt.Sprintf("procsession|%s|%d", ctx.CurrentKey(), len(es)))
			return nil
		}}).Name("ProcSession"))

	fives := stream.NewOutputTag[int]("fives")
	proc := stream.Process(src, func(ctx *stream.ProcessContext, e Event, out stream.Collector[string]) error {
		if e.V%5 == 0 {
			stream.Output(ctx, fives, e.V)
		}
		return nil
	}).Name("Fives")
	outs = append(outs, stream.MapWith(stream.GetSideOutput(proc, fives).Rebalance(), func() stream.MapFunction[int, string] { return &sideFormat{} }))
	return stream.Union(outs...)
}

// Expected is the reference result of Build's pipelines on events, sorted.
func Expected(events []Event) []string {
	var out []string
	emit := func(f string, a ...any) { out = append(out, fmt.Sprintf(f, a...)) }
	bound := Bound.Milliseconds()
	// wms[i] is the watermark when event i arrives; wms[n] the final one.
	wms := make([]int64, len(events)+1)
	wm, maxTs := int64(math.MinInt64), int64(math.MinInt64)
	for i, e := range events {
		wms[i] = wm
		maxTs = max(maxTs, e.Ts)
		wm = max(wm, maxTs-bound-1)
	}
	wms[len(events)] = math.MaxInt64

	// Tumbling 10 s, allowed lateness 5 s, late data to a side output.
	type win struct {
		key   string
		start int64
	}
	sums := map[win]int{}
	for i, e := range events {
		w := win{e.Key, e.Ts - e.Ts%10000}
		end := w.start + 9999
		if end+5000 <= wms[i] {
			emit("late|%s|%d|%d", e.Key, e.Ts, e.V)
		} else {
			sums[w] += e.V
			if end <= wms[i] {
				emit("tumble|%s|%d|%d|%d", w.key, w.start, w.start+10000, sums[w])
			}
		}
		for w, s := range sums {
			end := w.start + 9999
			if end > wms[i] && end <= wms[i+1] {
				emit("tumble|%s|%d|%d|%d", w.key, w.start, w.start+10000, s)
			}
			if end+5000 <= wms[i+1] {
				delete(sums, w)
			}
		}
	}

	// Event-time sessions with a 3 s gap.
	type session struct{ start, end, n, sum int64 }
	sessions := map[string][]*session{}
	for i, e := range events {
		s := &session{start: e.Ts, end: e.Ts + 3000, n: 1, sum: int64(e.V)}
		var keep []*session
		for _, x := range sessions[e.Key] {
			if x.start <= s.end && x.end >= s.start {
				s.start, s.end = min(s.start, x.start), max(s.end, x.end)
				s.n, s.sum = s.n+x.n, s.sum+x.sum
			} else {
				keep = append(keep, x)
			}
		}
		if s.end-1 > wms[i] {
			sessions[e.Key] = append(keep, s)
		}
		for k, ss := range sessions {
			var live []*session
			for _, x := range ss {
				if x.end-1 <= wms[i+1] {
					emit("session|%s|%d|%d|%d|%d", k, x.start, x.end, x.n, x.sum)
				} else {
					live = append(live, x)
				}
			}
			sessions[k] = live
		}
	}

	// Per key, in arrival order: count windows, sliding count windows, the
	// custom trigger and the delta evictor.
	byKey := map[string][]Event{}
	for _, e := range events {
		byKey[e.Key] = append(byKey[e.Key], e)
	}
	for k, es := range byKey {
		for i := 2; i < len(es); i += 3 {
			emit("count|%s|%d", k, es[i-2].V+es[i-1].V+es[i].V)
		}
		for i := 1; i < len(es); i += 2 {
			s := 0
			for _, e := range es[max(0, i-3) : i+1] {
				s += e.V
			}
			emit("slide|%s|%d", k, s)
		}
		n, s := 0, 0
		for _, e := range es {
			n, s = n+1, s+e.V
			if e.V%7 == 0 {
				emit("custom|%s|%d|%d", k, n, s)
				n, s = 0, 0
			}
		}
		var buf []int
		for i, e := range es {
			buf = append(buf, e.V)
			if (i+1)%5 != 0 {
				continue
			}
			last := buf[len(buf)-1]
			var kept []int
			s := 0
			for _, v := range buf {
				if d := v - last; d < 50 && d > -50 {
					kept = append(kept, v)
					s += v
				}
			}
			buf = kept
			emit("delta|%s|%d", k, s)
		}
		emit("procsession|%s|%d", k, len(es))
	}
	for _, e := range events {
		if e.V%5 == 0 {
			emit("side|%d", e.V)
		}
	}
	sort.Strings(out)
	return out
}

// sideFormat is a rich function: its prefix is set in Open.
type sideFormat struct{ prefix string }

func (f *sideFormat) Open(ctx *stream.RuntimeContext) error {
	f.prefix = "side"
	ctx.MetricGroup().Counter("opened").Inc()
	return nil
}

func (f *sideFormat) Close() error { return nil }

func (f *sideFormat) Map(v int) (string, error) { return fmt.Sprintf("%s|%d", f.prefix, v), nil }
