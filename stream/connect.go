package stream

import (
	"fmt"
	"time"

	"github.com/gofl/gofl/stream/runtime"
)

// ConnectedStreams are two keyed streams with the same key type whose
// records go to the same subtask of one two-input operator when their keys
// are equal (both inputs are partitioned by key group with that operator's
// max parallelism), as Flink's keyed ConnectedStreams. CoProcess, CoMap and
// CoFlatMap turn them into one stream.
type ConnectedStreams[A, B any, K comparable] struct {
	a KeyedStream[A, K]
	b KeyedStream[B, K]
}

// Connect connects two keyed streams (Flink's a.connect(b) on keyed
// streams). The operator they feed sees the records of a as input 1 and
// those of b as input 2, interleaved in arrival order; its watermark is the
// minimum over both inputs.
func Connect[A, B any, K comparable](a KeyedStream[A, K], b KeyedStream[B, K]) ConnectedStreams[A, B, K] {
	if b.env != a.env {
		a.env.fail(fmt.Errorf("Connect of streams from different environments"))
	}
	return ConnectedStreams[A, B, K]{a: a, b: b}
}

// First is the connected streams' first input.
func (c ConnectedStreams[A, B, K]) First() KeyedStream[A, K] { return c.a }

// Second is the connected streams' second input.
func (c ConnectedStreams[A, B, K]) Second() KeyedStream[B, K] { return c.b }

func twoInput[A, B any, K comparable, O any](c ConnectedStreams[A, B, K], kind, name string, newOp func() runtime.Operator) DataStream[O] {
	env := c.a.env
	n := env.newNode(kind, name)
	n.newOperator = newOp
	n.inputs = []streamEdge{edgeOf(c.a.DataStream, 0), edgeOf(c.b.DataStream, 1)}
	setCodec[O](n)
	return DataStream[O]{env: env, n: n}
}

// KeyedCoProcessFunction handles the records of two connected keyed
// streams with keyed state and timers, as Flink's KeyedCoProcessFunction:
// ProcessElement1 gets the first input's records, ProcessElement2 the
// second's. The KeyedContext's state is scoped to the current key and
// shared by both inputs and OnTimer. OnTimer may be nil when no timers are
// registered.
type KeyedCoProcessFunction[K comparable, A, B, O any] struct {
	ProcessElement1 func(ctx *KeyedContext[K], v A, out Collector[O]) error
	ProcessElement2 func(ctx *KeyedContext[K], v B, out Collector[O]) error
	OnTimer         func(ctx *KeyedContext[K], ts int64, out Collector[O]) error
}

// CoProcess runs fn on connected keyed streams.
func CoProcess[A, B any, K comparable, O any](c ConnectedStreams[A, B, K], fn KeyedCoProcessFunction[K, A, B, O]) DataStream[O] {
	if fn.ProcessElement1 == nil || fn.ProcessElement2 == nil {
		c.a.env.fail(fmt.Errorf("CoProcess needs ProcessElement1 and ProcessElement2"))
	}
	ka, kb := c.a.key, c.b.key
	keys := keyCodecOf[K]()
	return twoInput[A, B, K, O](c, "keyed-co-process", "KeyedCoProcess", func() runtime.Operator {
		return &keyedCoProcessOp[A, B, K, O]{keyed: keyed{keys: keys}, ka: ka, kb: kb, fn: fn}
	})
}

// CoMap maps the records of the first input with fn1 and those of the
// second with fn2 into one stream.
func CoMap[A, B any, K comparable, O any](c ConnectedStreams[A, B, K], fn1 func(A) O, fn2 func(B) O) DataStream[O] {
	return twoInput[A, B, K, O](c, "co-map", "CoMap", func() runtime.Operator {
		return &coMapOp[A, B, O]{fn1: fn1, fn2: fn2}
	})
}

// CoFlatMap calls fn1 for the records of the first input and fn2 for those
// of the second; both emit any number of results into one stream.
func CoFlatMap[A, B any, K comparable, O any](c ConnectedStreams[A, B, K], fn1 func(A, Collector[O]) error, fn2 func(B, Collector[O]) error) DataStream[O] {
	return twoInput[A, B, K, O](c, "co-flatmap", "CoFlatMap", func() runtime.Operator {
		return &coFlatMapOp[A, B, O]{fn1: fn1, fn2: fn2}
	})
}

type coMapOp[A, B, O any] struct {
	runtime.Base
	fn1 func(A) O
	fn2 func(B) O
}

func (o *coMapOp[A, B, O]) ProcessElement(input int, r runtime.Record) error {
	if input == 0 {
		r.Value = o.fn1(as[A](r.Value))
	} else {
		r.Value = o.fn2(as[B](r.Value))
	}
	o.Ctx.Output.Collect(r)
	return nil
}

