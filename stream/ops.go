package stream

import (
	"github.com/gofl/gofl/stream/runtime"
)

type mapOp[T, U any] struct {
	runtime.Base
	fn func(T) U
}

func (o *mapOp[T, U]) ProcessElement(_ int, r runtime.Record) error {
	r.Value = o.fn(as[T](r.Value))
	o.Ctx.Output.Collect(r)
	return nil
}

type flatMapOp[T, U any] struct {
	runtime.Base
	fn  func(T, Collector[U]) error
	out collector[U]
}

func (o *flatMapOp[T, U]) ProcessElement(_ int, r runtime.Record) error {
	o.out = collector[U]{out: o.Ctx.Output, ts: r.Timestamp, hasTs: r.HasTimestamp}
	return o.fn(as[T](r.Value), &o.out)
}

type filterOp[T any] struct {
	runtime.Base
	fn func(T) bool
}

func (o *filterOp[T]) ProcessElement(_ int, r runtime.Record) error {
	if o.fn(as[T](r.Value)) {
		o.Ctx.Output.Collect(r)
	}
	return nil
}

type processOp[T, U any] struct {
	runtime.Base
	fn   func(*ProcessContext, T, Collector[U]) error
	pctx ProcessContext
	out  collector[U]
}

func (o *processOp[T, U]) ProcessElement(_ int, r runtime.Record) error {
	o.out = collector[U]{out: o.Ctx.Output, ts: r.Timestamp, hasTs: r.HasTimestamp}
	o.pctx = ProcessContext{ts: r.Timestamp, hasTs: r.HasTimestamp, rctx: o.Ctx}
	return o.fn(&o.pctx, as[T](r.Value), &o.out)
}

type unionOp struct{ runtime.Base }

func (o *unionOp) ProcessElement(_ int, r runtime.Record) error {
	o.Ctx.Output.Collect(r)
	return nil
}

// keyed is the shared part of keyed operators: the state backend.
type keyed struct {
	runtime.Base
	state *runtime.KeyedStateBackend
}

func (k *keyed) Open(ctx *runtime.Context) error {
	k.Ctx = ctx
	k.state = runtime.NewKeyedStateBackend(ctx.MaxParallelism)
	return nil
}

// runningOp is the state of a keyed running aggregation: typed values per
// key, one map access per record.
type runningOp[K comparable, V any] struct {
	runtime.Base
	values *runtime.KeyedValues[K, V]
}

func (o *runningOp[K, V]) Open(ctx *runtime.Context) error {
	o.Ctx = ctx
	o.values = runtime.NewKeyedValues[K, V](ctx.MaxParallelism)
	return nil
}

type keyedReduceOp[T any, K comparable] struct {
	runningOp[K, T]
	key   func(T) K
	fn    func(a, b T) T
	final bool
}

func (o *keyedReduceOp[T, K]) ProcessElement(_ int, r runtime.Record) error {
	v := as[T](r.Value)
	p, created := o.values.Get(o.key(v))
	if !created {
		v = o.fn(*p, v)
	}
	*p = v
	if !o.final {
		r.Value = v
		o.Ctx.Output.Collect(r)
	}
	return nil
}

func (o *keyedReduceOp[T, K]) Finish() error {
	if o.final {
		o.values.Range(func(_ K, v *T) { o.Ctx.Output.Collect(runtime.Record{Value: *v}) })
	}
	return nil
}

type keyedAggregateOp[T any, K comparable, ACC, OUT any] struct {
	runningOp[K, ACC]
	key   func(T) K
	agg   AggregateFunction[T, ACC, OUT]
	final bool
}

func (o *keyedAggregateOp[T, K, ACC, OUT]) ProcessElement(_ int, r runtime.Record) error {
	v := as[T](r.Value)
	acc, created := o.values.Get(o.key(v))
	if created {
		*acc = o.agg.CreateAccumulator()
	}
	*acc = o.agg.Add(v, *acc)
	if !o.final {
		r.Value = o.agg.GetResult(*acc)
		o.Ctx.Output.Collect(r)
	}
	return nil
}

func (o *keyedAggregateOp[T, K, ACC, OUT]) Finish() error {
	if o.final {
		o.values.Range(func(_ K, acc *ACC) { o.Ctx.Output.Collect(runtime.Record{Value: o.agg.GetResult(*acc)}) })
	}
	return nil
}

// StateContext gives keyed state access scoped to the current key. It is
// implemented by KeyedContext.
type StateContext interface {
	keyedState() *runtime.KeyedStateBackend
}

// ValueState is a single value per key, declared by name when building the
// job and read and written through the KeyedContext of the current record:
//
//	count := stream.NewValueState[int]("count")
//	... n, _ := count.Value(ctx); count.Update(ctx, n+1)
type ValueState[V any] struct{ name string }

