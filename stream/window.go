package stream

import (
	"fmt"
	"math"
	"time"

	"github.com/gofl/gofl/stream/codec"

	"github.com/gofl/gofl/stream/runtime"
)

// WatermarkStrategy assigns event timestamps (milliseconds) and generates
// watermarks.
type WatermarkStrategy[T any] struct {
	bound    time.Duration
	ts       func(T) int64
	interval time.Duration
}

// BoundedOutOfOrderness expects records at most d out of order: the
// watermark is the largest timestamp seen minus d minus 1 ms, as Flink's
// BoundedOutOfOrdernessWatermarks. ts returns a record's event time in
// milliseconds.
//
// Unlike Flink (periodic, every 200 ms by default) the watermark is emitted
// whenever it advances, which makes event-time results deterministic; use
// WithPeriodicEmission for Flink's behaviour.
func BoundedOutOfOrderness[T any](d time.Duration, ts func(T) int64) WatermarkStrategy[T] {
	return WatermarkStrategy[T]{bound: d, ts: ts}
}

// MonotonousTimestamps expects ascending timestamps (no out-of-orderness).
func MonotonousTimestamps[T any](ts func(T) int64) WatermarkStrategy[T] {
	return BoundedOutOfOrderness(0, ts)
}

// WithPeriodicEmission emits the watermark every interval of processing
// time instead of whenever it advances.
func (s WatermarkStrategy[T]) WithPeriodicEmission(interval time.Duration) WatermarkStrategy[T] {
	s.interval = interval
	return s
}

type watermarkOp[T any] struct {
	runtime.Base
	s       WatermarkStrategy[T]
	batch   bool
	maxTs   int64
	current int64
}

func (o *watermarkOp[T]) Open(ctx *runtime.Context) error {
	o.Ctx = ctx
	o.maxTs = runtime.MinWatermark + o.s.bound.Milliseconds() + 1
	o.current = runtime.MinWatermark
	if o.s.interval > 0 && !o.batch {
		o.schedule()
	}
	return nil
}

func (o *watermarkOp[T]) schedule() {
	o.Ctx.RegisterProcessingTimer(o.Ctx.ProcessingTime()+o.s.interval.Milliseconds(), func(int64) error {
		o.emit()
		o.schedule()
		return nil
	})
}

func (o *watermarkOp[T]) emit() {
	if wm := o.maxTs - o.s.bound.Milliseconds() - 1; wm > o.current {
		o.current = wm
		o.Ctx.Output.EmitWatermark(wm)
	}
}

func (o *watermarkOp[T]) ProcessElement(_ int, r runtime.Record) error {
	ts := o.s.ts(as[T](r.Value))
	r.Timestamp, r.HasTimestamp = ts, true
	o.Ctx.Output.Collect(r)
	if ts > o.maxTs {
		o.maxTs = ts
	}
	if o.s.interval <= 0 && !o.batch {
		o.emit()
	}
	return nil
}

// ProcessWatermark drops upstream watermarks except the final one: this
// operator generates the stream's watermarks.
func (o *watermarkOp[T]) ProcessWatermark(wm int64) error {
	if wm == runtime.MaxWatermark {
		o.current = wm
		o.Ctx.Output.EmitWatermark(wm)
	}
	return nil
}

// TimeWindow is the interval [Start, End) in milliseconds. Global and count
// windows use GlobalWindow, the window of all time.
type TimeWindow struct {
	Start, End int64
}

// GlobalWindow is the one window of GlobalWindows and count windows
// (Flink's GlobalWindow): all of time.
var GlobalWindow = TimeWindow{Start: math.MinInt64, End: math.MaxInt64}

// MaxTimestamp is the last millisecond of the window; window results carry
// it as their timestamp. The GlobalWindow's is math.MaxInt64, as in Flink.
func (w TimeWindow) MaxTimestamp() int64 {
	if w.End == math.MaxInt64 {
		return math.MaxInt64
	}
	return w.End - 1
}

func (w TimeWindow) String() string {
	if w == GlobalWindow {
		return "GlobalWindow"
	}
	return fmt.Sprintf("[%d, %d)", w.Start, w.End)
}

// intersects is Flink's TimeWindow.intersects: touching windows intersect.
func (w TimeWindow) intersects(o TimeWindow) bool { return w.Start <= o.End && w.End >= o.Start }

func (w TimeWindow) cover(o TimeWindow) TimeWindow {
	return TimeWindow{Start: min(w.Start, o.Start), End: max(w.End, o.End)}
}