type coFlatMapOp[A, B, O any] struct {
	runtime.Base
	fn1 func(A, Collector[O]) error
	fn2 func(B, Collector[O]) error
	out collector[O]
}

func (o *coFlatMapOp[A, B, O]) ProcessElement(input int, r runtime.Record) error {
	out := o.out.reset(o.Ctx.Output, r.Timestamp, r.HasTimestamp)
	if input == 0 {
		return o.fn1(as[A](r.Value), out)
	}
	return o.fn2(as[B](r.Value), out)
}

type keyedCoProcessOp[A, B any, K comparable, O any] struct {
	keyed
	ka     func(A) K
	kb     func(B) K
	fn     KeyedCoProcessFunction[K, A, B, O]
	timers *runtime.TimerService
	kctx   KeyedContext[K]
	out    collector[O]
}

func (o *keyedCoProcessOp[A, B, K, O]) Open(ctx *runtime.Context) error {
	if err := o.keyed.Open(ctx); err != nil {
		return err
	}
	o.timers = runtime.NewTimerService(ctx, o.state, o.onTimer, o.onTimer)
	o.kctx = KeyedContext[K]{scope: &o.scope, timers: o.timers, rctx: ctx}
	return o.restoreTimers(o.timers, nilCodec{})
}

// SnapshotState writes the keyed state and the timers.
func (o *keyedCoProcessOp[A, B, K, O]) SnapshotState(_ int64, snap *runtime.OperatorSnapshot) error {
	return o.snapshotTimers(snap, o.timers, nilCodec{})
}

func (o *keyedCoProcessOp[A, B, K, O]) ProcessElement(input int, r runtime.Record) error {
	out := o.out.reset(o.Ctx.Output, r.Timestamp, r.HasTimestamp)
	o.kctx.ts, o.kctx.hasTs = r.Timestamp, r.HasTimestamp
	if input == 0 {
		v := as[A](r.Value)
		k := o.ka(v)
		o.state.SetCurrentKey(k)
		o.kctx.key = k
		return o.fn.ProcessElement1(&o.kctx, v, out)
	}
	v := as[B](r.Value)
	k := o.kb(v)
	o.state.SetCurrentKey(k)
	o.kctx.key = k
	return o.fn.ProcessElement2(&o.kctx, v, out)
}

func (o *keyedCoProcessOp[A, B, K, O]) onTimer(t runtime.Timer) error {
	if o.fn.OnTimer == nil {
		return nil
	}
	o.kctx.key, o.kctx.ts, o.kctx.hasTs = as[K](t.Key), t.Timestamp, true
	out := o.out.reset(o.Ctx.Output, t.Timestamp, true)
	return o.fn.OnTimer(&o.kctx, t.Timestamp, out)
}

func (o *keyedCoProcessOp[A, B, K, O]) ProcessWatermark(wm int64) error {
	if err := o.timers.AdvanceWatermark(wm); err != nil {
		return err
	}
	o.Ctx.Output.EmitWatermark(wm)
	return nil
}

// IntervalJoin joins two keyed streams on equal keys and event time, as
// Flink's interval join: fn is called for every pair of an a and a b with
// the same key and a.ts + lower <= b.ts <= a.ts + upper (bounds
// inclusive). The result carries the larger of the two timestamps. Records
// behind the operator's watermark when they arrive are dropped, and each
// side's records are kept only until the watermark shows no more partners
// can come.
func IntervalJoin[A, B any, K comparable, O any](a KeyedStream[A, K], b KeyedStream[B, K], lower, upper time.Duration, fn func(A, B) O) DataStream[O] {
	c := Connect(a, b)
	lo, up := lower.Milliseconds(), upper.Milliseconds()
	if lo > up {
		a.env.fail(fmt.Errorf("IntervalJoin: lower bound %v is above upper bound %v", lower, upper))
	}
	ka, kb := a.key, b.key
	keys := keyCodecOf[K]()
	sides := [2]contentsCodec{bufferCodec[A](intervalJoinSide[0]), bufferCodec[B](intervalJoinSide[1])}
	out := twoInput[A, B, K, O](c, "interval-join", "IntervalJoin", func() runtime.Operator {
		return &intervalJoinOp[A, B, O]{
			keyed: keyed{keys: keys}, sides: sides,
			keyOf: [2]func(any) any{func(v any) any { return ka(as[A](v)) }, func(v any) any { return kb(as[B](v)) }},
			lower: lo, upper: up, fn: fn,
		}
	})
	out.n.params["lower_ms"] = lo
	out.n.params["upper_ms"] = up
	return out
}

type buffered struct {
	ts int64
	v  any
}

// bufEntry is the serializable form of a buffered record of type T.
type bufEntry[T any] struct {
	Ts int64
	V  T
}

