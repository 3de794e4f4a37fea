package stream

import (
	"fmt"
	"reflect"

	"github.com/gofl/gofl/stream/codec"
	"github.com/gofl/gofl/stream/runtime"
)

// MapStateDescriptor names a broadcast state of K to V (Flink's
// MapStateDescriptor given to DataStream.broadcast).
type MapStateDescriptor[K comparable, V any] struct {
	name  string
	codec codec.Codec[bcEntry[K, V]]
	err   error
}

// bcEntry is one broadcast state entry, one element of its list state.
type bcEntry[K comparable, V any] struct {
	K K
	V V
}

// NewMapStateDescriptor declares a broadcast state.
func NewMapStateDescriptor[K comparable, V any](name string) MapStateDescriptor[K, V] {
	c, err := codec.For[bcEntry[K, V]]()
	return MapStateDescriptor[K, V]{name: name, codec: c, err: err}
}

func (d MapStateDescriptor[K, V]) section() string { return "broadcast:" + d.name }

func (d MapStateDescriptor[K, V]) typeName() string {
	return "BroadcastState<" + reflect.TypeFor[K]().String() + "," + reflect.TypeFor[V]().String() + ">"
}

// BroadcastStream is a stream sent to every subtask of the operator it is
// connected to, which keeps a broadcast state written from it (Flink's
// BroadcastStream).
type BroadcastStream[T any, K comparable, V any] struct {
	s    DataStream[T]
	desc MapStateDescriptor[K, V]
}

// BroadcastWithState broadcasts s and declares the state its records
// maintain (Flink's stream.broadcast(descriptor)).
func BroadcastWithState[T any, K comparable, V any](s DataStream[T], desc MapStateDescriptor[K, V]) BroadcastStream[T, K, V] {
	return BroadcastStream[T, K, V]{s: s.Broadcast(), desc: desc}
}

// BroadcastState is the read-write view of a broadcast state, given to
// the broadcast side. Every subtask must change it the same way (only as
// a function of the broadcast records), since each keeps its own copy and
// a restore gives every subtask subtask 0's.
type BroadcastState[K comparable, V any] struct{ m map[K]V }

// Get is the value under k.
func (s *BroadcastState[K, V]) Get(k K) (V, bool) { v, ok := s.m[k]; return v, ok }

// Contains reports whether k has a value.
func (s *BroadcastState[K, V]) Contains(k K) bool { _, ok := s.m[k]; return ok }

// Put sets the value under k.
func (s *BroadcastState[K, V]) Put(k K, v V) { s.m[k] = v }

// Remove deletes k.
func (s *BroadcastState[K, V]) Remove(k K) { delete(s.m, k) }

// Clear removes every entry.
func (s *BroadcastState[K, V]) Clear() { clear(s.m) }

// Entries returns a copy of the state.
func (s *BroadcastState[K, V]) Entries() map[K]V {
	out := make(map[K]V, len(s.m))
	for k, v := range s.m {
		out[k] = v
	}
	return out
}

// ReadOnlyBroadcastState is the view of the non-broadcast side.
type ReadOnlyBroadcastState[K comparable, V any] struct{ s *BroadcastState[K, V] }

// Get is the value under k.
func (r ReadOnlyBroadcastState[K, V]) Get(k K) (V, bool) { return r.s.Get(k) }

// Contains reports whether k has a value.
func (r ReadOnlyBroadcastState[K, V]) Contains(k K) bool { return r.s.Contains(k) }

// Entries returns a copy of the state.
func (r ReadOnlyBroadcastState[K, V]) Entries() map[K]V { return r.s.Entries() }

// broadcastSide is the broadcast state part of a broadcast operator.
type broadcastSide[K comparable, V any] struct {
	desc  MapStateDescriptor[K, V]
	state BroadcastState[K, V]
}

func (b *broadcastSide[K, V]) open(ctx *runtime.Context) error {
	b.state.m = map[K]V{}
	if ctx.Restore == nil {
		return nil
	}
	if b.desc.err != nil {
		return fmt.Errorf("broadcast state %q: %w: %w", b.desc.name, ErrNoStateCodec, b.desc.err)
	}
	if err := ctx.Restore.CheckType(b.desc.section(), b.desc.typeName()); err != nil {
		return err
	}
	for _, el := range ctx.Restore.Lists[b.desc.section()] {
		e, n, err := b.desc.codec.Decode(el)
		if err == nil && n != len(el) {
			err = fmt.Errorf("%w: trailing bytes", codec.ErrCorrupt)
		}
		if err != nil {
			return fmt.Errorf("broadcast state %q: %w", b.desc.name, err)
		}
		b.state.m[e.K] = e.V
	}
	return nil
}