type assignerKind int

const (
	slidingWindows assignerKind = iota // tumbling is sliding with slide == size
	sessionWindows
	globalWindows
)

// WindowAssigner puts records into windows (Flink's WindowAssigner): time
// windows (tumbling, sliding), session windows, which merge, or the
// GlobalWindow. Each has a default trigger (see WindowedStream.Trigger).
type WindowAssigner struct {
	kind      assignerKind
	eventTime bool
	size      int64
	slide     int64
	offset    int64
	gap       int64
}

// TumblingEventTime windows of the given size, aligned to the epoch.
func TumblingEventTime(size time.Duration) WindowAssigner {
	return WindowAssigner{eventTime: true, size: size.Milliseconds(), slide: size.Milliseconds()}
}

// SlidingEventTime windows of the given size starting every slide.
func SlidingEventTime(size, slide time.Duration) WindowAssigner {
	return WindowAssigner{eventTime: true, size: size.Milliseconds(), slide: slide.Milliseconds()}
}

// TumblingProcessingTime windows by the clock when the record arrives.
func TumblingProcessingTime(size time.Duration) WindowAssigner {
	return WindowAssigner{size: size.Milliseconds(), slide: size.Milliseconds()}
}

// SlidingProcessingTime windows by the clock when the record arrives.
func SlidingProcessingTime(size, slide time.Duration) WindowAssigner {
	return WindowAssigner{size: size.Milliseconds(), slide: slide.Milliseconds()}
}

// EventTimeSessionWindows puts each record into the window [ts, ts+gap) and
// merges intersecting windows of a key (Flink's
// EventTimeSessionWindows.withGap): a session ends after gap without
// records.
func EventTimeSessionWindows(gap time.Duration) WindowAssigner {
	return WindowAssigner{kind: sessionWindows, eventTime: true, gap: gap.Milliseconds()}
}

// ProcessingTimeSessionWindows are session windows by the clock when the
// record arrives.
func ProcessingTimeSessionWindows(gap time.Duration) WindowAssigner {
	return WindowAssigner{kind: sessionWindows, gap: gap.Milliseconds()}
}

// GlobalWindows puts every record of a key into the GlobalWindow. Its
// default trigger never fires: set one with WindowedStream.Trigger.
func GlobalWindows() WindowAssigner { return WindowAssigner{kind: globalWindows} }

// WithOffset shifts window starts by offset, as Flink's window offsets.
func (a WindowAssigner) WithOffset(offset time.Duration) WindowAssigner {
	a.offset = offset.Milliseconds()
	return a
}

// IsEventTime tells event-time from processing-time windows (global
// windows are neither; false).
func (a WindowAssigner) IsEventTime() bool { return a.eventTime }

func (a WindowAssigner) merging() bool { return a.kind == sessionWindows }

func (a WindowAssigner) valid() error {
	switch a.kind {
	case sessionWindows:
		if a.gap <= 0 {
			return fmt.Errorf("session gap %dms must be positive", a.gap)
		}
	case slidingWindows:
		if a.size <= 0 || a.slide <= 0 {
			return fmt.Errorf("window size %dms and slide %dms must be positive", a.size, a.slide)
		}
	}
	return nil
}

func (a WindowAssigner) params() map[string]any {
	switch a.kind {
	case sessionWindows:
		return map[string]any{"eventTime": a.eventTime, "session_gap_ms": a.gap}
	case globalWindows:
		return map[string]any{"global": true}
	}
	return map[string]any{"eventTime": a.eventTime, "size_ms": a.size, "slide_ms": a.slide, "offset_ms": a.offset}
}

// defaultTrigger is the assigner's trigger when none is set, as in Flink.
func (a WindowAssigner) defaultTrigger() Trigger {
	switch {
	case a.kind == globalWindows:
		return neverTrigger{}
	case a.eventTime:
		return EventTimeTrigger()
	}
	return ProcessingTimeTrigger()
}

// windows returns the windows containing ts, latest first.
func (a WindowAssigner) windows(ts int64, buf []TimeWindow) []TimeWindow {
	buf = buf[:0]
	switch a.kind {
	case globalWindows:
		return append(buf, GlobalWindow)
	case sessionWindows:
		return append(buf, TimeWindow{Start: ts, End: ts + a.gap})
	}
	last := ts - (((ts-a.offset)%a.slide)+a.slide)%a.slide
	for start := last; start > ts-a.size; start -= a.slide {
		buf = append(buf, TimeWindow{Start: start, End: start + a.size})
	}
	return buf
}

