package stream

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/gofl/gofl/stream/runtime"
)

type mapOp[T, U any] struct {
	runtime.Base
	fn   func(T) U
	emit emitter[U]
}

func (o *mapOp[T, U]) ProcessElement(_ int, r runtime.Record) error {
	return o.processValue(as[T](r.Value), r.Timestamp, r.HasTimestamp)
}

// processValue implements typedInput.
func (o *mapOp[T, U]) processValue(v T, ts int64, hasTs bool) error {
	o.emit.emit(o.Ctx.Output, o.fn(v), ts, hasTs)
	return nil
}

type flatMapOp[T, U any] struct {
	runtime.Base
	fn  func(T, Collector[U]) error
	out collector[U]
}

func (o *flatMapOp[T, U]) ProcessElement(_ int, r runtime.Record) error {
	return o.processValue(as[T](r.Value), r.Timestamp, r.HasTimestamp)
}

// processValue implements typedInput.
func (o *flatMapOp[T, U]) processValue(v T, ts int64, hasTs bool) error {
	return o.fn(v, o.out.reset(o.Ctx.Output, ts, hasTs))
}

// typedInput is an operator that takes values of T directly, as a chained
// operator (runtime.ChainedOperator): ProcessElement of a record with the
// value v, without the record.
type typedInput[T any] interface {
	processValue(v T, ts int64, hasTs bool) error
}

// The operators a source hands values to typed; a change of their method
// would silently put records back on that path.
var (
	_ typedInput[string] = (*flatMapOp[string, int])(nil)
	_ typedInput[string] = (*mapOp[string, int])(nil)
)

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
	out := o.out.reset(o.Ctx.Output, r.Timestamp, r.HasTimestamp)
	o.pctx = ProcessContext{ts: r.Timestamp, hasTs: r.HasTimestamp, rctx: o.Ctx}
	return o.fn(&o.pctx, as[T](r.Value), out)
}

type unionOp struct{ runtime.Base }

func (o *unionOp) ProcessElement(_ int, r runtime.Record) error {
	o.Ctx.Output.Collect(r)
	return nil
}

// keyed is the shared part of keyed operators: the state backend, its key
// codec and the registry of the states accessed.
type keyed struct {
	runtime.Base
	state *runtime.KeyedStateBackend
	keys  keyCodec
	scope stateScope
}

func (k *keyed) Open(ctx *runtime.Context) error {
	k.Ctx = ctx
	st, err := ctx.NewKeyedStateBackend()
	if err != nil {
		return fmt.Errorf("operator %q: creating the keyed state backend: %w", ctx.OperatorName, err)
	}
	k.state = st
	k.scope = stateScope{backend: k.state, ctx: ctx}
	if err := k.keys.need(ctx); err != nil {
		return err
	}
	if k.keys.c != nil {
		k.state.SetKeyCodec(k.keys.c)
	}
	if err := k.state.Restore(ctx.Restore); err != nil {
		return fmt.Errorf("operator %q: restoring keyed state: %w", ctx.OperatorName, err)
	}
	return nil
}

// Close releases the state backend (the LSM engine's DB and local files).
func (k *keyed) Close() error {
	if k.state == nil {
		return nil
	}
	if err := k.state.Close(); err != nil {
		return fmt.Errorf("operator %q: closing the keyed state backend: %w", k.Ctx.OperatorName, err)
	}
	return nil
}

// NotifyCheckpointComplete lets an incremental backend count the
// checkpoint's files as uploaded.
func (k *keyed) NotifyCheckpointComplete(id int64) error {
	if k.state != nil {
		k.state.NotifyCheckpointComplete(id)
	}
	return nil
}

// NotifyCheckpointAborted lets an incremental backend drop the
// checkpoint's local files.
func (k *keyed) NotifyCheckpointAborted(id int64) error {
	if k.state != nil {
		k.state.NotifyCheckpointAborted(id)
	}
	return nil
}

// snapshotKeyed writes the keyed state backend.
func (k *keyed) snapshotKeyed(snap *runtime.OperatorSnapshot) error {
	if k.keys.c == nil {
		return fmt.Errorf("operator %q: keys cannot be checkpointed: %w", k.Ctx.OperatorName, k.keys.err)
	}
	if err := k.scope.err(); err != nil {
		return err
	}
	return k.state.SnapshotAsync(snap)
}

