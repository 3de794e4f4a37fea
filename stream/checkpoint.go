package stream

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/gofl/gofl/stream/codec"
	"github.com/gofl/gofl/stream/runtime"
)

// ErrNoStateCodec is a checkpoint of state whose type has no codec.
var ErrNoStateCodec = errors.New("stream: state type cannot be serialized")

// codecOf is T's runtime codec named typeName (T's Go type when empty), or
// why there is none. The error only matters once the job checkpoints.
func codecOf[T any](typeName string) (runtime.Codec, error) {
	if typeName == "" {
		typeName = reflect.TypeFor[T]().String()
	}
	c, err := codec.For[T]()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNoStateCodec, typeName, err)
	}
	return valueCodec[T]{c: c, typ: typeName}, nil
}

// convCodec encodes values held as another Go type (a pointer, an `any`
// accumulator) through their serializable form X.
type convCodec[X any] struct {
	c    codec.Codec[X]
	to   func(any) X
	from func(X) any
	typ  string
}

func newConvCodec[X any](typeName string, to func(any) X, from func(X) any) (runtime.Codec, error) {
	c, err := codec.For[X]()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrNoStateCodec, typeName, err)
	}
	return convCodec[X]{c: c, to: to, from: from, typ: typeName}, nil
}

func (c convCodec[X]) Append(dst []byte, v any) ([]byte, error) { return c.c.Append(dst, c.to(v)), nil }

func (c convCodec[X]) Decode(src []byte) (any, error) {
	x, n, err := c.c.Decode(src)
	if err != nil {
		return nil, err
	}
	if n != len(src) {
		return nil, fmt.Errorf("%w: %d trailing bytes after a %s", codec.ErrCorrupt, len(src)-n, c.typ)
	}
	return c.from(x), nil
}

func (c convCodec[X]) TypeName() string { return c.typ }

// nilCodec is the namespace codec of timers without a namespace.
type nilCodec struct{}

func (nilCodec) Append(dst []byte, _ any) ([]byte, error) { return dst, nil }
func (nilCodec) Decode([]byte) (any, error)               { return nil, nil }
func (nilCodec) TypeName() string                         { return "void" }

// stringNsCodec is the namespace codec of timers namespaced by a string.
var stringNsCodec = valueCodec[string]{c: codec.String, typ: "string"}

// windowNsCodec is the namespace codec of window timers.
var windowNsCodec = valueCodec[TimeWindow]{c: codec.MustFor[TimeWindow](), typ: "TimeWindow"}

// keyCodecOf is K's codec for keyed state and timers, or why there is none.
func keyCodecOf[K any]() keyCodec {
	c, err := codecOf[K]("")
	return keyCodec{c: c, err: err}
}

type keyCodec struct {
	c   runtime.Codec
	err error
}

// need returns the codec, or an error naming op when the job checkpoints
// or restores and there is none.
func (k keyCodec) need(ctx *runtime.Context) error {
	if k.c == nil && (ctx.Checkpointing || ctx.Restore != nil) {
		return fmt.Errorf("operator %q: keys cannot be checkpointed: %w", ctx.OperatorName, k.err)
	}
	return nil
}

// checkType fails with runtime.ErrIncompatibleState when the restored state
// name was written as another type.
func checkType(ctx *runtime.Context, name, typeName string) error {
	return ctx.Restore.CheckType(name, typeName)
}

// stateFailure unwinds the task from a state access that cannot return an
// error (keyed state handles have Flink's error-free signatures); RunTask
// reports it as the operator's failure.
func stateFailure(ctx *runtime.Context, err error) *runtime.OperatorError {
	return &runtime.OperatorError{Task: ctx.TaskName, Subtask: ctx.SubtaskIndex, Operator: ctx.OperatorName, OperatorID: ctx.OperatorID, Err: err}
}