// WindowedStream is a keyed stream cut into windows; Reduce, WindowAggregate
// and WindowProcess (and their variants that see the window) compute one
// result per key and window each time the window's trigger fires.
//
// With the default trigger, event-time windows fire when the watermark
// passes their MaxTimestamp; processing-time windows when the clock does
// (and at the end of input). A record whose windows are all past their
// allowed lateness (behind the watermark) is dropped, or sent to the
// SideOutputLateData tag.
type WindowedStream[T any, K comparable] struct {
	ks       KeyedStream[T, K]
	a        WindowAssigner
	trigger  Trigger
	evictor  Evictor
	lateness int64
	lateTag  string
}

// Window cuts a keyed stream into windows.
func Window[T any, K comparable](ks KeyedStream[T, K], a WindowAssigner) WindowedStream[T, K] {
	if err := a.valid(); err != nil {
		ks.env.fail(err)
	}
	return WindowedStream[T, K]{ks: ks, a: a}
}

// CountWindow cuts a keyed stream into tumbling windows of n records per
// key (Flink's countWindow(n): GlobalWindows with a purging CountTrigger).
func (k KeyedStream[T, K]) CountWindow(n int64) WindowedStream[T, K] {
	return Window(k, GlobalWindows()).Trigger(PurgingTrigger(CountTrigger(n)))
}

// CountWindowSlide cuts a keyed stream into sliding windows of the last n
// records per key, every s records (Flink's countWindow(n, s): GlobalWindows
// with a CountEvictor of n and a CountTrigger of s).
func (k KeyedStream[T, K]) CountWindowSlide(n, s int64) WindowedStream[T, K] {
	return Window(k, GlobalWindows()).Evictor(CountEvictor(n)).Trigger(CountTrigger(s))
}

// Trigger replaces the assigner's default trigger (Flink's trigger). With
// merging (session) windows the trigger must CanMerge.
func (w WindowedStream[T, K]) Trigger(t Trigger) WindowedStream[T, K] {
	if w.a.merging() && !t.CanMerge() {
		w.ks.env.fail(fmt.Errorf("trigger %T cannot be used with merging session windows", t))
	}
	w.trigger = t
	return w
}

// Evictor removes elements from a window before or after the window
// function sees them (Flink's evictor). The window then keeps every
// element, even with Reduce or WindowAggregate.
func (w WindowedStream[T, K]) Evictor(e Evictor) WindowedStream[T, K] {
	w.evictor = e
	return w
}

// AllowedLateness keeps event-time windows for d after the watermark passes
// their end: a late record still in that time is added and fires the
// window again (Flink's allowedLateness). Default 0.
func (w WindowedStream[T, K]) AllowedLateness(d time.Duration) WindowedStream[T, K] {
	if d < 0 {
		w.ks.env.fail(fmt.Errorf("allowed lateness %v must not be negative", d))
	}
	w.lateness = d.Milliseconds()
	return w
}

// SideOutputLateData sends records dropped as late to tag instead (Flink's
// sideOutputLateData); read them with GetSideOutput on the window's result.
func (w WindowedStream[T, K]) SideOutputLateData(tag OutputTag[T]) WindowedStream[T, K] {
	w.lateTag = tag.id
	return w
}

// windowNode builds the window operator of w with window function f.
func windowNode[T any, K comparable, O any](w WindowedStream[T, K], kind, name string, f windowFn) DataStream[O] {
	key := w.ks.key
	keyOf := func(v any) any { return key(as[T](v)) }
	cfg := w.config()
	cfg.keyOf = [2]func(any) any{keyOf}
	if err := cfg.check(f); err != nil {
		w.ks.env.fail(fmt.Errorf("%s: %w", name, err))
	}
	keys := keyCodecOf[K]()
	contents := f.state.contents(f.kind)
	out := oneInput[T, O](w.ks.DataStream, kind, name, func() runtime.Operator {
		return &windowOp{keyed: keyed{keys: keys}, contents: contents, cfg: cfg, fn: f}
	})
	for k, v := range w.params() {
		out.n.params[k] = v
	}
	return out
}

func (w WindowedStream[T, K]) config() windowConfig {
	t := w.trigger
	if t == nil {
		t = w.a.defaultTrigger()
	}
	return windowConfig{assigner: w.a, trigger: t, evictor: w.evictor, lateness: w.lateness, lateTag: w.lateTag}
}