// snapshotTimers writes the keyed state backend and the timers.
func (k *keyed) snapshotTimers(snap *runtime.OperatorSnapshot, timers *runtime.TimerService, ns runtime.Codec) error {
	if err := k.snapshotKeyed(snap); err != nil {
		return err
	}
	return timers.Snapshot(snap, k.keys.c, ns)
}

// restoreTimers re-registers the restored timers.
func (k *keyed) restoreTimers(timers *runtime.TimerService, ns runtime.Codec) error {
	if k.Ctx.Restore == nil {
		return nil
	}
	if err := timers.Restore(k.Ctx.Restore, k.keys.c, ns); err != nil {
		return fmt.Errorf("operator %q: restoring timers: %w", k.Ctx.OperatorName, err)
	}
	return nil
}

// runningOp is the state of a keyed running aggregation: typed values per
// key, one map access per record.
type runningOp[K comparable, V any] struct {
	runtime.Base
	values *runtime.KeyedValues[K, V]
	keys   keyCodec
	vals   keyCodec // the values' codec
}

// runningSection is the keyed section of a running aggregation's values.
const runningSection = "values"

func newRunning[K comparable, V any]() runningOp[K, V] {
	return runningOp[K, V]{keys: keyCodecOf[K](), vals: keyCodecOf[V]()}
}

func (o *runningOp[K, V]) Open(ctx *runtime.Context) error {
	o.Ctx = ctx
	o.values = runtime.NewKeyedValues[K, V](ctx.MaxParallelism)
	if ctx.Restore == nil {
		return nil
	}
	if err := o.codecs(); err != nil {
		return err
	}
	if err := checkType(ctx, runningSection, o.vals.c.TypeName()); err != nil {
		return fmt.Errorf("operator %q: %w", ctx.OperatorName, err)
	}
	if err := o.values.RestoreFrom(ctx.Restore, runningSection, o.keys.c, o.vals.c); err != nil {
		return fmt.Errorf("operator %q: restoring keyed state: %w", ctx.OperatorName, err)
	}
	return nil
}

func (o *runningOp[K, V]) codecs() error {
	if o.keys.c == nil {
		return fmt.Errorf("operator %q: keys cannot be checkpointed: %w", o.Ctx.OperatorName, o.keys.err)
	}
	if o.vals.c == nil {
		return fmt.Errorf("operator %q: state cannot be checkpointed: %w", o.Ctx.OperatorName, o.vals.err)
	}
	return nil
}

// SnapshotState writes the values per key group.
func (o *runningOp[K, V]) SnapshotState(_ int64, snap *runtime.OperatorSnapshot) error {
	if err := o.codecs(); err != nil {
		return err
	}
	return o.values.SnapshotTo(snap, runningSection, o.keys.c, o.vals.c)
}

type keyedReduceOp[T any, K comparable] struct {
	runningOp[K, T]
	key func(T) K
	fn  func(a, b T) T
	box boxer[T]
}

func (o *keyedReduceOp[T, K]) ProcessElement(_ int, r runtime.Record) error {
	v := as[T](r.Value)
	p, created := o.values.Get(o.key(v))
	if !created {
		v = o.fn(*p, v)
	}
	*p = v
	r.Value = o.box.of(v)
	o.Ctx.Output.Collect(r)
	return nil
}

type keyedAggregateOp[T any, K comparable, ACC, OUT any] struct {
	runningOp[K, ACC]
	key func(T) K
	agg AggregateFunction[T, ACC, OUT]
}

func (o *keyedAggregateOp[T, K, ACC, OUT]) ProcessElement(_ int, r runtime.Record) error {
	v := as[T](r.Value)
	acc, created := o.values.Get(o.key(v))
	if created {
		*acc = o.agg.CreateAccumulator()
	}
	*acc = o.agg.Add(v, *acc)
	r.Value = o.agg.GetResult(*acc)
	o.Ctx.Output.Collect(r)
	return nil
}

// KeyedContext is what a KeyedProcessFunction sees of the current record
// or timer: its key, timestamp, time and timers, and keyed state.
type KeyedContext[K comparable] struct {
	key    K
	ts     int64
	hasTs  bool
	scope  *stateScope
	timers *runtime.TimerService
	rctx   *runtime.Context
}

func (c *KeyedContext[K]) keyedState() *stateScope { return c.scope }

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

// MetricGroup is the operator's user metric group.
func (c *KeyedContext[K]) MetricGroup() MetricGroup { return c.rctx.Metrics }

