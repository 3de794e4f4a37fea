package stream

import (
	"fmt"
	"unsafe"

	"github.com/gofl/gofl/stream/codec"
)

// boxSlab is how many decoded values share one allocation. A value kept
// long after decoding (in state or a window) keeps its slab's other values'
// memory alive too, so the slab stays small: it bounds that overhead at
// boxSlab times the value's size, while saving all but one allocation in
// boxSlab on the hot path.
const boxSlab = 32

// eface is the layout of an empty interface value (runtime.eface).
type eface struct {
	typ, data unsafe.Pointer
}

// slabBoxer boxes values of T into interfaces, boxSlab values per heap
// allocation instead of one each (what any(v) costs for a T that is not
// pointer-shaped). The interfaces are ordinary: v.(T) works, and the
// values must be treated as immutable, as every record value is. Not safe
// for concurrent use: one per decoding goroutine.
type slabBoxer[T any] struct {
	typ  unsafe.Pointer // T's type word
	slab []T
}

// newSlabBoxer returns nil when T is pointer-shaped or zero-sized, whose
// interfaces do not allocate or cannot point into a slab.
func newSlabBoxer[T any]() *slabBoxer[T] {
	var zero T
	boxed := any(zero)
	e := (*eface)(unsafe.Pointer(&boxed))
	// A pointer-shaped T's zero value is stored in the interface itself:
	// a nil data word. Other types point at a copy.
	if unsafe.Sizeof(zero) == 0 || e.data == nil {
		return nil
	}
	return &slabBoxer[T]{typ: e.typ}
}

func (b *slabBoxer[T]) box(v T) any {
	if len(b.slab) == cap(b.slab) {
		b.slab = make([]T, 0, boxSlab)
	}
	b.slab = append(b.slab, v)
	var boxed any
	*(*eface)(unsafe.Pointer(&boxed)) = eface{typ: b.typ, data: unsafe.Pointer(&b.slab[len(b.slab)-1])}
	return boxed
}

// boxer boxes the values an operator emits, many per allocation where T
// allows (slabBoxer); its zero value is ready, and it belongs to one
// operator instance (one goroutine).
type boxer[T any] struct {
	slab *slabBoxer[T]
	set  bool
}

func (b *boxer[T]) of(v T) any {
	if !b.set {
		b.slab, b.set = newSlabBoxer[T](), true
	}
	if b.slab == nil {
		return v
	}
	return b.slab.box(v)
}

// newDecoder returns a decoding function for one goroutine: Decode, with
// the values boxed by a slabBoxer.
func (c valueCodec[T]) newDecoder() func(src []byte) (any, error) {
	b := newSlabBoxer[T]()
	if b == nil {
		return c.Decode
	}
	return func(src []byte) (any, error) {
		v, n, err := c.c.Decode(src)
		if err != nil {
			return nil, err
		}
		if n != len(src) {
			return nil, fmt.Errorf("%w: %d trailing bytes after a %s", codec.ErrCorrupt, len(src)-n, c.typ)
		}
		return b.box(v), nil
	}
}

// decoderFor returns c's per-goroutine decoding function (newDecoder) when
// it has one, else c.Decode.
func decoderFor(c interface{ Decode([]byte) (any, error) }) func([]byte) (any, error) {
	if c == nil {
		return nil
	}
	if d, ok := c.(interface {
		newDecoder() func([]byte) (any, error)
	}); ok {
		return d.newDecoder()
	}
	return c.Decode
}
