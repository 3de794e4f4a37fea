package stream

import (
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/gofl/gofl/stream/runtime"
)

// StateContext gives keyed state access scoped to the current key. It is
// implemented by KeyedContext.
type StateContext interface {
	keyedState() *stateScope
}

// stateScope is one keyed operator's view of its backend: the states
// accessed so far, registered with the backend (and type-checked against
// the restored ones) on first access.
type stateScope struct {
	backend  *runtime.KeyedStateBackend
	ctx      *runtime.Context
	known    map[string]bool
	noCodecs []error
	// last is the state registered or found known last: accessing the
	// same state record after record skips the map.
	last string
}

// register makes state name known to the backend with codec c (nil when
// its type has none: cerr tells why, reported when the job checkpoints).
func (s *stateScope) register(name, typeName string, c runtime.Codec, cerr error) error {
	if name == s.last && name != "" {
		return nil
	}
	if s.known[name] {
		s.last = name
		return nil
	}
	if err := checkType(s.ctx, "state:"+name, typeName); err != nil {
		return err
	}
	if c != nil {
		if err := s.backend.RegisterState(name, c); err != nil {
			return fmt.Errorf("operator %q: %w", s.ctx.OperatorName, err)
		}
	} else {
		err := fmt.Errorf("operator %q: state %q: %w", s.ctx.OperatorName, name, cerr)
		if s.ctx.Checkpointing || s.ctx.Restore != nil {
			return err
		}
		s.noCodecs = append(s.noCodecs, err)
	}
	if s.known == nil {
		s.known = map[string]bool{}
	}
	s.known[name] = true
	s.last = name
	return nil
}

// err reports states that cannot be snapshotted.
func (s *stateScope) err() error { return errors.Join(s.noCodecs...) }

// TtlUpdateType is when a state's time-to-live is renewed (Flink's
// StateTtlConfig.UpdateType).
type TtlUpdateType int

const (
	// OnCreateAndWrite renews it when the value is written.
	OnCreateAndWrite TtlUpdateType = iota
	// OnReadAndWrite renews it on reads too.
	OnReadAndWrite
)

// TtlVisibility is whether an expired value can still be read (Flink's
// StateTtlConfig.StateVisibility).
type TtlVisibility int

const (
	// NeverReturnExpired hides expired values (and drops them when read).
	NeverReturnExpired TtlVisibility = iota
	// ReturnExpiredIfNotCleanedUp returns an expired value until it is
	// cleaned up (on write or Clear).
	ReturnExpiredIfNotCleanedUp
)

// StateTtlConfig expires keyed state TTL after it was last renewed, in
// processing time (the task's clock), as Flink's StateTtlConfig. For
// ListState each element and for MapState each entry expires on its own.
type StateTtlConfig struct {
	TTL        time.Duration
	UpdateType TtlUpdateType
	Visibility TtlVisibility
}

// StateOption configures a keyed state declaration.
type StateOption func(*stateDesc)

// WithTTL gives a state a time-to-live.
func WithTTL(cfg StateTtlConfig) StateOption {
	return func(d *stateDesc) { d.ttl = &cfg }
}

// ttlEntry is a value with the time it was last renewed.
type ttlEntry[T any] struct {
	V  T
	Ts int64
}

// stateDesc is a declared keyed state: its backend name and how its value
// (held as S, or ttlEntry[S] with a TTL) is serialized.
type stateDesc struct {
	name     string
	typeName string
	codec    runtime.Codec
	codecErr error
	ttl      *StateTtlConfig
	// mutable: the values handed to user code may be changed in place
	// (they hold pointers, maps or slices), so they are taken with
	// GetForUpdate, which copies a value still being snapshotted.
	mutable bool
	// indirect: a cell without TTL holds its S as a *S (its codec
	// converts), overwritten in place where the engine keeps such changes:
	// an update then allocates nothing, where boxing each new S into an
	// interface allocated per update (a count per record).
	indirect bool
}

