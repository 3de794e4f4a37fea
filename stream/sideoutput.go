package stream

import (
	"fmt"
	"reflect"

	"github.com/gofl/gofl/stream/codec"
	"github.com/gofl/gofl/stream/runtime"
)

// OutputTag names a side output of type T (Flink's OutputTag): an operator
// emits to it besides its main output (ProcessContext.Output, a window's
// SideOutputLateData), and GetSideOutput reads it as a stream.
type OutputTag[T any] struct {
	id string
}

// NewOutputTag returns the tag id for side outputs of type T. Ids are
// unique per operator.
func NewOutputTag[T any](id string) OutputTag[T] { return OutputTag[T]{id: id} }

// ID is the tag's name.
func (t OutputTag[T]) ID() string { return t.id }

// GetSideOutput is the side output tag of the operator that produced s
// (Flink's getSideOutput). It has the operator's parallelism; its setters
// configure that operator.
func GetSideOutput[T, X any](s DataStream[X], tag OutputTag[T]) DataStream[T] {
	if tag.id == "" {
		s.env.fail(fmt.Errorf("operator %q: side output with an empty OutputTag", s.n.name))
	}
	if s.side != nil {
		s.env.fail(fmt.Errorf("operator %q: GetSideOutput of side output %q", s.n.name, s.side.tag))
	}
	so := &sideOutput{tag: tag.id, typeName: reflect.TypeFor[T]().String()}
	if c, err := codec.For[T](); err != nil {
		so.codecErr = err
	} else {
		so.codec = valueCodec[T]{c: c, typ: so.typeName}
	}
	return DataStream[T]{env: s.env, n: s.n, side: so}
}

// emitSide collects v to side output tag of the operator with context ctx.
func emitSide(ctx *runtime.Context, tag string, v any, ts int64, hasTs bool) {
	ctx.SideOutput(tag).Collect(runtime.Record{Value: v, Timestamp: ts, HasTimestamp: hasTs})
}

// Output emits v to side output tag with the current record's timestamp
// (Flink's Context.output).
func Output[T any](ctx *ProcessContext, tag OutputTag[T], v T) {
	emitSide(ctx.rctx, tag.id, v, ctx.ts, ctx.hasTs)
}

// OutputKeyed emits v to side output tag from a KeyedProcessFunction, with
// the current record's or timer's timestamp.
func OutputKeyed[K comparable, T any](ctx *KeyedContext[K], tag OutputTag[T], v T) {
	emitSide(ctx.rctx, tag.id, v, ctx.ts, ctx.hasTs)
}