func (w WindowedStream[T, K]) params() map[string]any {
	p := w.a.params()
	if w.trigger != nil {
		p["trigger"] = fmt.Sprintf("%T", w.trigger)
	}
	if w.evictor != nil {
		p["evictor"] = fmt.Sprintf("%T", w.evictor)
	}
	if w.lateness > 0 {
		p["allowedLateness_ms"] = w.lateness
	}
	if w.lateTag != "" {
		p["lateDataTag"] = w.lateTag
	}
	return p
}

// Reduce reduces each window incrementally.
func (w WindowedStream[T, K]) Reduce(fn func(a, b T) T) DataStream[T] {
	return windowNode[T, K, T](w, "window-reduce", "Window(Reduce)", reduceFn[T](fn, func(_ any, _ TimeWindow, v T, out *windowOut) error {
		out.collect(v)
		return nil
	}))
}

// WindowFunction receives a window's result with its key and window
// (Flink's WindowFunction for reduce(reducer, windowFunction) and
// aggregate(agg, windowFunction), whose iterable holds the one result).
type WindowFunction[IN any, K comparable, OUT any] func(key K, w TimeWindow, in IN, out Collector[OUT]) error

// ReduceWindow reduces each window incrementally and hands the result with
// its key and window to fn (Flink's reduce(reducer, windowFunction)).
func ReduceWindow[T any, K comparable, O any](w WindowedStream[T, K], reduce func(a, b T) T, fn WindowFunction[T, K, O]) DataStream[O] {
	return windowNode[T, K, O](w, "window-reduce", "Window(Reduce)", reduceFn[T](reduce, func(key any, win TimeWindow, v T, out *windowOut) error {
		return fn(as[K](key), win, v, collectorOf[O](out))
	}))
}

func reduceFn[T any](fn func(a, b T) T, emit func(key any, w TimeWindow, v T, out *windowOut) error) windowFn {
	return windowFn{
		kind: "Reduce",
		add: func(acc any, _ int, v any) any {
			if acc == nil {
				return v
			}
			return fn(acc.(T), as[T](v))
		},
		merge: func(a, b any) any { return fn(a.(T), b.(T)) },
		emit:  func(key any, w TimeWindow, acc any, out *windowOut) error { return emit(key, w, acc.(T), out) },
		state: windowState[T, T]{to: func(acc any) T { return as[T](acc) }, from: func(v T) any { return v }},
	}
}

type accBox[ACC any] struct{ acc ACC }

// WindowAggregate aggregates each window incrementally. With session
// windows agg must implement MergingAggregateFunction.
func WindowAggregate[T any, K comparable, ACC, OUT any](w WindowedStream[T, K], agg AggregateFunction[T, ACC, OUT]) DataStream[OUT] {
	return windowNode[T, K, OUT](w, "window-aggregate", "Window(Aggregate)", aggregateFn(agg, func(_ any, _ TimeWindow, v OUT, out *windowOut) error {
		out.collect(v)
		return nil
	}))
}

// AggregateWindow aggregates each window incrementally and hands the
// result with its key and window to fn (Flink's aggregate(agg,
// windowFunction)).
func AggregateWindow[T any, K comparable, ACC, V, O any](w WindowedStream[T, K], agg AggregateFunction[T, ACC, V], fn WindowFunction[V, K, O]) DataStream[O] {
	return windowNode[T, K, O](w, "window-aggregate", "Window(Aggregate)", aggregateFn(agg, func(key any, win TimeWindow, v V, out *windowOut) error {
		return fn(as[K](key), win, v, collectorOf[O](out))
	}))
}

// MergingAggregateFunction is an AggregateFunction that can merge two
// accumulators (Flink's AggregateFunction.merge), which session windows
// need.
type MergingAggregateFunction[T, ACC, OUT any] interface {
	AggregateFunction[T, ACC, OUT]
	Merge(a, b ACC) ACC
}

