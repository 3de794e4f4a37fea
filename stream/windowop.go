package stream

import (
	"fmt"
	"math"
	"sort"

	"github.com/gofl/gofl/stream/runtime"
)

// windowStateName is the keyed state of a key's windows.
const windowStateName = "windows"

// windowFn is a window function in the operator's untyped form.
type windowFn struct {
	kind string
	// add folds an element of the given input into an accumulator (nil:
	// empty) and returns it.
	add func(acc any, input int, v any) any
	// merge combines two accumulators (session windows); nil when the
	// function cannot merge.
	merge func(a, b any) any
	// emit evaluates a window's accumulator.
	emit func(key any, w TimeWindow, acc any, out *windowOut) error
	// clear, optional, runs when a window is purged for good.
	clear func(key any, w TimeWindow, op *windowOp) error
	state stateConv
}

// windowConfig is how the operator assigns, triggers and evicts.
type windowConfig struct {
	assigner WindowAssigner
	trigger  Trigger
	evictor  Evictor
	lateness int64
	lateTag  string
	keyOf    [2]func(any) any
}

func (c windowConfig) check(f windowFn) error {
	if c.assigner.merging() && f.merge == nil && c.evictor == nil {
		return fmt.Errorf("session windows merge accumulators: the AggregateFunction must implement MergingAggregateFunction")
	}
	return nil
}

// winContents is one window of a key: its accumulator (or, with an
// evictor, its elements), its trigger's state and its per-window state.
type winContents struct {
	acc    any
	elems  []TimestampedValue
	trig   map[string]int64
	values map[string][]byte
}

func (c *winContents) empty() bool { return c.acc == nil && len(c.elems) == 0 }

// windowOut collects a window's results with its MaxTimestamp.
type windowOut struct {
	op *windowOp
	ts int64
}

func (o *windowOut) collect(v any) {
	o.op.Ctx.Output.Collect(runtime.Record{Value: v, Timestamp: o.ts, HasTimestamp: true})
}

func collectorOf[O any](o *windowOut) Collector[O] {
	return &collector[O]{out: o.op.Ctx.Output, ts: o.ts, hasTs: true}
}

// windowOp is the keyed window operator for one or two inputs (Flink's
// WindowOperator and EvictingWindowOperator). Per key the state is a map
// from window to winContents; the trigger's timers and the cleanup timers
// (at MaxTimestamp plus the allowed lateness) are namespaced by window.
// Session windows merge in that map: the contents of the windows a new
// element joins are merged into their cover.
type windowOp struct {
	keyed
	cfg      windowConfig
	fn       windowFn
	contents contentsCodec
	timers   *runtime.TimerService
	buf      []TimeWindow
	// key and m are the current key and its windows while handling an
	// element or timer (m nil until read).
	key  any
	m    map[TimeWindow]*winContents
	tctx TriggerContext
	// Dropped counts late records dropped (not sent to a side output).
	Dropped int64
}

func (o *windowOp) Open(ctx *runtime.Context) error {
	if err := o.keyed.Open(ctx); err != nil {
		return err
	}
	if err := o.scope.register(windowStateName, o.contents.typeName(), o.contents.c, o.contents.err); err != nil {
		return err
	}
	o.timers = runtime.NewTimerService(ctx, o.state, o.onEventTime, o.onProcessingTime)
	return o.restoreTimers(o.timers, windowNsCodec)
}

// SnapshotState writes every key's windows and their timers.
func (o *windowOp) SnapshotState(_ int64, snap *runtime.OperatorSnapshot) error {
	return o.snapshotTimers(snap, o.timers, windowNsCodec)
}

func (o *windowOp) windows(create bool) map[TimeWindow]*winContents {
	if o.m != nil {
		return o.m
	}
	s, ok := o.state.GetForUpdate(windowStateName) // changed in place
	if !ok {
		if !create {
			return nil
		}
		s = map[TimeWindow]*winContents{}
		o.state.Put(windowStateName, s)
	}
	o.m = s.(map[TimeWindow]*winContents)
	return o.m
}

// contentsOf is window w of the current key, created when missing and
// create is set (else nil).
func (o *windowOp) contentsOf(w TimeWindow, create bool) *winContents {
	m := o.windows(create)
	if m == nil {
		return nil
	}
	c := m[w]
	if c == nil && create {
		c = &winContents{}
		m[w] = c
	}
	return c
}

// done ends the handling of the current key: a key without windows loses
// its state entry.
func (o *windowOp) done() {
	if o.m != nil && len(o.m) == 0 {
		o.state.Delete(windowStateName)
	}
	o.m = nil
}

// triggerCtx points the operator's one TriggerContext at window w.
func (o *windowOp) triggerCtx(w TimeWindow, c *winContents) *TriggerContext {
	o.tctx = TriggerContext{op: o, w: w, c: c}
	return &o.tctx
}