// bufferCodec is the codec of one interval-join side's buffer.
func bufferCodec[T any](side string) contentsCodec {
	c, err := newConvCodec[[]bufEntry[T]](side+"<"+typeOf[T]()+">",
		func(v any) []bufEntry[T] {
			l := v.([]buffered)
			out := make([]bufEntry[T], len(l))
			for i, e := range l {
				out[i] = bufEntry[T]{Ts: e.ts, V: as[T](e.v)}
			}
			return out
		},
		func(es []bufEntry[T]) any {
			l := make([]buffered, len(es))
			for i, e := range es {
				l[i] = buffered{ts: e.Ts, v: e.V}
			}
			return l
		})
	return contentsCodec{c: c, err: err}
}

// intervalJoinSide names the state and the cleanup timers' namespace of
// each input.
var intervalJoinSide = [2]string{"interval-left", "interval-right"}

// intervalJoinOp is Flink's IntervalJoinOperator: per key a buffer of each
// side's records in arrival order; a record is joined with the buffered
// records of the other side in its interval, then buffered itself until its
// cleanup timer.
type intervalJoinOp[A, B, O any] struct {
	keyed
	keyOf        [2]func(any) any
	lower, upper int64
	fn           func(A, B) O
	sides        [2]contentsCodec
	timers       *runtime.TimerService
	// Dropped counts late records.
	Dropped int64
}

func (o *intervalJoinOp[A, B, O]) Open(ctx *runtime.Context) error {
	if err := o.keyed.Open(ctx); err != nil {
		return err
	}
	for i, c := range o.sides {
		if err := o.scope.register(intervalJoinSide[i], c.typeName(), c.c, c.err); err != nil {
			return err
		}
	}
	o.timers = runtime.NewTimerService(ctx, o.state, o.cleanup, func(runtime.Timer) error { return nil })
	return o.restoreTimers(o.timers, stringNsCodec)
}

// SnapshotState writes both sides' buffers and the cleanup timers.
func (o *intervalJoinOp[A, B, O]) SnapshotState(_ int64, snap *runtime.OperatorSnapshot) error {
	return o.snapshotTimers(snap, o.timers, stringNsCodec)
}

func (o *intervalJoinOp[A, B, O]) ProcessElement(input int, r runtime.Record) error {
	if !r.HasTimestamp {
		return fmt.Errorf("record %v has no event timestamp: use AssignTimestampsAndWatermarks before an interval join", r.Value)
	}
	ts := r.Timestamp
	if wm := o.timers.CurrentWatermark(); wm != runtime.MinWatermark && ts < wm {
		o.Dropped++
		return nil
	}
	k := o.keyOf[input](r.Value)
	o.state.SetCurrentKey(k)
	// Relative to this record, the other side's timestamps in
	// [ts+lo, ts+hi] match.
	lo, hi := o.lower, o.upper
	if input == 1 {
		lo, hi = -o.upper, -o.lower
	}
	own := intervalJoinSide[input]
	l, _ := o.state.Get(own)
	buf, _ := l.([]buffered)
	o.state.Put(own, append(buf, buffered{ts: ts, v: r.Value}))
	if l, ok := o.state.Get(intervalJoinSide[1-input]); ok {
		for _, e := range l.([]buffered) {
			if e.ts < ts+lo || e.ts > ts+hi {
				continue
			}
			var res O
			if input == 0 {
				res = o.fn(as[A](r.Value), as[B](e.v))
			} else {
				res = o.fn(as[A](e.v), as[B](r.Value))
			}
			o.Ctx.Output.Collect(runtime.Record{Value: res, Timestamp: max(ts, e.ts), HasTimestamp: true})
		}
	}
	cleanup := ts
	if hi > 0 {
		cleanup = ts + hi
	}
	o.timers.RegisterEventTimeTimer(k, own, cleanup)
	return nil
}

// cleanup drops the records of one side that can no longer find partners:
// those at or before the timestamp the timer was registered for.
func (o *intervalJoinOp[A, B, O]) cleanup(t runtime.Timer) error {
	side := t.Namespace.(string)
	bound := t.Timestamp
	if side == intervalJoinSide[0] && o.upper > 0 {
		bound -= o.upper
	} else if side == intervalJoinSide[1] && -o.lower > 0 {
		bound += o.lower
	}
	l, ok := o.state.GetForUpdate(side) // compacted in place
	if !ok {
		return nil
	}
	buf := l.([]buffered)
	keep := buf[:0]
	for _, e := range buf {
		if e.ts > bound {
			keep = append(keep, e)
		}
	}
	clear(buf[len(keep):])
	if len(keep) == 0 {
		o.state.Delete(side)
	} else {
		o.state.Put(side, keep)
	}
	return nil
}

func (o *intervalJoinOp[A, B, O]) ProcessWatermark(wm int64) error {
	if err := o.timers.AdvanceWatermark(wm); err != nil {
		return err
	}
	o.Ctx.Output.EmitWatermark(wm)
	return nil
}
