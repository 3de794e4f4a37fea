package stream

import (
	"fmt"

	"github.com/gofl/gofl/stream/runtime"
)

type chainingStrategy int

const (
	chainAlways chainingStrategy = iota // chains with its input and its outputs
	chainHead                           // starts a new chain; outputs may chain
	chainNever                          // never chains
)

// partitioning is how records travel from one operator to the next.
type partitioning struct {
	kind  string // "" (forward if parallelism matches, else rebalance), forward, hash, rebalance, broadcast
	keyOf func(any) any
	// hashOf is HashKey(keyOf(v)) without boxing the key (hash partitioning).
	hashOf func(any) uint64
}

type streamEdge struct {
	from  *node
	input int // logical input of the target (0, or 1 for the second input)
	part  partitioning
	// side, when set, is the side output of from that the edge carries.
	side *sideOutput
}

// sideOutput is a side output of a node: its tag and the codec of its
// records.
type sideOutput struct {
	tag      string
	codec    runtime.Codec
	codecErr error
	typeName string
}

// node is one operator of the stream graph.
type node struct {
	id             int
	kind           string
	name           string
	uid            string
	parallelism    int // 0: the environment's
	maxParallelism int // 0: the environment's, else derived
	slotSharing    string
	chaining       chainingStrategy
	inputs         []streamEdge
	params         map[string]any
	newOperator    func() runtime.Operator
	newSource      func() runtime.Source
	bounded        bool
	source         bool
	// coordinator and coordinatorConfig name the operator coordinator the
	// JobMaster runs for a source (FromSource of a CoordinatedSource).
	coordinator       string
	coordinatorConfig []byte
	// combiner, set on a keyed reduce in Batch mode, pre-aggregates its
	// input on the producers' side of the exchange (runtime.Combiner).
	combiner func() runtime.Combiner
	// codec serializes the node's output records (see setCodec).
	codec    runtime.Codec
	codecErr error
	typeName string
}

// DataStream is a stream of T produced by one operator. Its setters
// (Name, SetParallelism, ...) configure that operator and return the stream.
type DataStream[T any] struct {
	env  *Environment
	n    *node
	part partitioning
	// side is set on a side output stream (GetSideOutput): n is then the
	// operator that produces it, and the setters configure that operator.
	side *sideOutput
}

// Env is the stream's environment.
func (s DataStream[T]) Env() *Environment { return s.env }

// Name names the operator (shown in the JobGraph, used in errors).
func (s DataStream[T]) Name(name string) DataStream[T] { s.n.name = name; return s }

// Uid fixes the operator's ID independently of its position in the graph.
func (s DataStream[T]) Uid(uid string) DataStream[T] { s.n.uid = uid; return s }

// SetParallelism sets the operator's parallelism.
func (s DataStream[T]) SetParallelism(n int) DataStream[T] {
	if n < 1 {
		s.env.fail(fmt.Errorf("operator %q: parallelism %d must be at least 1", s.n.name, n))
		return s
	}
	s.n.parallelism = n
	return s
}

// SetMaxParallelism sets the operator's max parallelism (its number of key
// groups when keyed).
func (s DataStream[T]) SetMaxParallelism(n int) DataStream[T] { s.n.maxParallelism = n; return s }

// SlotSharingGroup puts the operator into a slot sharing group. Operators
// that set none inherit their inputs' group when all inputs agree, else
// "default", as in Flink.
func (s DataStream[T]) SlotSharingGroup(g string) DataStream[T] { s.n.slotSharing = g; return s }

// DisableChaining keeps the operator out of any chain.
func (s DataStream[T]) DisableChaining() DataStream[T] { s.n.chaining = chainNever; return s }

// StartNewChain starts a new chain at the operator.
func (s DataStream[T]) StartNewChain() DataStream[T] { s.n.chaining = chainHead; return s }

// Rebalance distributes records round-robin to the next operator.
func (s DataStream[T]) Rebalance() DataStream[T] { s.part = partitioning{kind: "rebalance"}; return s }

// Broadcast sends every record to every subtask of the next operator.
func (s DataStream[T]) Broadcast() DataStream[T] { s.part = partitioning{kind: "broadcast"}; return s }