// cleanupTime is when w's state goes: its end plus the allowed lateness in
// event time, its end in processing time.
func (o *windowOp) cleanupTime(w TimeWindow) int64 {
	t := w.MaxTimestamp()
	if o.cfg.assigner.eventTime {
		if t > math.MaxInt64-o.cfg.lateness {
			return math.MaxInt64
		}
		t += o.cfg.lateness
	}
	return t
}

func (o *windowOp) isWindowLate(w TimeWindow) bool {
	return o.cfg.assigner.eventTime && o.cleanupTime(w) <= o.timers.CurrentWatermark()
}

func (o *windowOp) registerCleanupTimer(w TimeWindow) {
	t := o.cleanupTime(w)
	if t == math.MaxInt64 {
		return // the global window (or end of time) is never cleaned up
	}
	if o.cfg.assigner.eventTime {
		o.timers.RegisterEventTimeTimer(o.key, w, t)
	} else {
		o.timers.RegisterProcessingTimeTimer(o.key, w, t)
	}
}

func (o *windowOp) deleteCleanupTimer(w TimeWindow) {
	t := o.cleanupTime(w)
	if t == math.MaxInt64 {
		return
	}
	if o.cfg.assigner.eventTime {
		o.timers.DeleteEventTimeTimer(o.key, w, t)
	} else {
		o.timers.DeleteProcessingTimeTimer(o.key, w, t)
	}
}

func (o *windowOp) ProcessElement(input int, r runtime.Record) error {
	o.key = o.cfg.keyOf[input](r.Value)
	o.state.SetCurrentKey(o.key)
	o.m = nil
	defer o.done()
	var ts int64
	switch {
	case o.cfg.assigner.eventTime:
		if !r.HasTimestamp {
			return fmt.Errorf("record %v has no event timestamp: use AssignTimestampsAndWatermarks before an event-time window", r.Value)
		}
		ts = r.Timestamp
	case o.cfg.assigner.kind == globalWindows:
		ts = r.Timestamp
	default:
		ts = o.Ctx.ProcessingTime()
	}
	o.buf = o.cfg.assigner.windows(ts, o.buf)
	skipped := true
	for _, w := range o.buf {
		if o.cfg.assigner.merging() {
			var late bool
			if w, late = o.mergeWindow(w); late {
				continue
			}
		} else if o.isWindowLate(w) {
			continue
		}
		skipped = false
		c := o.contentsOf(w, true)
		if o.cfg.evictor != nil {
			c.elems = append(c.elems, TimestampedValue{Value: r.Value, Timestamp: r.Timestamp, HasTimestamp: r.HasTimestamp})
		} else {
			c.acc = o.fn.add(c.acc, input, r.Value)
		}
		res := o.cfg.trigger.OnElement(r.Value, r.Timestamp, w, o.triggerCtx(w, c))
		if err := o.apply(w, c, res); err != nil {
			return err
		}
		o.registerCleanupTimer(w)
	}
	if skipped && o.cfg.assigner.eventTime && r.Timestamp <= o.timers.CurrentWatermark()-o.cfg.lateness {
		if o.cfg.lateTag != "" {
			o.Ctx.SideOutput(o.cfg.lateTag).Collect(r)
		} else {
			o.Dropped++
		}
	}
	return nil
}

// mergeWindow adds the session window w of a new element to the current
// key's windows, merging those it intersects into their cover, and returns
// the window the element belongs to; late when that window is past its
// allowed lateness (then nothing changed).
func (o *windowOp) mergeWindow(w TimeWindow) (TimeWindow, bool) {
	m := o.windows(true)
	cover := w
	var group []TimeWindow
	for x := range m {
		if x.intersects(w) {
			group = append(group, x)
			cover = cover.cover(x)
		}
	}
	if o.isWindowLate(cover) {
		return cover, true
	}
	if len(group) == 0 || len(group) == 1 && group[0] == cover {
		return cover, false
	}
	sort.Slice(group, func(i, j int) bool { return group[i].Start < group[j].Start })
	merged := &winContents{}
	mctx := &TriggerContext{op: o, w: cover, c: merged}
	for _, x := range group {
		c := m[x]
		delete(m, x)
		mctx.merged = append(mctx.merged, c)
		switch {
		case c.acc == nil:
		case merged.acc == nil:
			merged.acc = c.acc
		default:
			merged.acc = o.fn.merge(merged.acc, c.acc)
		}
		merged.elems = append(merged.elems, c.elems...)
		for k, v := range c.values {
			if merged.values == nil {
				merged.values = map[string][]byte{}
			}
			merged.values[k] = v
		}
	}
	m[cover] = merged
	o.cfg.trigger.OnMerge(cover, mctx)
	for i, x := range group {
		if x == cover {
			continue
		}
		o.cfg.trigger.Clear(x, o.triggerCtx(x, mctx.merged[i]))
		o.deleteCleanupTimer(x)
	}
	return cover, false
}

// apply carries out a trigger's result for window w.
func (o *windowOp) apply(w TimeWindow, c *winContents, res TriggerResult) error {
	if res.fire() {
		if err := o.emit(w, c); err != nil {
			return err
		}
	}
	if res.purge() {
		c.acc, c.elems = nil, nil
	}
	return nil
}

