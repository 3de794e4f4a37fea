package stream

import (
	"fmt"
	"math"
	"time"
)

// TriggerResult is what a Trigger decides for its window (Flink's
// TriggerResult).
type TriggerResult int

const (
	// Continue does nothing (Flink's CONTINUE).
	Continue TriggerResult = iota
	// Fire evaluates the window function and keeps the window's contents
	// (FIRE).
	Fire
	// Purge drops the window's contents without evaluating it (PURGE).
	Purge
	// FireAndPurge evaluates the window function, then drops the contents
	// (FIRE_AND_PURGE).
	FireAndPurge
)

func (r TriggerResult) String() string {
	switch r {
	case Continue:
		return "CONTINUE"
	case Fire:
		return "FIRE"
	case Purge:
		return "PURGE"
	case FireAndPurge:
		return "FIRE_AND_PURGE"
	}
	return fmt.Sprintf("TriggerResult(%d)", int(r))
}

func (r TriggerResult) fire() bool  { return r == Fire || r == FireAndPurge }
func (r TriggerResult) purge() bool { return r == Purge || r == FireAndPurge }

// Trigger decides when a window is evaluated and purged (Flink's Trigger).
// The window operator calls its methods on the subtask's goroutine with the
// current key set; one Trigger value serves every key and window, so it
// keeps per-window state in the TriggerContext, not in fields. Timers it
// registers call OnEventTime or OnProcessingTime for the same key and
// window.
type Trigger interface {
	// OnElement is called for every element added to w; ts is its event
	// timestamp (0 without one).
	OnElement(v any, ts int64, w TimeWindow, ctx *TriggerContext) TriggerResult
	// OnEventTime is called when an event-time timer of w fires.
	OnEventTime(time int64, w TimeWindow, ctx *TriggerContext) TriggerResult
	// OnProcessingTime is called when a processing-time timer of w fires.
	OnProcessingTime(time int64, w TimeWindow, ctx *TriggerContext) TriggerResult
	// CanMerge tells whether the trigger supports merging (session)
	// windows.
	CanMerge() bool
	// OnMerge is called when windows merge into w: ctx.MergeState merges
	// the merged windows' state; the trigger re-registers its timers for w.
	OnMerge(w TimeWindow, ctx *TriggerContext)
	// Clear removes the trigger's timers and state of w when the window is
	// purged for good or merged into another.
	Clear(w TimeWindow, ctx *TriggerContext)
}

// TriggerContext is a Trigger's access to time, timers and its state for
// one key and window, valid during the call it is passed to. State is a set of named int64 values per window,
// snapshotted with the window (what Flink's built-in triggers keep in
// ValueState or ReducingState of Long).
type TriggerContext struct {
	op     *windowOp
	w      TimeWindow
	c      *winContents
	merged []*winContents
}

// CurrentWatermark is the operator's event time.
func (c *TriggerContext) CurrentWatermark() int64 { return c.op.timers.CurrentWatermark() }

// CurrentProcessingTime is the clock in milliseconds.
func (c *TriggerContext) CurrentProcessingTime() int64 { return c.op.Ctx.ProcessingTime() }

// RegisterEventTimeTimer calls OnEventTime for the window once the
// watermark reaches ts. Registering a timer twice fires it once.
func (c *TriggerContext) RegisterEventTimeTimer(ts int64) {
	c.op.timers.RegisterEventTimeTimer(c.op.key, c.w, ts)
}

// RegisterProcessingTimeTimer calls OnProcessingTime for the window once
// the clock reaches ts.
func (c *TriggerContext) RegisterProcessingTimeTimer(ts int64) {
	c.op.timers.RegisterProcessingTimeTimer(c.op.key, c.w, ts)
}

// DeleteEventTimeTimer removes the window's event-time timer at ts.
func (c *TriggerContext) DeleteEventTimeTimer(ts int64) {
	c.op.timers.DeleteEventTimeTimer(c.op.key, c.w, ts)
}

// DeleteProcessingTimeTimer removes the window's processing-time timer at
// ts.
func (c *TriggerContext) DeleteProcessingTimeTimer(ts int64) {
	c.op.timers.DeleteProcessingTimeTimer(c.op.key, c.w, ts)
}

// State is the window's state value name.
func (c *TriggerContext) State(name string) (int64, bool) {
	v, ok := c.c.trig[name]
	return v, ok
}

// SetState sets the window's state value name.
func (c *TriggerContext) SetState(name string, v int64) {
	if c.c.trig == nil {
		c.c.trig = map[string]int64{}
	}
	c.c.trig[name] = v
}