// newDesc declares state name of kind (ValueState, ...) stored as S, or as
// the TTL form W when a TTL is configured.
func newDesc[S, W any](kind, name string, opts []StateOption) *stateDesc {
	d := &stateDesc{name: "user:" + name, mutable: mayAlias(reflect.TypeFor[S]())}
	for _, o := range opts {
		o(d)
	}
	if d.ttl != nil {
		d.typeName = kind + "<" + typeOf[S]() + ">+ttl"
		d.codec, d.codecErr = codecOf[W](d.typeName)
	} else {
		d.typeName = kind + "<" + typeOf[S]() + ">"
		d.codec, d.codecErr = codecOf[S](d.typeName)
	}
	return d
}

// mayAlias reports whether a value of type t can share memory with a copy
// of it (so a change through one is seen through the other).
func mayAlias(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Array:
		return mayAlias(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if mayAlias(t.Field(i).Type) {
				return true
			}
		}
		return false
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	}
	return false
}

// get reads the current key's value; update: to change it in place (see
// KeyedStateBackend.GetForUpdate).
func (d *stateDesc) get(b *runtime.KeyedStateBackend, update bool) (any, bool) {
	if update {
		return b.GetForUpdate(d.name)
	}
	return b.Get(d.name)
}

// access returns the backend after registering the state.
func (d *stateDesc) access(ctx StateContext) (*runtime.KeyedStateBackend, *stateScope) {
	s := ctx.keyedState()
	if err := s.register(d.name, d.typeName, d.codec, d.codecErr); err != nil {
		panic(stateFailure(s.ctx, err))
	}
	return s.backend, s
}

func (d *stateDesc) now(s *stateScope) int64 { return s.ctx.ProcessingTime() }

func (d *stateDesc) expired(s *stateScope, ts int64) bool {
	return d.now(s)-ts >= d.ttl.TTL.Milliseconds()
}

// visible reports whether an entry renewed at ts may be read.
func (d *stateDesc) visible(s *stateScope, ts int64) bool {
	return d.ttl.Visibility == ReturnExpiredIfNotCleanedUp || !d.expired(s, ts)
}

// cell is the storage of single-value states (Value, Reducing,
// Aggregating), with or without TTL.
type cell[S any] struct{ d *stateDesc }

// newCell declares the cell of state name of kind; without a TTL it holds
// its values indirectly (stateDesc.indirect), with the checkpoint format
// of S.
func newCell[S any](kind, name string, opts []StateOption) cell[S] {
	d := newDesc[S, ttlEntry[S]](kind, name, opts)
	if d.ttl == nil && d.codecErr == nil {
		d.indirect = true
		d.codec, d.codecErr = newConvCodec[S](d.typeName,
			func(v any) S { return *v.(*S) },
			func(v S) any { return &v })
	}
	return cell[S]{d: d}
}

func (c cell[S]) get(ctx StateContext) (S, bool) {
	b, s := c.d.access(ctx)
	// A mutable value may be changed by user code (an accumulator, a map)
	// before it is Put back.
	raw, ok := c.d.get(b, c.d.mutable)
	if !ok {
		var zero S
		return zero, false
	}
	if c.d.indirect {
		return *raw.(*S), true
	}
	if c.d.ttl == nil {
		return as[S](raw), true
	}
	e := raw.(ttlEntry[S])
	if !c.d.visible(s, e.Ts) {
		b.Delete(c.d.name)
		var zero S
		return zero, false
	}
	if c.d.ttl.UpdateType == OnReadAndWrite {
		b.Put(c.d.name, ttlEntry[S]{V: e.V, Ts: c.d.now(s)})
	}
	return e.V, true
}

func (c cell[S]) put(ctx StateContext, v S) {
	b, s := c.d.access(ctx)
	if c.d.indirect {
		// GetForUpdate copies a value a snapshot still reads first.
		if b.KeepsInPlaceUpdates() {
			if raw, ok := b.GetForUpdate(c.d.name); ok {
				*raw.(*S) = v
				return
			}
		}
		p := new(S) // not &v: v would move to the heap on every call
		*p = v
		b.Put(c.d.name, p)
		return
	}
	if c.d.ttl == nil {
		b.Put(c.d.name, v)
		return
	}
	b.Put(c.d.name, ttlEntry[S]{V: v, Ts: c.d.now(s)})
}