func (b *broadcastSide[K, V]) snapshot(snap *runtime.OperatorSnapshot) error {
	if b.desc.err != nil {
		return fmt.Errorf("broadcast state %q: %w: %w", b.desc.name, ErrNoStateCodec, b.desc.err)
	}
	els := make([][]byte, 0, len(b.state.m))
	for k, v := range b.state.m {
		els = append(els, b.desc.codec.Append(nil, bcEntry[K, V]{K: k, V: v}))
	}
	snap.PutList(b.desc.section(), runtime.BroadcastList, b.desc.typeName(), els)
	return nil
}

// BroadcastProcessFunction processes a stream connected with a broadcast
// stream (Flink's BroadcastProcessFunction): ProcessBroadcastElement may
// change the broadcast state, ProcessElement only reads it.
type BroadcastProcessFunction[IN, BC any, K comparable, V, O any] struct {
	ProcessElement          func(ctx *ProcessContext, state ReadOnlyBroadcastState[K, V], v IN, out Collector[O]) error
	ProcessBroadcastElement func(ctx *ProcessContext, state *BroadcastState[K, V], v BC, out Collector[O]) error
}

// ConnectBroadcast runs fn on s (input 1) and the broadcast stream b
// (input 2).
func ConnectBroadcast[IN, BC any, K comparable, V, O any](s DataStream[IN], b BroadcastStream[BC, K, V], fn BroadcastProcessFunction[IN, BC, K, V, O]) DataStream[O] {
	desc := b.desc
	return broadcastNode[IN, BC, O](s, b.s, "broadcast-process", "BroadcastProcess", func() runtime.Operator {
		return &broadcastProcessOp[IN, BC, K, V, O]{fn: fn, bc: broadcastSide[K, V]{desc: desc}}
	})
}

func broadcastNode[IN, BC, O any](s DataStream[IN], b DataStream[BC], kind, name string, newOp func() runtime.Operator) DataStream[O] {
	env := s.env
	if b.env != env {
		env.fail(fmt.Errorf("ConnectBroadcast of streams from different environments"))
	}
	n := env.newNode(kind, name)
	n.newOperator = newOp
	n.inputs = []streamEdge{edgeOf(s, 0), edgeOf(b, 1)}
	setCodec[O](n)
	return DataStream[O]{env: env, n: n}
}

type broadcastProcessOp[IN, BC any, K comparable, V, O any] struct {
	runtime.Base
	fn   BroadcastProcessFunction[IN, BC, K, V, O]
	bc   broadcastSide[K, V]
	pctx ProcessContext
	out  collector[O]
}

func (o *broadcastProcessOp[IN, BC, K, V, O]) Open(ctx *runtime.Context) error {
	o.Ctx = ctx
	return o.bc.open(ctx)
}

func (o *broadcastProcessOp[IN, BC, K, V, O]) ProcessElement(input int, r runtime.Record) error {
	out := o.out.reset(o.Ctx.Output, r.Timestamp, r.HasTimestamp)
	o.pctx = ProcessContext{ts: r.Timestamp, hasTs: r.HasTimestamp, rctx: o.Ctx}
	if input == 0 {
		return o.fn.ProcessElement(&o.pctx, ReadOnlyBroadcastState[K, V]{&o.bc.state}, as[IN](r.Value), out)
	}
	return o.fn.ProcessBroadcastElement(&o.pctx, &o.bc.state, as[BC](r.Value), out)
}

// SnapshotState writes the broadcast state.
func (o *broadcastProcessOp[IN, BC, K, V, O]) SnapshotState(_ int64, snap *runtime.OperatorSnapshot) error {
	return o.bc.snapshot(snap)
}

