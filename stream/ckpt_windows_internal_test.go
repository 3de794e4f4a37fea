package stream

import (
	"fmt"
	"testing"
	"time"

	"github.com/gofl/gofl/stream/runtime"
)

// sessionSteps are records of 7 keys with gaps that open and merge
// sessions, some out of order, and watermarks that close sessions.
func sessionSteps(from, to int) []step {
	var s []step
	for i := from; i < to; i++ {
		k := fmt.Sprintf("k%d", i%7)
		ts := int64(i*100) + int64((i%3)*250) // out of order by up to 500ms
		if i%11 == 0 {
			ts += 3000 // opens a new session, merged later or not
		}
		s = append(s, recTs(k, kv{k, i}, ts))
		if i%5 == 4 {
			s = append(s, wmStep(int64(i*100-1200)))
		}
	}
	return s
}

// everyNth fires and purges the global window at every element whose value
// is a multiple of n: a custom Trigger.
type everyNth struct{ n int }

func (t everyNth) OnElement(v any, _ int64, _ TimeWindow, ctx *TriggerContext) TriggerResult {
	c, _ := ctx.State("seen")
	ctx.SetState("seen", c+1)
	if v.(kv).V%t.n == 0 {
		return FireAndPurge
	}
	return Continue
}
func (everyNth) OnEventTime(int64, TimeWindow, *TriggerContext) TriggerResult { return Continue }
func (everyNth) OnProcessingTime(int64, TimeWindow, *TriggerContext) TriggerResult {
	return Continue
}
func (everyNth) CanMerge() bool                          { return false }
func (everyNth) OnMerge(TimeWindow, *TriggerContext)     {}
func (everyNth) Clear(_ TimeWindow, ctx *TriggerContext) { ctx.ClearState("seen") }

// Window contents, trigger state, evictor buffers, per-window state and the
// trigger and cleanup timers survive a checkpoint and a rescale.
func TestCheckpointWindowKinds(t *testing.T) {
	env := NewEnvironment()
	ks := KeyBy(FromElements(env, kv{}), func(x kv) string { return x.K })
	sum := func(a, b kv) kv { return kv{a.K, a.V + b.V} }
	show := func(k string, w TimeWindow, v kv, out Collector[string]) error {
		out.Collect(fmt.Sprintf("%s %v %d", k, w, v.V))
		return nil
	}
	countSum := NewAggregator(func() [2]int { return [2]int{} },
		func(v kv, a [2]int) [2]int { return [2]int{a[0] + 1, a[1] + v.V} },
		func(a [2]int) [2]int { return a }).WithMerge(func(a, b [2]int) [2]int { return [2]int{a[0] + b[0], a[1] + b[1]} })
	fires := NewWindowValueState[int]("fires")
	ts := kvTsSteps
	ops := map[string]struct {
		op            func() runtime.Operator
		first, second []step
	}{
		"session-aggregate": {opOf(AggregateWindow(Window(ks, EventTimeSessionWindows(time.Second)), countSum,
			func(k string, w TimeWindow, a [2]int, out Collector[string]) error {
				out.Collect(fmt.Sprintf("%s %v %v", k, w, a))
				return nil
			})), sessionSteps(0, 40), sessionSteps(40, 90)},
		"session-process-lateness": {opOf(ProcessWindow(Window(ks, EventTimeSessionWindows(time.Second)).AllowedLateness(time.Second),
			ProcessWindowFunction[kv, string, string]{Process: func(ctx *WindowContext[string], es []kv, out Collector[string]) error {
				n, _, err := fires.Value(ctx)
				if err != nil {
					return err
				}
				if err := fires.Update(ctx, n+1); err != nil {
					return err
				}
				out.Collect(fmt.Sprintf("%s %v %d #%d", ctx.CurrentKey(), ctx.Window(), len(es), n))
				return nil
			}})), sessionSteps(0, 40), sessionSteps(40, 90)},
		"count":        {opOf(ReduceWindow(ks.CountWindow(3), sum, show)), kvSteps(0, 30), kvSteps(30, 70)},
		"count-slide":  {opOf(ReduceWindow(ks.CountWindowSlide(4, 3), sum, show)), kvSteps(0, 31), kvSteps(31, 70)},
		"custom":       {opOf(ReduceWindow(Window(ks, GlobalWindows()).Trigger(everyNth{5}), sum, show)), kvSteps(0, 33), kvSteps(33, 70)},
		"delta":        {opOf(ReduceWindow(Window(ks, GlobalWindows()).Trigger(CountTrigger(4)).Evictor(DeltaEvictor(20, func(a, b kv) float64 { return float64(b.V - a.V) })), sum, show)), kvSteps(0, 33), kvSteps(33, 90)},
		"time-evictor": {opOf(ReduceWindow(Window(ks, TumblingEventTime(2*time.Second)).Evictor(TimeEvictor(time.Second).DoEvictAfter()).Trigger(ContinuousEventTimeTrigger(500*time.Millisecond)), sum, show)), ts(0, 33), ts(33, 70)},
		"lateness":     {opOf(ReduceWindow(Window(ks, TumblingEventTime(time.Second)).AllowedLateness(800*time.Millisecond), sum, show)), sessionSteps(0, 40), sessionSteps(40, 90)},
	}
	for name, c := range ops {
		t.Run(name, func(t *testing.T) {
			forEachRescale(t, func(t *testing.T, p1, p2 int) {
				checkRestore(t, c.op, 1, c.first, c.second, p1, p2)
			})
		})
	}
}