func (c cell[S]) clear(ctx StateContext) {
	b, _ := c.d.access(ctx)
	b.Delete(c.d.name)
}

// ValueState is a single value per key, declared by name when building the
// job and read and written through the KeyedContext of the current record:
//
//	count := stream.NewValueState[int]("count")
//	... n, _ := count.Value(ctx); count.Update(ctx, n+1)
//
// State names must be unique per operator. A state's type is part of its
// checkpoint: restoring it declared with another type (or kind, or with a
// TTL added or removed) fails the operator with runtime.ErrIncompatibleState.
type ValueState[V any] struct{ c cell[V] }

// NewValueState declares a value state.
func NewValueState[V any](name string, opts ...StateOption) ValueState[V] {
	return ValueState[V]{c: newCell[V]("ValueState", name, opts)}
}

// Value is the current key's value and whether it is set.
func (s ValueState[V]) Value(ctx StateContext) (V, bool) { return s.c.get(ctx) }

// Update sets the current key's value.
func (s ValueState[V]) Update(ctx StateContext, v V) { s.c.put(ctx, v) }

// Clear removes the current key's value.
func (s ValueState[V]) Clear(ctx StateContext) { s.c.clear(ctx) }

// ReducingState keeps, per key, the reduction of the values added (Flink's
// ReducingState).
type ReducingState[T any] struct {
	c  cell[T]
	fn func(a, b T) T
}

// NewReducingState declares a reducing state.
func NewReducingState[T any](name string, reduce func(a, b T) T, opts ...StateOption) ReducingState[T] {
	return ReducingState[T]{c: newCell[T]("ReducingState", name, opts), fn: reduce}
}

// Get is the current key's reduction and whether any value was added.
func (s ReducingState[T]) Get(ctx StateContext) (T, bool) { return s.c.get(ctx) }

// Add reduces v into the current key's value.
func (s ReducingState[T]) Add(ctx StateContext, v T) {
	if old, ok := s.c.get(ctx); ok {
		v = s.fn(old, v)
	}
	s.c.put(ctx, v)
}

// Clear removes the current key's value.
func (s ReducingState[T]) Clear(ctx StateContext) { s.c.clear(ctx) }

// AggregatingState keeps, per key, an accumulator of the values added and
// reads its result (Flink's AggregatingState).
type AggregatingState[IN, ACC, OUT any] struct {
	c   cell[ACC]
	agg AggregateFunction[IN, ACC, OUT]
}

// NewAggregatingState declares an aggregating state; its checkpointed type
// is the accumulator.
func NewAggregatingState[IN, ACC, OUT any](name string, agg AggregateFunction[IN, ACC, OUT], opts ...StateOption) AggregatingState[IN, ACC, OUT] {
	return AggregatingState[IN, ACC, OUT]{c: newCell[ACC]("AggregatingState", name, opts), agg: agg}
}

// Get is the current key's result and whether any value was added.
func (s AggregatingState[IN, ACC, OUT]) Get(ctx StateContext) (OUT, bool) {
	acc, ok := s.c.get(ctx)
	if !ok {
		var zero OUT
		return zero, false
	}
	return s.agg.GetResult(acc), true
}

// Add adds v to the current key's accumulator.
func (s AggregatingState[IN, ACC, OUT]) Add(ctx StateContext, v IN) {
	acc, ok := s.c.get(ctx)
	if !ok {
		acc = s.agg.CreateAccumulator()
	}
	s.c.put(ctx, s.agg.Add(v, acc))
}

// Clear removes the current key's accumulator.
func (s AggregatingState[IN, ACC, OUT]) Clear(ctx StateContext) { s.c.clear(ctx) }

// ListState is a list of values per key (Flink's ListState). With a TTL
// each element expires on its own.
type ListState[T any] struct{ d *stateDesc }