func aggregateFn[T, ACC, OUT any](agg AggregateFunction[T, ACC, OUT], emit func(key any, w TimeWindow, v OUT, out *windowOut) error) windowFn {
	f := windowFn{
		kind: "Aggregate",
		add: func(acc any, _ int, v any) any {
			b, _ := acc.(*accBox[ACC])
			if b == nil {
				b = &accBox[ACC]{acc: agg.CreateAccumulator()}
			}
			b.acc = agg.Add(as[T](v), b.acc)
			return b
		},
		emit: func(key any, w TimeWindow, acc any, out *windowOut) error {
			return emit(key, w, agg.GetResult(acc.(*accBox[ACC]).acc), out)
		},
		state: windowState[ACC, T]{to: func(acc any) ACC { return acc.(*accBox[ACC]).acc }, from: func(v ACC) any { return &accBox[ACC]{acc: v} }},
	}
	if m, ok := agg.(MergingAggregateFunction[T, ACC, OUT]); ok {
		if a, isAgg := agg.(Aggregator[T, ACC, OUT]); !isAgg || a.MergeFn != nil {
			f.merge = func(a, b any) any { return &accBox[ACC]{acc: m.Merge(a.(*accBox[ACC]).acc, b.(*accBox[ACC]).acc)} }
		}
	}
	return f
}

// WindowProcess hands all elements of a window (in arrival order) to fn.
func WindowProcess[T any, K comparable, O any](w WindowedStream[T, K], fn func(key K, win TimeWindow, elems []T, out Collector[O]) error) DataStream[O] {
	return ProcessWindow(w, ProcessWindowFunction[T, K, O]{
		Process: func(ctx *WindowContext[K], elems []T, out Collector[O]) error {
			return fn(ctx.key, ctx.win, elems, out)
		},
	})
}

// ProcessWindowFunction handles all elements of a window with a context:
// the key, the window, time, per-window and keyed state, side outputs
// (Flink's ProcessWindowFunction). Clear, optional, runs when the window
// is purged for good (after its allowed lateness).
type ProcessWindowFunction[T any, K comparable, O any] struct {
	Process func(ctx *WindowContext[K], elems []T, out Collector[O]) error
	Clear   func(ctx *WindowContext[K]) error
}

// ProcessWindow runs fn on every window that fires.
func ProcessWindow[T any, K comparable, O any](w WindowedStream[T, K], fn ProcessWindowFunction[T, K, O]) DataStream[O] {
	f := windowFn{
		kind: "Process",
		add: func(acc any, _ int, v any) any {
			l, _ := acc.(*[]T)
			if l == nil {
				l = new([]T)
			}
			*l = append(*l, as[T](v))
			return l
		},
		merge: func(a, b any) any {
			l := a.(*[]T)
			*l = append(*l, *b.(*[]T)...)
			return l
		},
		state: windowState[[]T, T]{to: func(acc any) []T { return *acc.(*[]T) }, from: func(v []T) any { return &v }},
	}
	f.emit = func(key any, win TimeWindow, acc any, out *windowOut) error {
		ctx := &WindowContext[K]{key: as[K](key), win: win, op: out.op}
		return fn.Process(ctx, *acc.(*[]T), collectorOf[O](out))
	}
	if fn.Clear != nil {
		f.clear = func(key any, win TimeWindow, op *windowOp) error {
			return fn.Clear(&WindowContext[K]{key: as[K](key), win: win, op: op})
		}
	}
	return windowNode[T, K, O](w, "window-process", "Window(Process)", f)
}

// WindowContext is what a ProcessWindowFunction sees of the window that
// fires (Flink's ProcessWindowFunction.Context). It is a StateContext: the
// keyed states read and written with it are the key's (Flink's
// globalState); WindowValueState is per key and window.
type WindowContext[K comparable] struct {
	key K
	win TimeWindow
	op  *windowOp
}

func (c *WindowContext[K]) keyedState() *stateScope { return &c.op.scope }

func (c *WindowContext[K]) windowValues() map[string][]byte {
	wc := c.op.contentsOf(c.win, true)
	if wc.values == nil {
		wc.values = map[string][]byte{}
	}
	return wc.values
}

// CurrentKey is the window's key.
func (c *WindowContext[K]) CurrentKey() K { return c.key }

// Window is the window that fires.
func (c *WindowContext[K]) Window() TimeWindow { return c.win }

// CurrentWatermark is the operator's event time.
func (c *WindowContext[K]) CurrentWatermark() int64 { return c.op.timers.CurrentWatermark() }

// CurrentProcessingTime is the clock in milliseconds.
func (c *WindowContext[K]) CurrentProcessingTime() int64 { return c.op.Ctx.ProcessingTime() }

// OutputWindow emits v to side output tag from a ProcessWindowFunction, with
// the window's MaxTimestamp.
func OutputWindow[K comparable, T any](ctx *WindowContext[K], tag OutputTag[T], v T) {
	emitSide(ctx.op.Ctx, tag.id, v, ctx.win.MaxTimestamp(), true)
}