type keyedProcessOp[T any, K comparable, O any] struct {
	keyed
	key    func(T) K
	fn     KeyedProcessFunction[K, T, O]
	timers *runtime.TimerService
	kctx   KeyedContext[K]
	out    collector[O]
	opened bool
}

func (o *keyedProcessOp[T, K, O]) Open(ctx *runtime.Context) error {
	if err := o.keyed.Open(ctx); err != nil {
		return err
	}
	o.timers = runtime.NewTimerService(ctx, o.state, o.onTimer, o.onTimer)
	o.kctx = KeyedContext[K]{scope: &o.scope, timers: o.timers, rctx: ctx}
	if err := o.restoreTimers(o.timers, nilCodec{}); err != nil {
		return err
	}
	if o.fn.Open != nil {
		o.opened = true
		if err := o.fn.Open(&FunctionContext{rctx: ctx, store: &OperatorStateStore{ctx: ctx}}); err != nil {
			return fmt.Errorf("operator %q: opening the function: %w", ctx.OperatorName, err)
		}
	}
	return nil
}

// Close closes the function (once opened), then the state backend.
func (o *keyedProcessOp[T, K, O]) Close() error {
	var err error
	if o.opened && o.fn.Close != nil {
		o.opened = false
		err = o.fn.Close()
	}
	return errors.Join(err, o.keyed.Close())
}

// SnapshotState writes the keyed state and the timers.
func (o *keyedProcessOp[T, K, O]) SnapshotState(_ int64, snap *runtime.OperatorSnapshot) error {
	return o.snapshotTimers(snap, o.timers, nilCodec{})
}

func (o *keyedProcessOp[T, K, O]) ProcessElement(_ int, r runtime.Record) error {
	v := as[T](r.Value)
	k := o.key(v)
	o.state.SetCurrentKey(k)
	o.kctx.key, o.kctx.ts, o.kctx.hasTs = k, r.Timestamp, r.HasTimestamp
	out := o.out.reset(o.Ctx.Output, r.Timestamp, r.HasTimestamp)
	return o.fn.ProcessElement(&o.kctx, v, out)
}

func (o *keyedProcessOp[T, K, O]) onTimer(t runtime.Timer) error {
	if o.fn.OnTimer == nil {
		return nil
	}
	o.kctx.key, o.kctx.ts, o.kctx.hasTs = as[K](t.Key), t.Timestamp, true
	out := o.out.reset(o.Ctx.Output, t.Timestamp, true)
	return o.fn.OnTimer(&o.kctx, t.Timestamp, out)
}

func (o *keyedProcessOp[T, K, O]) ProcessWatermark(wm int64) error {
	if err := o.timers.AdvanceWatermark(wm); err != nil {
		return err
	}
	o.Ctx.Output.EmitWatermark(wm)
	return nil
}

// combineMaxKeys bounds the keys a reduce combiner holds: past it, it
// emits its partial results and starts over.
const combineMaxKeys = 1 << 16

// combineEntryOverhead estimates what a combiner's key takes besides the
// key and value themselves (map entry, index).
const combineEntryOverhead = 48

// combineChunk is how many values a reduce combiner keeps per
// allocation: values stay where they are, so its index points at them.
const combineChunk = 256

// reduceCombiner is the combiner of a keyed Reduce in Batch mode: the
// partial reduction per key of one producer subtask, in key arrival order
// (so its output is deterministic), one map access per record: the index
// points at the key's value, which a record's reduce overwrites in place.
// It flushes at combineMaxKeys keys or when the slot's managed memory has
// no room for a new key (a per-key estimate: the key's string bytes and
// the sizes of key and value).
type reduceCombiner[T any, K comparable] struct {
	key func(T) K
	fn  func(a, b T) T
	idx map[K]*T
	// chunks hold the n values in arrival order, combineChunk each; they
	// are reused after a flush.
	chunks [][]T
	n      int
	// keep makes vals hold their own strings, not their input's.
	keep stringKeeper[T]
	box  boxer[T]
	mem  *runtime.MemoryManager
	held int64 // reserved from mem
	used int64 // of held
}

func newReduceCombiner[T any, K comparable](key func(T) K, fn func(a, b T) T) *reduceCombiner[T, K] {
	return &reduceCombiner[T, K]{key: key, fn: fn, idx: map[K]*T{}, keep: newStringKeeper[T]()}
}