// NewListState declares a list state.
func NewListState[T any](name string, opts ...StateOption) ListState[T] {
	d := newDesc[[]T, []ttlEntry[T]]("ListState", name, opts)
	// The list itself is only appended to (which leaves a snapshotted
	// prefix alone) or compacted for TTL (taken for update then); its
	// elements may be changed by user code.
	d.mutable = mayAlias(reflect.TypeFor[T]())
	return ListState[T]{d: d}
}

// Get returns a copy of the current key's elements (nil when empty).
func (s ListState[T]) Get(ctx StateContext) []T {
	b, sc := s.d.access(ctx)
	// With a TTL the list is compacted in place below.
	raw, ok := s.d.get(b, s.d.mutable || s.d.ttl != nil)
	if !ok {
		return nil
	}
	if s.d.ttl == nil {
		return append([]T(nil), raw.([]T)...)
	}
	es := raw.([]ttlEntry[T])
	var out []T
	keep := es[:0]
	for _, e := range es {
		if !s.d.visible(sc, e.Ts) {
			continue
		}
		if s.d.ttl.UpdateType == OnReadAndWrite {
			e.Ts = s.d.now(sc)
		}
		out = append(out, e.V)
		keep = append(keep, e)
	}
	s.store(b, keep)
	return out
}

func (s ListState[T]) store(b *runtime.KeyedStateBackend, es []ttlEntry[T]) {
	if len(es) == 0 {
		b.Delete(s.d.name)
	} else {
		b.Put(s.d.name, es)
	}
}

// Add appends v to the current key's list.
func (s ListState[T]) Add(ctx StateContext, v T) { s.AddAll(ctx, []T{v}) }

// AddAll appends vs to the current key's list.
func (s ListState[T]) AddAll(ctx StateContext, vs []T) {
	if len(vs) == 0 {
		return
	}
	b, sc := s.d.access(ctx)
	raw, _ := b.Get(s.d.name)
	if s.d.ttl == nil {
		l, _ := raw.([]T)
		b.Put(s.d.name, append(l, vs...))
		return
	}
	es, _ := raw.([]ttlEntry[T])
	now := s.d.now(sc)
	for _, v := range vs {
		es = append(es, ttlEntry[T]{V: v, Ts: now})
	}
	b.Put(s.d.name, es)
}

// Update replaces the current key's list with vs.
func (s ListState[T]) Update(ctx StateContext, vs []T) {
	s.Clear(ctx)
	s.AddAll(ctx, vs)
}

// Clear empties the current key's list.
func (s ListState[T]) Clear(ctx StateContext) {
	b, _ := s.d.access(ctx)
	b.Delete(s.d.name)
}

// MapState is a map per key (Flink's MapState). With a TTL each entry
// expires on its own.
type MapState[K comparable, V any] struct{ d *stateDesc }

// NewMapState declares a map state.
func NewMapState[K comparable, V any](name string, opts ...StateOption) MapState[K, V] {
	d := newDesc[map[K]V, map[K]ttlEntry[V]]("MapState", name, opts)
	// The map is changed in place by Put and Remove (taken for update
	// then); its values may be changed by user code.
	d.mutable = mayAlias(reflect.TypeFor[V]())
	return MapState[K, V]{d: d}
}

// entries returns the live map of the current key (nil when absent),
// dropping expired entries that must not be seen.
// update: to change the map (or its values) in place.
func (s MapState[K, V]) plain(ctx StateContext, create, update bool) map[K]V {
	b, _ := s.d.access(ctx)
	raw, ok := s.d.get(b, update)
	if !ok {
		if !create {
			return nil
		}
		m := map[K]V{}
		b.Put(s.d.name, m)
		return m
	}
	return raw.(map[K]V)
}

// withTTL takes the map for update: reads renew and drop entries too.
func (s MapState[K, V]) withTTL(ctx StateContext, create bool) (map[K]ttlEntry[V], *stateScope) {
	b, sc := s.d.access(ctx)
	raw, ok := b.GetForUpdate(s.d.name)
	if !ok {
		if !create {
			return nil, sc
		}
		m := map[K]ttlEntry[V]{}
		b.Put(s.d.name, m)
		return m, sc
	}
	return raw.(map[K]ttlEntry[V]), sc
}