// ClearState removes the window's state value name.
func (c *TriggerContext) ClearState(name string) { delete(c.c.trig, name) }

// MergeState, in OnMerge, sets state value name of the merged window to
// the merged windows' values combined with fn (Flink's
// mergePartitionedState). Elsewhere it does nothing.
func (c *TriggerContext) MergeState(name string, fn func(a, b int64) int64) {
	var acc int64
	found := false
	for _, m := range c.merged {
		v, ok := m.trig[name]
		if !ok {
			continue
		}
		if found {
			acc = fn(acc, v)
		} else {
			acc, found = v, true
		}
	}
	if found {
		c.SetState(name, acc)
	}
}

// EventTimeTrigger fires a window once the watermark passes its end
// (Flink's EventTimeTrigger), and at once for every element added to it
// after that (within the allowed lateness).
func EventTimeTrigger() Trigger { return eventTimeTrigger{} }

type eventTimeTrigger struct{}

func (eventTimeTrigger) OnElement(_ any, _ int64, w TimeWindow, ctx *TriggerContext) TriggerResult {
	if w.MaxTimestamp() <= ctx.CurrentWatermark() {
		return Fire
	}
	ctx.RegisterEventTimeTimer(w.MaxTimestamp())
	return Continue
}

func (eventTimeTrigger) OnEventTime(time int64, w TimeWindow, _ *TriggerContext) TriggerResult {
	if time == w.MaxTimestamp() {
		return Fire
	}
	return Continue
}

func (eventTimeTrigger) OnProcessingTime(int64, TimeWindow, *TriggerContext) TriggerResult {
	return Continue
}

func (eventTimeTrigger) CanMerge() bool { return true }

func (eventTimeTrigger) OnMerge(w TimeWindow, ctx *TriggerContext) {
	if w.MaxTimestamp() > ctx.CurrentWatermark() {
		ctx.RegisterEventTimeTimer(w.MaxTimestamp())
	}
}

func (eventTimeTrigger) Clear(w TimeWindow, ctx *TriggerContext) {
	ctx.DeleteEventTimeTimer(w.MaxTimestamp())
}

// ProcessingTimeTrigger fires a window once the clock passes its end
// (Flink's ProcessingTimeTrigger).
func ProcessingTimeTrigger() Trigger { return processingTimeTrigger{} }

type processingTimeTrigger struct{}

func (processingTimeTrigger) OnElement(_ any, _ int64, w TimeWindow, ctx *TriggerContext) TriggerResult {
	ctx.RegisterProcessingTimeTimer(w.MaxTimestamp())
	return Continue
}

func (processingTimeTrigger) OnEventTime(int64, TimeWindow, *TriggerContext) TriggerResult {
	return Continue
}

func (processingTimeTrigger) OnProcessingTime(int64, TimeWindow, *TriggerContext) TriggerResult {
	return Fire
}

func (processingTimeTrigger) CanMerge() bool { return true }

func (processingTimeTrigger) OnMerge(w TimeWindow, ctx *TriggerContext) {
	if w.MaxTimestamp() > ctx.CurrentProcessingTime() {
		ctx.RegisterProcessingTimeTimer(w.MaxTimestamp())
	}
}

func (processingTimeTrigger) Clear(w TimeWindow, ctx *TriggerContext) {
	ctx.DeleteProcessingTimeTimer(w.MaxTimestamp())
}

// CountTrigger fires a window every n elements (Flink's CountTrigger).
func CountTrigger(n int64) Trigger { return countTrigger{n: n} }

type countTrigger struct{ n int64 }

const countState = "count"

func (t countTrigger) OnElement(_ any, _ int64, _ TimeWindow, ctx *TriggerContext) TriggerResult {
	c, _ := ctx.State(countState)
	c++
	if c >= t.n {
		ctx.ClearState(countState)
		return Fire
	}
	ctx.SetState(countState, c)
	return Continue
}

func (countTrigger) OnEventTime(int64, TimeWindow, *TriggerContext) TriggerResult { return Continue }

func (countTrigger) OnProcessingTime(int64, TimeWindow, *TriggerContext) TriggerResult {
	return Continue
}

func (countTrigger) CanMerge() bool { return true }

func (countTrigger) OnMerge(_ TimeWindow, ctx *TriggerContext) {
	ctx.MergeState(countState, func(a, b int64) int64 { return a + b })
}

func (countTrigger) Clear(_ TimeWindow, ctx *TriggerContext) { ctx.ClearState(countState) }

// PurgingTrigger turns every Fire of t into FireAndPurge (Flink's
// PurgingTrigger).
func PurgingTrigger(t Trigger) Trigger { return purgingTrigger{t} }