// emit evaluates window w (nothing when it is empty).
func (o *windowOp) emit(w TimeWindow, c *winContents) error {
	out := &windowOut{op: o, ts: w.MaxTimestamp()}
	if o.cfg.evictor == nil {
		if c.acc == nil {
			return nil
		}
		return o.fn.emit(o.key, w, c.acc, out)
	}
	ectx := EvictorContext{op: o}
	c.elems = o.cfg.evictor.EvictBefore(c.elems, w, ectx)
	if len(c.elems) == 0 {
		return nil
	}
	var acc any
	for _, e := range c.elems {
		acc = o.fn.add(acc, 0, e.Value)
	}
	if err := o.fn.emit(o.key, w, acc, out); err != nil {
		return err
	}
	c.elems = o.cfg.evictor.EvictAfter(c.elems, w, ectx)
	return nil
}

// clearAll drops window w for good.
func (o *windowOp) clearAll(w TimeWindow, c *winContents) error {
	if o.fn.clear != nil {
		if err := o.fn.clear(o.key, w, o); err != nil {
			return err
		}
	}
	o.cfg.trigger.Clear(w, o.triggerCtx(w, c))
	delete(o.m, w)
	return nil
}

func (o *windowOp) onEventTime(t runtime.Timer) error { return o.onTimer(t, true) }

func (o *windowOp) onProcessingTime(t runtime.Timer) error { return o.onTimer(t, false) }

func (o *windowOp) onTimer(t runtime.Timer, event bool) error {
	o.key = t.Key
	o.m = nil
	defer o.done()
	w := t.Namespace.(TimeWindow)
	c := o.contentsOf(w, false)
	if c == nil {
		return nil // merged away or cleared
	}
	tctx := o.triggerCtx(w, c)
	var res TriggerResult
	if event {
		res = o.cfg.trigger.OnEventTime(t.Timestamp, w, tctx)
	} else {
		res = o.cfg.trigger.OnProcessingTime(t.Timestamp, w, tctx)
	}
	if err := o.apply(w, c, res); err != nil {
		return err
	}
	if event == o.cfg.assigner.eventTime && t.Timestamp == o.cleanupTime(w) {
		return o.clearAll(w, c)
	}
	return nil
}

func (o *windowOp) ProcessWatermark(wm int64) error {
	if err := o.timers.AdvanceWatermark(wm); err != nil {
		return err
	}
	o.Ctx.Output.EmitWatermark(wm)
	return nil
}

// contentsCodec serializes a key's windows (map[TimeWindow]*winContents),
// or tells why they cannot be.
type contentsCodec struct {
	c   runtime.Codec
	err error
}

func (c contentsCodec) typeName() string {
	if c.c == nil {
		return "windows"
	}
	return c.c.TypeName()
}

// stateConv makes the codec of a key's windows.
type stateConv interface {
	contents(kind string) contentsCodec
}

// windowState converts accumulators to their serializable form S; E is the
// element type kept with an evictor.
type windowState[S, E any] struct {
	to   func(any) S
	from func(S) any
}

// winEntry is one window in its serializable form.
type winEntry[S, E any] struct {
	Start, End int64
	HasAcc     bool
	Acc        S
	Elems      []elemEntry[E]
	Trigger    map[string]int64
	Values     map[string][]byte
}

type elemEntry[E any] struct {
	V     E
	Ts    int64
	HasTs bool
}

func (s windowState[S, E]) contents(kind string) contentsCodec {
	c, err := newConvCodec[[]winEntry[S, E]]("windows2<"+kind+","+typeOf[S]()+","+typeOf[E]()+">",
		func(v any) []winEntry[S, E] {
			m := v.(map[TimeWindow]*winContents)
			out := make([]winEntry[S, E], 0, len(m))
			for w, c := range m {
				e := winEntry[S, E]{Start: w.Start, End: w.End, Trigger: c.trig, Values: c.values}
				if c.acc != nil {
					e.HasAcc, e.Acc = true, s.to(c.acc)
				}
				for _, x := range c.elems {
					e.Elems = append(e.Elems, elemEntry[E]{V: as[E](x.Value), Ts: x.Timestamp, HasTs: x.HasTimestamp})
				}
				out = append(out, e)
			}
			sort.Slice(out, func(i, j int) bool {
				return out[i].Start < out[j].Start || out[i].Start == out[j].Start && out[i].End < out[j].End
			})
			return out
		},
		func(es []winEntry[S, E]) any {
			m := make(map[TimeWindow]*winContents, len(es))
			for _, e := range es {
				c := &winContents{trig: e.Trigger, values: e.Values}
				if e.HasAcc {
					c.acc = s.from(e.Acc)
				}
				for _, x := range e.Elems {
					c.elems = append(c.elems, TimestampedValue{Value: x.V, Timestamp: x.Ts, HasTimestamp: x.HasTs})
				}
				m[TimeWindow{Start: e.Start, End: e.End}] = c
			}
			return m
		})
	return contentsCodec{c: c, err: err}
}
