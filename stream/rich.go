package stream

import (
	"fmt"

	"github.com/gofl/gofl/stream/runtime"
)

// MetricGroup registers user metrics (Flink's MetricGroup); see
// RuntimeContext.MetricGroup.
type MetricGroup = runtime.MetricGroup

// Counter is a user counter metric.
type Counter = runtime.Counter

// Histogram is a user histogram metric.
type Histogram = runtime.Histogram

// LocalMetrics is an in-memory MetricGroup (see WithMetrics).
type LocalMetrics = runtime.LocalMetrics

// NewLocalMetrics returns an empty in-memory MetricGroup whose Snapshot
// reads every metric registered in it.
func NewLocalMetrics() *LocalMetrics { return runtime.NewLocalMetrics() }

// RuntimeContext is what a rich function sees of its subtask in Open
// (Flink's RuntimeContext): its index, the parallelism, its user metric
// group and its operator state.
type RuntimeContext = FunctionContext

// MaxParallelism is the operator's max parallelism (its key groups).
func (c *FunctionContext) MaxParallelism() int { return c.rctx.MaxParallelism }

// TaskName is the name of the subtask's task (its chain).
func (c *FunctionContext) TaskName() string { return c.rctx.TaskName }

// MetricGroup is the operator's user metric group.
func (c *FunctionContext) MetricGroup() MetricGroup {
	if c.rctx.Metrics == nil {
		c.rctx.Metrics = runtime.NewLocalMetrics()
	}
	return c.rctx.Metrics
}

// RichFunction is a function with a lifecycle (Flink's RichFunction). The
// function of each subtask is created by the factory given to the
// operator; Open runs before its first record, Close after its last or
// after a failure (once Open has run), both on the subtask's goroutine.
type RichFunction interface {
	Open(ctx *RuntimeContext) error
	Close() error
}

// lifecycle opens and closes a function that may be a RichFunction.
type lifecycle struct {
	fn     any
	opened bool
}

func (l *lifecycle) open(ctx *runtime.Context, store *OperatorStateStore) error {
	r, ok := l.fn.(RichFunction)
	if !ok {
		return nil
	}
	if store == nil {
		store = &OperatorStateStore{ctx: ctx}
	}
	l.opened = true
	if err := r.Open(&FunctionContext{rctx: ctx, store: store}); err != nil {
		return fmt.Errorf("operator %q: opening the function: %w", ctx.OperatorName, err)
	}
	return nil
}

func (l *lifecycle) close() error {
	if r, ok := l.fn.(RichFunction); ok && l.opened {
		l.opened = false
		return r.Close()
	}
	return nil
}

// MapFunction maps one record (Flink's MapFunction); implement
// RichFunction too for a lifecycle.
type MapFunction[T, U any] interface {
	Map(v T) (U, error)
}

// FlatMapFunction emits any number of results per record.
type FlatMapFunction[T, U any] interface {
	FlatMap(v T, out Collector[U]) error
}

// FilterFunction keeps the records for which Filter is true.
type FilterFunction[T any] interface {
	Filter(v T) (bool, error)
}

// ProcessFunction handles the records of a non-keyed stream with a
// context: timestamp, subtask, side outputs (Flink's ProcessFunction).
type ProcessFunction[T, U any] interface {
	ProcessElement(ctx *ProcessContext, v T, out Collector[U]) error
}

// richOp runs the function of one subtask between Open and Close.
type richOp[F any] struct {
	runtime.Base
	fn    F
	life  lifecycle
	store OperatorStateStore
}

func (o *richOp[F]) Open(ctx *runtime.Context) error {
	o.Ctx = ctx
	o.store = OperatorStateStore{ctx: ctx}
	o.life.fn = o.fn
	return o.life.open(ctx, &o.store)
}

func (o *richOp[F]) Close() error { return o.life.close() }

type richMapOp[T, U any] struct {
	richOp[MapFunction[T, U]]
	box boxer[U]
}

func (o *richMapOp[T, U]) ProcessElement(_ int, r runtime.Record) error {
	v, err := o.fn.Map(as[T](r.Value))
	if err != nil {
		return err
	}
	r.Value = o.box.of(v)
	o.Ctx.Output.Collect(r)
	return nil
}

// MapWith applies the function newFn creates per subtask to every record
// (Flink's map with a RichMapFunction).
func MapWith[T, U any](s DataStream[T], newFn func() MapFunction[T, U]) DataStream[U] {
	return oneInput[T, U](s, "map", "Map", func() runtime.Operator {
		return &richMapOp[T, U]{richOp: richOp[MapFunction[T, U]]{fn: newFn()}}
	})
}

type richFlatMapOp[T, U any] struct {
	richOp[FlatMapFunction[T, U]]
	out collector[U]
}

func (o *richFlatMapOp[T, U]) ProcessElement(_ int, r runtime.Record) error {
	out := o.out.reset(o.Ctx.Output, r.Timestamp, r.HasTimestamp)
	return o.fn.FlatMap(as[T](r.Value), out)
}

// FlatMapWith is FlatMap with a function per subtask (a
// RichFlatMapFunction).
func FlatMapWith[T, U any](s DataStream[T], newFn func() FlatMapFunction[T, U]) DataStream[U] {
	return oneInput[T, U](s, "flatmap", "FlatMap", func() runtime.Operator {
		return &richFlatMapOp[T, U]{richOp: richOp[FlatMapFunction[T, U]]{fn: newFn()}}
	})
}

type richFilterOp[T any] struct {
	richOp[FilterFunction[T]]
}

func (o *richFilterOp[T]) ProcessElement(_ int, r runtime.Record) error {
	keep, err := o.fn.Filter(as[T](r.Value))
	if err != nil {
		return err
	}
	if keep {
		o.Ctx.Output.Collect(r)
	}
	return nil
}

// FilterWith is Filter with a function per subtask (a RichFilterFunction).
func FilterWith[T any](s DataStream[T], newFn func() FilterFunction[T]) DataStream[T] {
	return oneInput[T, T](s, "filter", "Filter", func() runtime.Operator {
		return &richFilterOp[T]{richOp: richOp[FilterFunction[T]]{fn: newFn()}}
	})
}

type richProcessOp[T, U any] struct {
	richOp[ProcessFunction[T, U]]
	pctx ProcessContext
	out  collector[U]
}

func (o *richProcessOp[T, U]) ProcessElement(_ int, r runtime.Record) error {
	out := o.out.reset(o.Ctx.Output, r.Timestamp, r.HasTimestamp)
	o.pctx = ProcessContext{ts: r.Timestamp, hasTs: r.HasTimestamp, rctx: o.Ctx}
	return o.fn.ProcessElement(&o.pctx, as[T](r.Value), out)
}

// ProcessWith runs the ProcessFunction newFn creates per subtask on a
// non-keyed stream (Flink's process(ProcessFunction)); the function may be
// a RichFunction and emit to side outputs with Output.
func ProcessWith[T, U any](s DataStream[T], newFn func() ProcessFunction[T, U]) DataStream[U] {
	return oneInput[T, U](s, "process", "Process", func() runtime.Operator {
		return &richProcessOp[T, U]{richOp: richOp[ProcessFunction[T, U]]{fn: newFn()}}
	})
}