// Forward sends subtask i's records to subtask i of the next operator,
// which must have the same parallelism.
func (s DataStream[T]) Forward() DataStream[T] { s.part = partitioning{kind: "forward"}; return s }

// Collector receives the results of a function that emits any number.
type Collector[T any] interface {
	Collect(v T)
}

type collector[T any] struct {
	out   runtime.Output
	ts    int64
	hasTs bool
	emit  emitter[T]
}

// reset points c at the output and timestamp of the next input, and
// returns the Collector the user's function gets for it: c, or, when the
// output feeds a combiner that takes T values, the combiner itself (one
// call per value less; combiners drop timestamps).
func (c *collector[T]) reset(out runtime.Output, ts int64, hasTs bool) Collector[T] {
	c.out, c.ts, c.hasTs = out, ts, hasTs
	if d := c.emit.directTo(out); d != nil {
		return c.emit.into
	}
	return c
}

func (c *collector[T]) Collect(v T) { c.emit.emit(c.out, v, c.ts, c.hasTs) }

// emitter emits an operator's values of T: as boxed records, or straight
// into the combiner the output feeds when it takes T values (no Record,
// no boxing). Its zero value is ready; it belongs to one operator
// instance.
type emitter[T any] struct {
	box    boxer[T]
	direct *runtime.DirectCombiner // the last one seen, into resolved for it
	// into is direct's combiner as a Collector of T (values go in as its
	// running operator); nil when it does not take T values.
	into Collector[T]
}

// typedCombiner is a combiner that takes values of T directly.
type typedCombiner[T any] interface {
	// collector returns a Collector that hands each value to the
	// combiner as d's running operator (d is the combiner's).
	collector(d *runtime.DirectCombiner) Collector[T]
}

// directTo returns the combiner out feeds if it takes T values, else nil.
func (e *emitter[T]) directTo(out runtime.Output) *runtime.DirectCombiner {
	d := runtime.DirectCombinerOf(out)
	if d == nil {
		return nil
	}
	if d != e.direct {
		e.direct, e.into = d, nil
		if tc, ok := d.Combiner.(typedCombiner[T]); ok {
			e.into = tc.collector(d)
		}
	}
	if e.into == nil {
		return nil
	}
	return d
}

func (e *emitter[T]) emit(out runtime.Output, v T, ts int64, hasTs bool) {
	if d := e.directTo(out); d != nil {
		e.into.Collect(v)
		return
	}
	out.Collect(runtime.Record{Value: e.box.of(v), Timestamp: ts, HasTimestamp: hasTs})
}

// as converts a record value back to T (a nil interface value becomes T's
// zero value).
func as[T any](v any) T {
	t, _ := v.(T)
	return t
}

func edgeOf[T any](s DataStream[T], input int) streamEdge {
	return streamEdge{from: s.n, input: input, part: s.part, side: s.side}
}

func oneInput[T, U any](s DataStream[T], kind, name string, newOp func() runtime.Operator) DataStream[U] {
	n := s.env.newNode(kind, name)
	n.newOperator = newOp
	n.inputs = []streamEdge{edgeOf(s, 0)}
	setCodec[U](n)
	return DataStream[U]{env: s.env, n: n}
}

// Map applies fn to every record.
func Map[T, U any](s DataStream[T], fn func(T) U) DataStream[U] {
	return oneInput[T, U](s, "map", "Map", func() runtime.Operator { return &mapOp[T, U]{fn: fn} })
}

// FlatMap calls fn for every record; fn emits any number of results.
func FlatMap[T, U any](s DataStream[T], fn func(T, Collector[U]) error) DataStream[U] {
	return oneInput[T, U](s, "flatmap", "FlatMap", func() runtime.Operator { return &flatMapOp[T, U]{fn: fn} })
}

// Filter keeps the records for which fn is true.
func Filter[T any](s DataStream[T], fn func(T) bool) DataStream[T] {
	return oneInput[T, T](s, "filter", "Filter", func() runtime.Operator { return &filterOp[T]{fn: fn} })
}