// SetBatchMemory implements runtime.ManagedCombiner.
func (c *reduceCombiner[T, K]) SetBatchMemory(m runtime.BatchMemory) { c.mem = m.Memory }

// Close implements runtime.ManagedCombiner.
func (c *reduceCombiner[T, K]) Close() { c.release() }

func (c *reduceCombiner[T, K]) release() {
	if c.mem != nil && c.held > 0 {
		c.mem.Release(c.held)
	}
	c.held, c.used = 0, 0
}

// reserve accounts n bytes for a new key, reserving whole pages; false
// when the budget has none (an empty table overdraws, to progress).
func (c *reduceCombiner[T, K]) reserve(n int64) bool {
	if c.used+n <= c.held {
		c.used += n
		return true
	}
	grow := (c.used + n - c.held + runtime.PageSize - 1) / runtime.PageSize * runtime.PageSize
	if !c.mem.TryReserve(grow) {
		if c.n > 0 {
			return false
		}
		c.mem.ForceReserve(grow)
	}
	c.held += grow
	c.used += n
	return true
}

// collector implements typedCombiner.
func (c *reduceCombiner[T, K]) collector(d *runtime.DirectCombiner) Collector[T] {
	return &combinerCollector[T, K]{c: c, d: d}
}

// combinerCollector is a Collector that is a reduce combiner's input, as
// the combiner is a user function's output (typedCombiner.collector): per
// value, one call into the combiner, as the task's running operator.
type combinerCollector[T any, K comparable] struct {
	c *reduceCombiner[T, K]
	d *runtime.DirectCombiner
}

func (x *combinerCollector[T, K]) Collect(v T) {
	c, d := x.c, x.d
	prev := *d.Running
	*d.Running = d.Self
	// addValue's path for a key the table holds, update inlined (the
	// compiler does not inline calls in shaped code): the path of almost
	// every value.
	k := c.key(v)
	if p, ok := c.idx[k]; ok {
		next := c.fn(*p, v)
		if len(c.keep.offsets) > 0 && !c.keep.shares(p, &next) {
			c.keep.keep(p, &next)
		}
		*p = next
	} else {
		c.insert(k, v, d.Next)
	}
	*d.Running = prev
}

func (c *reduceCombiner[T, K]) Add(r runtime.Record, out runtime.Output) {
	c.addValue(as[T](r.Value), out)
}

// addValue folds v into its key's partial result (Add's path).
func (c *reduceCombiner[T, K]) addValue(v T, out runtime.Output) {
	k := c.key(v)
	if p, ok := c.idx[k]; ok {
		c.update(p, v)
		return
	}
	c.insert(k, v, out)
}

// update reduces v into the value p of its key (combinerCollector.Collect
// has it inlined).
func (c *reduceCombiner[T, K]) update(p *T, v T) {
	next := c.fn(*p, v)
	if len(c.keep.offsets) > 0 && !c.keep.shares(p, &next) {
		c.keep.keep(p, &next)
	}
	*p = next
}

// insert adds v under k, a key the table does not hold.
func (c *reduceCombiner[T, K]) insert(k K, v T, out runtime.Output) {
	if c.n >= combineMaxKeys {
		c.Flush(out)
	}
	s, isString := any(k).(string)
	kc := ""
	if isString {
		// A string key is often part of a larger input (a word of a
		// line): a copy keeps only its bytes alive, and keeps the keys
		// that every lookup compares with close together. The value's
		// strings are copied too (the key's shares the key's copy).
		kc = strings.Clone(s)
		k = any(kc).(K)
	}
	c.keep.own(&v, s, kc)
	if c.mem != nil {
		n := int64(unsafe.Sizeof(k)+unsafe.Sizeof(v)+uintptr(len(s))) + combineEntryOverhead
		if !c.reserve(n) {
			c.Flush(out)
			c.reserve(n)
		}
	}
	if c.n == len(c.chunks)*combineChunk {
		c.chunks = append(c.chunks, make([]T, combineChunk))
	}
	p := &c.chunks[c.n/combineChunk][c.n%combineChunk]
	*p = v
	c.idx[k] = p
	c.n++
}

func (c *reduceCombiner[T, K]) Flush(out runtime.Output) {
	for i := 0; i < c.n; i++ {
		out.Collect(runtime.Record{Value: c.box.of(c.chunks[i/combineChunk][i%combineChunk])})
	}
	clear(c.idx)
	for _, ch := range c.chunks {
		clear(ch)
	}
	c.n = 0
	c.release()
}