// KeyedBroadcastProcessFunction processes a keyed stream connected with a
// broadcast stream (Flink's KeyedBroadcastProcessFunction): the keyed side
// has keyed state and timers and reads the broadcast state; the broadcast
// side may change it. OnTimer may be nil.
type KeyedBroadcastProcessFunction[KEY comparable, IN, BC any, K comparable, V, O any] struct {
	ProcessElement          func(ctx *KeyedContext[KEY], state ReadOnlyBroadcastState[K, V], v IN, out Collector[O]) error
	ProcessBroadcastElement func(ctx *ProcessContext, state *BroadcastState[K, V], v BC, out Collector[O]) error
	OnTimer                 func(ctx *KeyedContext[KEY], state ReadOnlyBroadcastState[K, V], ts int64, out Collector[O]) error
}

// ConnectKeyedBroadcast runs fn on the keyed stream s and the broadcast
// stream b.
func ConnectKeyedBroadcast[IN any, KEY comparable, BC any, K comparable, V, O any](s KeyedStream[IN, KEY], b BroadcastStream[BC, K, V], fn KeyedBroadcastProcessFunction[KEY, IN, BC, K, V, O]) DataStream[O] {
	desc := b.desc
	key := s.key
	keys := keyCodecOf[KEY]()
	return broadcastNode[IN, BC, O](s.DataStream, b.s, "keyed-broadcast-process", "KeyedBroadcastProcess", func() runtime.Operator {
		return &keyedBroadcastOp[IN, KEY, BC, K, V, O]{keyed: keyed{keys: keys}, key: key, fn: fn, bc: broadcastSide[K, V]{desc: desc}}
	})
}

type keyedBroadcastOp[IN any, KEY comparable, BC any, K comparable, V, O any] struct {
	keyed
	key    func(IN) KEY
	fn     KeyedBroadcastProcessFunction[KEY, IN, BC, K, V, O]
	bc     broadcastSide[K, V]
	timers *runtime.TimerService
	kctx   KeyedContext[KEY]
	pctx   ProcessContext
	out    collector[O]
}

func (o *keyedBroadcastOp[IN, KEY, BC, K, V, O]) Open(ctx *runtime.Context) error {
	if err := o.keyed.Open(ctx); err != nil {
		return err
	}
	if err := o.bc.open(ctx); err != nil {
		return err
	}
	o.timers = runtime.NewTimerService(ctx, o.state, o.onTimer, o.onTimer)
	o.kctx = KeyedContext[KEY]{scope: &o.scope, timers: o.timers, rctx: ctx}
	return o.restoreTimers(o.timers, nilCodec{})
}

func (o *keyedBroadcastOp[IN, KEY, BC, K, V, O]) ProcessElement(input int, r runtime.Record) error {
	out := o.out.reset(o.Ctx.Output, r.Timestamp, r.HasTimestamp)
	if input == 1 {
		o.pctx = ProcessContext{ts: r.Timestamp, hasTs: r.HasTimestamp, rctx: o.Ctx}
		return o.fn.ProcessBroadcastElement(&o.pctx, &o.bc.state, as[BC](r.Value), out)
	}
	v := as[IN](r.Value)
	k := o.key(v)
	o.state.SetCurrentKey(k)
	o.kctx.key, o.kctx.ts, o.kctx.hasTs = k, r.Timestamp, r.HasTimestamp
	return o.fn.ProcessElement(&o.kctx, ReadOnlyBroadcastState[K, V]{&o.bc.state}, v, out)
}

func (o *keyedBroadcastOp[IN, KEY, BC, K, V, O]) onTimer(t runtime.Timer) error {
	if o.fn.OnTimer == nil {
		return nil
	}
	o.kctx.key, o.kctx.ts, o.kctx.hasTs = as[KEY](t.Key), t.Timestamp, true
	out := o.out.reset(o.Ctx.Output, t.Timestamp, true)
	return o.fn.OnTimer(&o.kctx, ReadOnlyBroadcastState[K, V]{&o.bc.state}, t.Timestamp, out)
}

func (o *keyedBroadcastOp[IN, KEY, BC, K, V, O]) ProcessWatermark(wm int64) error {
	if err := o.timers.AdvanceWatermark(wm); err != nil {
		return err
	}
	o.Ctx.Output.EmitWatermark(wm)
	return nil
}

// SnapshotState writes the keyed state, the timers and the broadcast
// state.
func (o *keyedBroadcastOp[IN, KEY, BC, K, V, O]) SnapshotState(_ int64, snap *runtime.OperatorSnapshot) error {
	if err := o.snapshotTimers(snap, o.timers, nilCodec{}); err != nil {
		return err
	}
	return o.bc.snapshot(snap)
}