// Process calls fn for every record with a ProcessContext (its timestamp,
// the subtask); fn emits any number of results.
func Process[T, U any](s DataStream[T], fn func(ctx *ProcessContext, v T, out Collector[U]) error) DataStream[U] {
	return oneInput[T, U](s, "process", "Process", func() runtime.Operator { return &processOp[T, U]{fn: fn} })
}

// ProcessContext is what Process sees of the current record and subtask.
type ProcessContext struct {
	ts    int64
	hasTs bool
	rctx  *runtime.Context
}

// Timestamp is the record's event timestamp, if it has one.
func (c *ProcessContext) Timestamp() (int64, bool) { return c.ts, c.hasTs }

// SubtaskIndex is the index of the running subtask.
func (c *ProcessContext) SubtaskIndex() int { return c.rctx.SubtaskIndex }

// Parallelism is the operator's parallelism.
func (c *ProcessContext) Parallelism() int { return c.rctx.Parallelism }

// ProcessingTime is the clock in milliseconds.
func (c *ProcessContext) ProcessingTime() int64 { return c.rctx.ProcessingTime() }

// MetricGroup is the operator's user metric group.
func (c *ProcessContext) MetricGroup() MetricGroup { return c.rctx.Metrics }

// Union merges streams of the same type. Records of one input keep their
// order; inputs interleave arbitrarily.
func Union[T any](streams ...DataStream[T]) DataStream[T] {
	if len(streams) == 0 {
		panic("stream.Union needs at least one stream")
	}
	env := streams[0].env
	n := env.newNode("union", "Union")
	n.newOperator = func() runtime.Operator { return &unionOp{} }
	for _, s := range streams {
		if s.env != env {
			env.fail(fmt.Errorf("Union of streams from different environments"))
		}
		n.inputs = append(n.inputs, edgeOf(s, 0))
	}
	setCodec[T](n)
	return DataStream[T]{env: env, n: n}
}

// KeyedStream is a stream partitioned by key: records with equal keys go to
// the same subtask of the next operator, whose state and timers are scoped
// to the key.
type KeyedStream[T any, K comparable] struct {
	DataStream[T]
	key func(T) K
}

// KeyBy partitions s by key. The key's key group is HashKey(key) mod the
// next operator's max parallelism; keys must hash the same in every process
// (strings, numbers, booleans, and arrays and structs of them).
func KeyBy[T any, K comparable](s DataStream[T], key func(T) K) KeyedStream[T, K] {
	hash := runtime.KeyHasher[K]()
	s.part = partitioning{kind: "hash", keyOf: func(v any) any { return key(as[T](v)) },
		hashOf: func(v any) uint64 { return hash(key(as[T](v))) }}
	return KeyedStream[T, K]{DataStream: s, key: key}
}

// Reduce keeps a running reduction per key and emits it after every record
// (in Batch mode only the final value per key). fn must be associative, as
// Flink's ReduceFunction: in Batch mode the producers of the keyed stream
// reduce their records per key before the exchange (a combiner), and the
// Reduce operator reduces those partial results in a hash table bounded
// by the slot's managed memory, spilling sorted runs past it.
func (k KeyedStream[T, K]) Reduce(fn func(a, b T) T) DataStream[T] {
	batch := k.env.mode == Batch
	key := k.key
	running := newRunning[K, T]()
	out := oneInput[T, T](k.DataStream, "keyed-reduce", "Reduce", func() runtime.Operator {
		if batch {
			return newHashAggOp(key, reduceFuncs(fn))
		}
		return &keyedReduceOp[T, K]{runningOp: running, key: key, fn: fn}
	})
	if batch {
		out.n.combiner = func() runtime.Combiner { return newReduceCombiner(key, fn) }
	}
	return out
}

// AggregateFunction folds values into an accumulator, as Flink's.
type AggregateFunction[T, ACC, OUT any] interface {
	CreateAccumulator() ACC
	Add(v T, acc ACC) ACC
	GetResult(acc ACC) OUT
}

// Aggregator is an AggregateFunction made of functions.
type Aggregator[T, ACC, OUT any] struct {
	Create func() ACC
	Add_   func(v T, acc ACC) ACC
	Result func(acc ACC) OUT
	// MergeFn, optional, merges two accumulators (session windows need
	// it); see WithMerge.
	MergeFn func(a, b ACC) ACC
}

