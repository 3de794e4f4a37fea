package stream

import (
	"fmt"
	"reflect"

	"github.com/gofl/gofl/stream/codec"
	"github.com/gofl/gofl/stream/runtime"
)

// valueCodec adapts a typed codec.Codec[T] to the runtime's untyped
// records.
type valueCodec[T any] struct {
	c   codec.Codec[T]
	typ string
}

func (c valueCodec[T]) Append(dst []byte, v any) ([]byte, error) {
	t, ok := v.(T)
	if !ok && v != nil {
		return dst, fmt.Errorf("record of type %T on an exchange of %s", v, c.typ)
	}
	return c.c.Append(dst, t), nil
}

func (c valueCodec[T]) Decode(src []byte) (any, error) {
	v, n, err := c.c.Decode(src)
	if err != nil {
		return nil, err
	}
	if n != len(src) {
		return nil, fmt.Errorf("%w: %d trailing bytes after a %s", codec.ErrCorrupt, len(src)-n, c.typ)
	}
	return v, nil
}

func (c valueCodec[T]) TypeName() string { return c.typ }

// setCodec captures the codec of the records node n emits: T's derived
// codec, or the reason there is none, reported by Plan only if the stream
// crosses an exchange (records between chained operators are never
// serialized).
func setCodec[T any](n *node) {
	n.typeName = reflect.TypeFor[T]().String()
	c, err := codec.For[T]()
	if err != nil {
		n.codecErr = err
		return
	}
	n.codec = valueCodec[T]{c: c, typ: n.typeName}
}

// exchangeCodec is the codec of the records from node from, or a plan
// error naming the operator and the type.
func exchangeCodec(in streamEdge, to *node) (runtime.Codec, error) {
	from := in.from
	c, cerr, typ := from.codec, from.codecErr, from.typeName
	if in.side != nil {
		c, cerr, typ = in.side.codec, in.side.codecErr, in.side.typeName
	}
	if c == nil {
		err := cerr
		if err == nil {
			err = fmt.Errorf("no codec")
		}
		return nil, fmt.Errorf("operator %q sends records of type %s to %q over an exchange, but they cannot be serialized: %w",
			from.name, typ, to.name, err)
	}
	return c, nil
}