// cleanup drops the current key's state once its map is empty.
func (s MapState[K, V]) cleanup(ctx StateContext, n int) {
	if n == 0 {
		b, _ := s.d.access(ctx)
		b.Delete(s.d.name)
	}
}

// Get is the value under k of the current key's map.
func (s MapState[K, V]) Get(ctx StateContext, k K) (V, bool) {
	if s.d.ttl == nil {
		v, ok := s.plain(ctx, false, s.d.mutable)[k]
		return v, ok
	}
	m, sc := s.withTTL(ctx, false)
	e, ok := m[k]
	if !ok {
		var zero V
		return zero, false
	}
	if !s.d.visible(sc, e.Ts) {
		delete(m, k)
		s.cleanup(ctx, len(m))
		var zero V
		return zero, false
	}
	if s.d.ttl.UpdateType == OnReadAndWrite {
		m[k] = ttlEntry[V]{V: e.V, Ts: s.d.now(sc)}
	}
	return e.V, true
}

// Put sets the value under k.
func (s MapState[K, V]) Put(ctx StateContext, k K, v V) {
	if s.d.ttl == nil {
		s.plain(ctx, true, true)[k] = v
		return
	}
	m, sc := s.withTTL(ctx, true)
	m[k] = ttlEntry[V]{V: v, Ts: s.d.now(sc)}
}

// PutAll sets every entry of kv.
func (s MapState[K, V]) PutAll(ctx StateContext, kv map[K]V) {
	for k, v := range kv {
		s.Put(ctx, k, v)
	}
}

// Remove deletes the value under k.
func (s MapState[K, V]) Remove(ctx StateContext, k K) {
	if s.d.ttl == nil {
		m := s.plain(ctx, false, true)
		delete(m, k)
		if m != nil {
			s.cleanup(ctx, len(m))
		}
		return
	}
	m, _ := s.withTTL(ctx, false)
	delete(m, k)
	if m != nil {
		s.cleanup(ctx, len(m))
	}
}

// Contains reports whether k has a value.
func (s MapState[K, V]) Contains(ctx StateContext, k K) bool {
	_, ok := s.Get(ctx, k)
	return ok
}

// Entries returns a copy of the current key's map.
func (s MapState[K, V]) Entries(ctx StateContext) map[K]V {
	if s.d.ttl == nil {
		m := s.plain(ctx, false, s.d.mutable)
		if m == nil {
			return nil
		}
		out := make(map[K]V, len(m))
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	m, sc := s.withTTL(ctx, false)
	if m == nil {
		return nil
	}
	out := make(map[K]V, len(m))
	now := s.d.now(sc)
	for k, e := range m {
		if !s.d.visible(sc, e.Ts) {
			delete(m, k)
			continue
		}
		if s.d.ttl.UpdateType == OnReadAndWrite {
			m[k] = ttlEntry[V]{V: e.V, Ts: now}
		}
		out[k] = e.V
	}
	s.cleanup(ctx, len(m))
	return out
}

// Keys returns the current key's map keys, in unspecified order.
func (s MapState[K, V]) Keys(ctx StateContext) []K {
	m := s.Entries(ctx)
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// Values returns the current key's map values, in unspecified order.
func (s MapState[K, V]) Values(ctx StateContext) []V {
	m := s.Entries(ctx)
	vals := make([]V, 0, len(m))
	for _, v := range m {
		vals = append(vals, v)
	}
	return vals
}

// IsEmpty reports whether the current key's map has no entries.
func (s MapState[K, V]) IsEmpty(ctx StateContext) bool { return len(s.Entries(ctx)) == 0 }

// Clear removes the current key's map.
func (s MapState[K, V]) Clear(ctx StateContext) {
	b, _ := s.d.access(ctx)
	b.Delete(s.d.name)
}

func typeOf[T any]() string {
	var p *T
	return fmt.Sprintf("%T", p)[1:]
}