// WindowValueState is a value per key and window (Flink's
// ProcessWindowFunction.Context.windowState with a ValueStateDescriptor):
// it lives until the window is purged for good, and is snapshotted with the
// window's contents.
type WindowValueState[V any] struct {
	name string
	c    codec.Codec[V]
	err  error
}

// NewWindowValueState declares the per-window value state name.
func NewWindowValueState[V any](name string) WindowValueState[V] {
	c, err := codec.For[V]()
	return WindowValueState[V]{name: name, c: c, err: err}
}

// Value is the window's value, if set.
func (s WindowValueState[V]) Value(ctx interface{ windowValues() map[string][]byte }) (V, bool, error) {
	var zero V
	if s.err != nil {
		return zero, false, fmt.Errorf("window state %q: %w: %w", s.name, ErrNoStateCodec, s.err)
	}
	b, ok := ctx.windowValues()[s.name]
	if !ok {
		return zero, false, nil
	}
	v, _, err := s.c.Decode(b)
	if err != nil {
		return zero, false, fmt.Errorf("window state %q: %w", s.name, err)
	}
	return v, true, nil
}

// Update sets the window's value.
func (s WindowValueState[V]) Update(ctx interface{ windowValues() map[string][]byte }, v V) error {
	if s.err != nil {
		return fmt.Errorf("window state %q: %w: %w", s.name, ErrNoStateCodec, s.err)
	}
	ctx.windowValues()[s.name] = s.c.Append(nil, v)
	return nil
}

// Clear removes the window's value.
func (s WindowValueState[V]) Clear(ctx interface{ windowValues() map[string][]byte }) {
	delete(ctx.windowValues(), s.name)
}

type joinBuffer[A, B any] struct {
	as []A
	bs []B
}

// joinState is the serializable form of a joinBuffer.
type joinState[A, B any] struct {
	As []A
	Bs []B
}

// Join joins two keyed streams on equal keys within the same window: for
// every window and key, fn is called for each pair of an A and a B in it
// (Flink's windowed join, an inner join).
func Join[A, B any, K comparable, O any](a KeyedStream[A, K], b KeyedStream[B, K], w WindowAssigner, fn func(A, B) O) DataStream[O] {
	env := a.env
	if err := w.valid(); err != nil {
		env.fail(err)
	}
	if b.env != env {
		env.fail(fmt.Errorf("Join of streams from different environments"))
	}
	ka, kb := a.key, b.key
	keyOf := [2]func(any) any{
		func(v any) any { return ka(as[A](v)) },
		func(v any) any { return kb(as[B](v)) },
	}
	add := func(acc any, input int, v any) any {
		buf, _ := acc.(*joinBuffer[A, B])
		if buf == nil {
			buf = &joinBuffer[A, B]{}
		}
		if input == 0 {
			buf.as = append(buf.as, as[A](v))
		} else {
			buf.bs = append(buf.bs, as[B](v))
		}
		return buf
	}
	f := windowFn{
		kind: "Join",
		add:  add,
		merge: func(x, y any) any {
			bx, by := x.(*joinBuffer[A, B]), y.(*joinBuffer[A, B])
			bx.as, bx.bs = append(bx.as, by.as...), append(bx.bs, by.bs...)
			return bx
		},
		emit: func(_ any, _ TimeWindow, acc any, out *windowOut) error {
			buf := acc.(*joinBuffer[A, B])
			for _, x := range buf.as {
				for _, y := range buf.bs {
					out.collect(fn(x, y))
				}
			}
			return nil
		},
		state: windowState[joinState[A, B], struct{}]{
			to: func(acc any) joinState[A, B] {
				b := acc.(*joinBuffer[A, B])
				return joinState[A, B]{As: b.as, Bs: b.bs}
			},
			from: func(v joinState[A, B]) any { return &joinBuffer[A, B]{as: v.As, bs: v.Bs} },
		},
	}
	contents := f.state.contents(f.kind)
	cfg := windowConfig{assigner: w, trigger: w.defaultTrigger(), keyOf: keyOf}
	keys := keyCodecOf[K]()
	n := env.newNode("window-join", "Window(Join)")
	n.newOperator = func() runtime.Operator {
		return &windowOp{keyed: keyed{keys: keys}, contents: contents, cfg: cfg, fn: f}
	}
	n.inputs = []streamEdge{edgeOf(a.DataStream, 0), edgeOf(b.DataStream, 1)}
	for k, v := range w.params() {
		n.params[k] = v
	}
	setCodec[O](n)
	return DataStream[O]{env: env, n: n}
}