type purgingTrigger struct{ t Trigger }

func purging(r TriggerResult) TriggerResult {
	if r == Fire {
		return FireAndPurge
	}
	return r
}

func (p purgingTrigger) OnElement(v any, ts int64, w TimeWindow, ctx *TriggerContext) TriggerResult {
	return purging(p.t.OnElement(v, ts, w, ctx))
}

func (p purgingTrigger) OnEventTime(time int64, w TimeWindow, ctx *TriggerContext) TriggerResult {
	return purging(p.t.OnEventTime(time, w, ctx))
}

func (p purgingTrigger) OnProcessingTime(time int64, w TimeWindow, ctx *TriggerContext) TriggerResult {
	return purging(p.t.OnProcessingTime(time, w, ctx))
}

func (p purgingTrigger) CanMerge() bool                            { return p.t.CanMerge() }
func (p purgingTrigger) OnMerge(w TimeWindow, ctx *TriggerContext) { p.t.OnMerge(w, ctx) }
func (p purgingTrigger) Clear(w TimeWindow, ctx *TriggerContext)   { p.t.Clear(w, ctx) }

// ContinuousEventTimeTrigger fires a window every interval of event time
// (aligned to the epoch) and once the watermark passes its end (Flink's
// ContinuousEventTimeTrigger).
func ContinuousEventTimeTrigger(interval time.Duration) Trigger {
	return continuousEventTimeTrigger{interval: interval.Milliseconds()}
}

type continuousEventTimeTrigger struct{ interval int64 }

const fireTimeState = "fire-time"

func (t continuousEventTimeTrigger) OnElement(_ any, ts int64, w TimeWindow, ctx *TriggerContext) TriggerResult {
	if w.MaxTimestamp() <= ctx.CurrentWatermark() {
		return Fire
	}
	ctx.RegisterEventTimeTimer(w.MaxTimestamp())
	if _, ok := ctx.State(fireTimeState); !ok {
		start := ts - ((ts%t.interval)+t.interval)%t.interval
		t.registerNext(start+t.interval, w, ctx)
	}
	return Continue
}

func (t continuousEventTimeTrigger) registerNext(ts int64, w TimeWindow, ctx *TriggerContext) {
	ts = min(ts, w.MaxTimestamp())
	ctx.SetState(fireTimeState, ts)
	ctx.RegisterEventTimeTimer(ts)
}

func (t continuousEventTimeTrigger) OnEventTime(time int64, w TimeWindow, ctx *TriggerContext) TriggerResult {
	if time == w.MaxTimestamp() {
		return Fire
	}
	if next, ok := ctx.State(fireTimeState); ok && next == time {
		if time <= math.MaxInt64-t.interval {
			t.registerNext(time+t.interval, w, ctx)
		}
		return Fire
	}
	return Continue
}

func (continuousEventTimeTrigger) OnProcessingTime(int64, TimeWindow, *TriggerContext) TriggerResult {
	return Continue
}

func (continuousEventTimeTrigger) CanMerge() bool { return true }

func (t continuousEventTimeTrigger) OnMerge(w TimeWindow, ctx *TriggerContext) {
	ctx.MergeState(fireTimeState, func(a, b int64) int64 { return min(a, b) })
	if next, ok := ctx.State(fireTimeState); ok {
		ctx.RegisterEventTimeTimer(next)
	}
	if w.MaxTimestamp() > ctx.CurrentWatermark() {
		ctx.RegisterEventTimeTimer(w.MaxTimestamp())
	}
}

func (continuousEventTimeTrigger) Clear(w TimeWindow, ctx *TriggerContext) {
	if next, ok := ctx.State(fireTimeState); ok {
		ctx.DeleteEventTimeTimer(next)
		ctx.ClearState(fireTimeState)
	}
	ctx.DeleteEventTimeTimer(w.MaxTimestamp())
}

// neverTrigger is GlobalWindows' default trigger: it never fires.
type neverTrigger struct{}

func (neverTrigger) OnElement(any, int64, TimeWindow, *TriggerContext) TriggerResult {
	return Continue
}
func (neverTrigger) OnEventTime(int64, TimeWindow, *TriggerContext) TriggerResult { return Continue }
func (neverTrigger) OnProcessingTime(int64, TimeWindow, *TriggerContext) TriggerResult {
	return Continue
}
func (neverTrigger) CanMerge() bool                      { return true }
func (neverTrigger) OnMerge(TimeWindow, *TriggerContext) {}
func (neverTrigger) Clear(TimeWindow, *TriggerContext)   {}
