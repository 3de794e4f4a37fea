package stream

import (
	"fmt"
	"sort"
	"time"

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

// TimeWindow is the interval [Start, End) in milliseconds.
type TimeWindow struct {
	Start, End int64
}

// MaxTimestamp is the last millisecond of the window; window results carry
// it as their timestamp.
func (w TimeWindow) MaxTimestamp() int64 { return w.End - 1 }

func (w TimeWindow) String() string { return fmt.Sprintf("[%d, %d)", w.Start, w.End) }

// WindowAssigner puts records into time windows.
type WindowAssigner struct {
	eventTime bool
	size      int64
	slide     int64
	offset    int64
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

// WithOffset shifts window starts by offset, as Flink's window offsets.
func (a WindowAssigner) WithOffset(offset time.Duration) WindowAssigner {
	a.offset = offset.Milliseconds()
	return a
}

// IsEventTime tells event-time from processing-time windows.
func (a WindowAssigner) IsEventTime() bool { return a.eventTime }

func (a WindowAssigner) valid() error {
	if a.size <= 0 || a.slide <= 0 {
		return fmt.Errorf("window size %dms and slide %dms must be positive", a.size, a.slide)
	}
	return nil
}

func (a WindowAssigner) params() map[string]any {
	return map[string]any{"eventTime": a.eventTime, "size_ms": a.size, "slide_ms": a.slide, "offset_ms": a.offset}
}

// windows returns the windows containing ts, latest first.
func (a WindowAssigner) windows(ts int64, buf []TimeWindow) []TimeWindow {
	buf = buf[:0]
	last := ts - (((ts-a.offset)%a.slide)+a.slide)%a.slide
	for start := last; start > ts-a.size; start -= a.slide {
		buf = append(buf, TimeWindow{Start: start, End: start + a.size})
	}
	return buf
}

// WindowedStream is a keyed stream cut into windows; Reduce, WindowAggregate
// and WindowProcess compute one result per key and window when it fires.
//
// Event-time windows fire when the watermark passes their MaxTimestamp;
// processing-time windows when the clock does (and at the end of input).
// A record whose windows have all fired already (it is behind the
// watermark) is dropped, as Flink does with no allowed lateness.
type WindowedStream[T any, K comparable] struct {
	ks KeyedStream[T, K]
	a  WindowAssigner
}

// Window cuts a keyed stream into windows.
func Window[T any, K comparable](ks KeyedStream[T, K], a WindowAssigner) WindowedStream[T, K] {
	if err := a.valid(); err != nil {
		ks.env.fail(err)
	}
	return WindowedStream[T, K]{ks: ks, a: a}
}

func windowNode[T any, K comparable, O any](w WindowedStream[T, K], kind, name string, contents contentsCodec, add func(acc any, input int, v any) any, emit func(key any, win TimeWindow, acc any, out runtime.Output, ts int64) error) DataStream[O] {
	key := w.ks.key
	keyOf := func(v any) any { return key(as[T](v)) }
	a := w.a
	keys := keyCodecOf[K]()
	out := oneInput[T, O](w.ks.DataStream, kind, name, func() runtime.Operator {
		return &windowOp{keyed: keyed{keys: keys}, contents: contents, assigner: a, keyOf: [2]func(any) any{keyOf}, add: add, emit: emit}
	})
	for k, v := range a.params() {
		out.n.params[k] = v
	}
	return out
}

// Reduce reduces each window incrementally.
func (w WindowedStream[T, K]) Reduce(fn func(a, b T) T) DataStream[T] {
	return windowNode[T, K, T](w, "window-reduce", "Window(Reduce)",
		windowContents("Reduce", func(acc any) T { return as[T](acc) }, func(v T) any { return v }),
		func(acc any, _ int, v any) any {
			if acc == nil {
				return v
			}
			return fn(acc.(T), as[T](v))
		},
		func(_ any, _ TimeWindow, acc any, out runtime.Output, ts int64) error {
			out.Collect(runtime.Record{Value: acc, Timestamp: ts, HasTimestamp: true})
			return nil
		})
}

type accBox[ACC any] struct{ acc ACC }

// WindowAggregate aggregates each window incrementally.
func WindowAggregate[T any, K comparable, ACC, OUT any](w WindowedStream[T, K], agg AggregateFunction[T, ACC, OUT]) DataStream[OUT] {
	return windowNode[T, K, OUT](w, "window-aggregate", "Window(Aggregate)",
		windowContents("Aggregate", func(acc any) ACC { return acc.(*accBox[ACC]).acc }, func(v ACC) any { return &accBox[ACC]{acc: v} }),
		func(acc any, _ int, v any) any {
			b, _ := acc.(*accBox[ACC])
			if b == nil {
				b = &accBox[ACC]{acc: agg.CreateAccumulator()}
			}
			b.acc = agg.Add(as[T](v), b.acc)
			return b
		},
		func(_ any, _ TimeWindow, acc any, out runtime.Output, ts int64) error {
			out.Collect(runtime.Record{Value: agg.GetResult(acc.(*accBox[ACC]).acc), Timestamp: ts, HasTimestamp: true})
			return nil
		})
}

// WindowProcess hands all elements of a window (in arrival order) to fn.
func WindowProcess[T any, K comparable, O any](w WindowedStream[T, K], fn func(key K, win TimeWindow, elems []T, out Collector[O]) error) DataStream[O] {
	return windowNode[T, K, O](w, "window-process", "Window(Process)",
		windowContents("Process", func(acc any) []T { return *acc.(*[]T) }, func(v []T) any { return &v }),
		func(acc any, _ int, v any) any {
			l, _ := acc.(*[]T)
			if l == nil {
				l = new([]T)
			}
			*l = append(*l, as[T](v))
			return l
		},
		func(key any, win TimeWindow, acc any, out runtime.Output, ts int64) error {
			return fn(as[K](key), win, *acc.(*[]T), &collector[O]{out: out, ts: ts, hasTs: true})
		})
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
	emit := func(_ any, _ TimeWindow, acc any, out runtime.Output, ts int64) error {
		buf := acc.(*joinBuffer[A, B])
		for _, x := range buf.as {
			for _, y := range buf.bs {
				out.Collect(runtime.Record{Value: fn(x, y), Timestamp: ts, HasTimestamp: true})
			}
		}
		return nil
	}
	contents := windowContents("Join",
		func(acc any) joinState[A, B] {
			b := acc.(*joinBuffer[A, B])
			return joinState[A, B]{As: b.as, Bs: b.bs}
		},
		func(v joinState[A, B]) any { return &joinBuffer[A, B]{as: v.As, bs: v.Bs} })
	keys := keyCodecOf[K]()
	n := env.newNode("window-join", "Window(Join)")
	n.newOperator = func() runtime.Operator {
		return &windowOp{keyed: keyed{keys: keys}, contents: contents, assigner: w, keyOf: keyOf, add: add, emit: emit}
	}
	n.inputs = []streamEdge{edgeOf(a.DataStream, 0), edgeOf(b.DataStream, 1)}
	for k, v := range w.params() {
		n.params[k] = v
	}
	setCodec[O](n)
	return DataStream[O]{env: env, n: n}
}

const windowState = "windows"

// contentsCodec serializes a key's windows (map[TimeWindow]any), or tells
// why they cannot be.
type contentsCodec struct {
	c   runtime.Codec
	err error
}

// winEntry is one window's accumulator in its serializable form S.
type winEntry[S any] struct {
	Start, End int64
	Acc        S
}

// windowContents is the codec of a key's windows whose accumulators
// serialize as S.
func windowContents[S any](kind string, to func(any) S, from func(S) any) contentsCodec {
	c, err := newConvCodec[[]winEntry[S]]("windows<"+kind+","+typeOf[S]()+">",
		func(v any) []winEntry[S] {
			m := v.(map[TimeWindow]any)
			out := make([]winEntry[S], 0, len(m))
			for w, acc := range m {
				out = append(out, winEntry[S]{Start: w.Start, End: w.End, Acc: to(acc)})
			}
			sort.Slice(out, func(i, j int) bool {
				return out[i].Start < out[j].Start || out[i].Start == out[j].Start && out[i].End < out[j].End
			})
			return out
		},
		func(es []winEntry[S]) any {
			m := make(map[TimeWindow]any, len(es))
			for _, e := range es {
				m[TimeWindow{Start: e.Start, End: e.End}] = from(e.Acc)
			}
			return m
		})
	return contentsCodec{c: c, err: err}
}

// windowOp is the keyed window operator for one or two inputs. Per key the
// state is a map from window to accumulator; each window has a timer at its
// MaxTimestamp (event or processing time) that emits and clears it.
type windowOp struct {
	keyed
	assigner WindowAssigner
	keyOf    [2]func(any) any
	add      func(acc any, input int, v any) any
	emit     func(key any, w TimeWindow, acc any, out runtime.Output, ts int64) error
	contents contentsCodec
	timers   *runtime.TimerService
	buf      []TimeWindow
	// Dropped counts late records.
	Dropped int64
}

func (o *windowOp) Open(ctx *runtime.Context) error {
	if err := o.keyed.Open(ctx); err != nil {
		return err
	}
	if err := o.scope.register(windowState, o.contents.typeName(), o.contents.c, o.contents.err); err != nil {
		return err
	}
	o.timers = runtime.NewTimerService(ctx, o.state, o.fire, o.fire)
	return o.restoreTimers(o.timers, windowNsCodec)
}

// SnapshotState writes every key's windows and their timers.
func (o *windowOp) SnapshotState(_ int64, snap *runtime.OperatorSnapshot) error {
	return o.snapshotTimers(snap, o.timers, windowNsCodec)
}

func (o *windowOp) ProcessElement(input int, r runtime.Record) error {
	k := o.keyOf[input](r.Value)
	o.state.SetCurrentKey(k)
	var ts int64
	if o.assigner.eventTime {
		if !r.HasTimestamp {
			return fmt.Errorf("record %v has no event timestamp: use AssignTimestampsAndWatermarks before an event-time window", r.Value)
		}
		ts = r.Timestamp
	} else {
		ts = o.Ctx.ProcessingTime()
	}
	o.buf = o.assigner.windows(ts, o.buf)
	var m map[TimeWindow]any
	for _, w := range o.buf {
		if o.assigner.eventTime && w.MaxTimestamp() <= o.timers.CurrentWatermark() {
			continue // late
		}
		if m == nil {
			// Changed in place: the accumulators and the map.
			s, ok := o.state.GetForUpdate(windowState)
			if !ok {
				s = map[TimeWindow]any{}
				o.state.Put(windowState, s)
			}
			m = s.(map[TimeWindow]any)
		}
		m[w] = o.add(m[w], input, r.Value)
		if o.assigner.eventTime {
			o.timers.RegisterEventTimeTimer(k, w, w.MaxTimestamp())
		} else {
			o.timers.RegisterProcessingTimeTimer(k, w, w.MaxTimestamp())
		}
	}
	if m == nil {
		o.Dropped++
	}
	return nil
}

func (o *windowOp) fire(t runtime.Timer) error {
	s, ok := o.state.GetForUpdate(windowState) // the window is deleted from the map
	if !ok {
		return nil
	}
	m := s.(map[TimeWindow]any)
	w := t.Namespace.(TimeWindow)
	acc, ok := m[w]
	if !ok {
		return nil
	}
	delete(m, w)
	if len(m) == 0 {
		o.state.Delete(windowState)
	}
	return o.emit(t.Key, w, acc, o.Ctx.Output, w.MaxTimestamp())
}

func (o *windowOp) ProcessWatermark(wm int64) error {
	if err := o.timers.AdvanceWatermark(wm); err != nil {
		return err
	}
	o.Ctx.Output.EmitWatermark(wm)
	return nil
}

func (c contentsCodec) typeName() string {
	if c.c == nil {
		return "windows"
	}
	return c.c.TypeName()
}