// WithMerge sets the function that merges two accumulators, which makes
// the Aggregator a MergingAggregateFunction for session windows.
func (a Aggregator[T, ACC, OUT]) WithMerge(merge func(a, b ACC) ACC) Aggregator[T, ACC, OUT] {
	a.MergeFn = merge
	return a
}

// Merge implements MergingAggregateFunction; it panics when MergeFn is
// nil (the window operator checks before it calls).
func (a Aggregator[T, ACC, OUT]) Merge(x, y ACC) ACC { return a.MergeFn(x, y) }

// NewAggregator returns an AggregateFunction from three functions.
func NewAggregator[T, ACC, OUT any](create func() ACC, add func(T, ACC) ACC, result func(ACC) OUT) Aggregator[T, ACC, OUT] {
	return Aggregator[T, ACC, OUT]{Create: create, Add_: add, Result: result}
}

// CreateAccumulator implements AggregateFunction.
func (a Aggregator[T, ACC, OUT]) CreateAccumulator() ACC { return a.Create() }

// Add implements AggregateFunction.
func (a Aggregator[T, ACC, OUT]) Add(v T, acc ACC) ACC { return a.Add_(v, acc) }

// GetResult implements AggregateFunction.
func (a Aggregator[T, ACC, OUT]) GetResult(acc ACC) OUT { return a.Result(acc) }

// Aggregate keeps a running aggregate per key and emits its result after
// every record (in Batch mode only the final result per key, from a hash
// table bounded by the slot's managed memory that spills past it; see
// hashAggOp).
func Aggregate[T any, K comparable, ACC, OUT any](k KeyedStream[T, K], agg AggregateFunction[T, ACC, OUT]) DataStream[OUT] {
	batch := k.env.mode == Batch
	key := k.key
	running := newRunning[K, ACC]()
	return oneInput[T, OUT](k.DataStream, "keyed-aggregate", "Aggregate", func() runtime.Operator {
		if batch {
			return newHashAggOp(key, aggregateFuncs(agg))
		}
		return &keyedAggregateOp[T, K, ACC, OUT]{runningOp: running, key: key, agg: agg}
	})
}

// KeyedProcessFunction handles the records of a keyed stream with keyed
// state and timers. OnTimer may be nil when no timers are registered.
//
// Open and Close, optional, make it a rich function: Open runs before the
// first record (with the subtask's RuntimeContext), Close after the last
// or after a failure, once Open has run.
type KeyedProcessFunction[K comparable, T, O any] struct {
	ProcessElement func(ctx *KeyedContext[K], v T, out Collector[O]) error
	OnTimer        func(ctx *KeyedContext[K], ts int64, out Collector[O]) error
	Open           func(ctx *RuntimeContext) error
	Close          func() error
}

// KeyedProcess runs fn on a keyed stream.
func KeyedProcess[T any, K comparable, O any](k KeyedStream[T, K], fn KeyedProcessFunction[K, T, O]) DataStream[O] {
	key := k.key
	keys := keyCodecOf[K]()
	return oneInput[T, O](k.DataStream, "keyed-process", "KeyedProcess", func() runtime.Operator {
		return &keyedProcessOp[T, K, O]{keyed: keyed{keys: keys}, key: key, fn: fn}
	})
}

// AssignTimestampsAndWatermarks sets each record's event timestamp and
// generates watermarks with strategy.
func (s DataStream[T]) AssignTimestampsAndWatermarks(strategy WatermarkStrategy[T]) DataStream[T] {
	batch := s.env.mode == Batch
	out := oneInput[T, T](s, "timestamps-watermarks", "Timestamps/Watermarks", func() runtime.Operator {
		return &watermarkOp[T]{s: strategy, batch: batch}
	})
	out.n.params["outOfOrderness_ms"] = strategy.bound.Milliseconds()
	out.n.params["interval_ms"] = strategy.interval.Milliseconds()
	return out
}

// tag is the side output the edge carries, "" for the main output.
func (e streamEdge) tag() string {
	if e.side == nil {
		return ""
	}
	return e.side.tag
}