// NewValueState declares a value state. Names must be unique per operator.
func NewValueState[V any](name string) ValueState[V] { return ValueState[V]{name: "user:" + name} }

// Value is the current key's value and whether it is set.
func (s ValueState[V]) Value(ctx StateContext) (V, bool) {
	v, ok := ctx.keyedState().Get(s.name)
	return as[V](v), ok
}

// Update sets the current key's value.
func (s ValueState[V]) Update(ctx StateContext, v V) { ctx.keyedState().Put(s.name, v) }

// Clear removes the current key's value.
func (s ValueState[V]) Clear(ctx StateContext) { ctx.keyedState().Delete(s.name) }

// KeyedContext is what a KeyedProcessFunction sees of the current record
// or timer: its key, timestamp, time and timers, and keyed state.
type KeyedContext[K comparable] struct {
	key    K
	ts     int64
	hasTs  bool
	state  *runtime.KeyedStateBackend
	timers *runtime.TimerService
	rctx   *runtime.Context
}

func (c *KeyedContext[K]) keyedState() *runtime.KeyedStateBackend { return c.state }

// CurrentKey is the key of the record or timer being handled.
func (c *KeyedContext[K]) CurrentKey() K { return c.key }

// Timestamp is the record's event timestamp (or the timer's time).
func (c *KeyedContext[K]) Timestamp() (int64, bool) { return c.ts, c.hasTs }

// CurrentWatermark is the operator's current event time.
func (c *KeyedContext[K]) CurrentWatermark() int64 { return c.timers.CurrentWatermark() }

// ProcessingTime is the clock in milliseconds.
func (c *KeyedContext[K]) ProcessingTime() int64 { return c.rctx.ProcessingTime() }

// RegisterEventTimeTimer calls OnTimer for the current key once the
// watermark reaches ts.
func (c *KeyedContext[K]) RegisterEventTimeTimer(ts int64) {
	c.timers.RegisterEventTimeTimer(c.key, nil, ts)
}

// RegisterProcessingTimeTimer calls OnTimer for the current key once the
// clock reaches ts.
func (c *KeyedContext[K]) RegisterProcessingTimeTimer(ts int64) {
	c.timers.RegisterProcessingTimeTimer(c.key, nil, ts)
}

// DeleteEventTimeTimer removes the current key's pending event-time timer
// at ts, if any.
func (c *KeyedContext[K]) DeleteEventTimeTimer(ts int64) {
	c.timers.DeleteEventTimeTimer(c.key, nil, ts)
}

// DeleteProcessingTimeTimer removes the current key's pending
// processing-time timer at ts, if any.
func (c *KeyedContext[K]) DeleteProcessingTimeTimer(ts int64) {
	c.timers.DeleteProcessingTimeTimer(c.key, nil, ts)
}

// SubtaskIndex is the index of the running subtask.
func (c *KeyedContext[K]) SubtaskIndex() int { return c.rctx.SubtaskIndex }

type keyedProcessOp[T any, K comparable, O any] struct {
	keyed
	key    func(T) K
	fn     KeyedProcessFunction[K, T, O]
	timers *runtime.TimerService
	kctx   KeyedContext[K]
	out    collector[O]
}

func (o *keyedProcessOp[T, K, O]) Open(ctx *runtime.Context) error {
	if err := o.keyed.Open(ctx); err != nil {
		return err
	}
	o.timers = runtime.NewTimerService(ctx, o.state, o.onTimer, o.onTimer)
	o.kctx = KeyedContext[K]{state: o.state, timers: o.timers, rctx: ctx}
	return nil
}

func (o *keyedProcessOp[T, K, O]) ProcessElement(_ int, r runtime.Record) error {
	v := as[T](r.Value)
	k := o.key(v)
	o.state.SetCurrentKey(k)
	o.kctx.key, o.kctx.ts, o.kctx.hasTs = k, r.Timestamp, r.HasTimestamp
	o.out = collector[O]{out: o.Ctx.Output, ts: r.Timestamp, hasTs: r.HasTimestamp}
	return o.fn.ProcessElement(&o.kctx, v, &o.out)
}

func (o *keyedProcessOp[T, K, O]) onTimer(t runtime.Timer) error {
	if o.fn.OnTimer == nil {
		return nil
	}
	o.kctx.key, o.kctx.ts, o.kctx.hasTs = as[K](t.Key), t.Timestamp, true
	o.out = collector[O]{out: o.Ctx.Output, ts: t.Timestamp, hasTs: true}
	return o.fn.OnTimer(&o.kctx, t.Timestamp, &o.out)
}

func (o *keyedProcessOp[T, K, O]) ProcessWatermark(wm int64) error {
	if err := o.timers.AdvanceWatermark(wm); err != nil {
		return err
	}
	o.Ctx.Output.EmitWatermark(wm)
	return nil
}
