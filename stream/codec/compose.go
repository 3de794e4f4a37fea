package codec

// Tuple2 is a pair of values, the Go counterpart of Flink's Tuple2. Its
// encoding is F0's followed by F1's, with no framing.
type Tuple2[A, B any] struct {
	F0 A
	F1 B
}

// Tuple3 is a triple of values, the Go counterpart of Flink's Tuple3.
type Tuple3[A, B, C any] struct {
	F0 A
	F1 B
	F2 C
}

// T2 returns Tuple2{a, b}.
func T2[A, B any](a A, b B) Tuple2[A, B] { return Tuple2[A, B]{a, b} }

// T3 returns Tuple3{a, b, c}.
func T3[A, B, C any](a A, b B, c C) Tuple3[A, B, C] { return Tuple3[A, B, C]{a, b, c} }

func mustCodec(name string, c any) {
	if c == nil {
		panic("codec: " + name + ": nil element codec")
	}
}

// decodeElem decodes one element from src[i:] with c and turns a failure
// into a *CorruptError located within the outer input.
func decodeElem[T any](c Codec[T], src []byte, i int, seg string) (T, int, error) {
	v, n, err := c.Decode(src[i:])
	if err != nil {
		var zero T
		return zero, i, rebase(err, i, seg)
	}
	if err := checkUsed(n, len(src)-i, i); err != nil {
		var zero T
		return zero, i, prependPath(err, seg)
	}
	return v, i + n, nil
}

// TupleCodec2 composes a codec for Tuple2[A, B] from element codecs. With
// the default element codecs it produces the same bytes as For.
func TupleCodec2[A, B any](ca Codec[A], cb Codec[B]) Codec[Tuple2[A, B]] {
	mustCodec("TupleCodec2", ca)
	mustCodec("TupleCodec2", cb)
	return tuple2Codec[A, B]{ca, cb}
}

type tuple2Codec[A, B any] struct {
	a Codec[A]
	b Codec[B]
}

func (c tuple2Codec[A, B]) Append(dst []byte, v Tuple2[A, B]) []byte {
	dst = c.a.Append(dst, v.F0)
	return c.b.Append(dst, v.F1)
}

func (c tuple2Codec[A, B]) Decode(src []byte) (v Tuple2[A, B], n int, err error) {
	if v.F0, n, err = decodeElem(c.a, src, 0, ".F0"); err != nil {
		return Tuple2[A, B]{}, 0, err
	}
	if v.F1, n, err = decodeElem(c.b, src, n, ".F1"); err != nil {
		return Tuple2[A, B]{}, 0, err
	}
	return v, n, nil
}

func (c tuple2Codec[A, B]) minSize() int { return minSizeOf(c.a) + minSizeOf(c.b) }

// TupleCodec3 composes a codec for Tuple3[A, B, C] from element codecs.
func TupleCodec3[A, B, C any](ca Codec[A], cb Codec[B], cc Codec[C]) Codec[Tuple3[A, B, C]] {
	mustCodec("TupleCodec3", ca)
	mustCodec("TupleCodec3", cb)
	mustCodec("TupleCodec3", cc)
	return tuple3Codec[A, B, C]{ca, cb, cc}
}

type tuple3Codec[A, B, C any] struct {
	a Codec[A]
	b Codec[B]
	c Codec[C]
}

func (c tuple3Codec[A, B, C]) Append(dst []byte, v Tuple3[A, B, C]) []byte {
	dst = c.a.Append(dst, v.F0)
	dst = c.b.Append(dst, v.F1)
	return c.c.Append(dst, v.F2)
}

func (c tuple3Codec[A, B, C]) Decode(src []byte) (v Tuple3[A, B, C], n int, err error) {
	if v.F0, n, err = decodeElem(c.a, src, 0, ".F0"); err != nil {
		return Tuple3[A, B, C]{}, 0, err
	}
	if v.F1, n, err = decodeElem(c.b, src, n, ".F1"); err != nil {
		return Tuple3[A, B, C]{}, 0, err
	}
	if v.F2, n, err = decodeElem(c.c, src, n, ".F2"); err != nil {
		return Tuple3[A, B, C]{}, 0, err
	}
	return v, n, nil
}

func (c tuple3Codec[A, B, C]) minSize() int {
	return minSizeOf(c.a) + minSizeOf(c.b) + minSizeOf(c.c)
}

// SliceOf returns a codec for []T: a uvarint element count followed by the
// elements. Empty and nil slices both decode as nil.
//
// When decoding, a claimed count is checked against the remaining input
// using the element codec's minimum encoded size (1 byte for codecs from
// outside this package), so an element codec whose encoding can be empty
// cannot be used with SliceOf beyond that many elements.
func SliceOf[T any](c Codec[T]) Codec[[]T] {
	mustCodec("SliceOf", c)
	return sliceCodec[T]{c, minSizeOf(c)}
}

type sliceCodec[T any] struct {
	c   Codec[T]
	min int
}

func (c sliceCodec[T]) Append(dst []byte, v []T) []byte {
	dst = appendUvarint(dst, uint64(len(v)))
	for i := range v {
		dst = c.c.Append(dst, v[i])
	}
	return dst
}

func (c sliceCodec[T]) Decode(src []byte) ([]T, int, error) {
	n, i, err := readLen(src, 0, c.min, "slice")
	if err != nil || n == 0 {
		return nil, i, err
	}
	s := make([]T, n)
	for k := range s {
		if s[k], i, err = decodeElem(c.c, src, i, "[]"); err != nil {
			return nil, 0, err
		}
	}
	return s, i, nil
}

func (c sliceCodec[T]) minSize() int { return 1 }

// MapOf returns a codec for map[K]V: a uvarint entry count followed by
// key, value pairs. Empty and nil maps both decode as nil.
//
// Entries are written in Go's map iteration order, which is randomized:
// the same map can encode to different bytes. Decoding does not care, but
// encoded bytes of map-bearing values must not be hashed or compared (for
// example to partition by key); keep maps out of key types.
func MapOf[K comparable, V any](ck Codec[K], cv Codec[V]) Codec[map[K]V] {
	mustCodec("MapOf", ck)
	mustCodec("MapOf", cv)
	return mapCodec[K, V]{ck, cv, minSizeOf(ck) + minSizeOf(cv)}
}

type mapCodec[K comparable, V any] struct {
	k   Codec[K]
	v   Codec[V]
	min int
}

func (c mapCodec[K, V]) Append(dst []byte, m map[K]V) []byte {
	dst = appendUvarint(dst, uint64(len(m)))
	for k, v := range m {
		dst = c.k.Append(dst, k)
		dst = c.v.Append(dst, v)
	}
	return dst
}

func (c mapCodec[K, V]) Decode(src []byte) (map[K]V, int, error) {
	n, i, err := readLen(src, 0, c.min, "map")
	if err != nil || n == 0 {
		return nil, i, err
	}
	m := make(map[K]V, n)
	for range n {
		var k K
		var v V
		if k, i, err = decodeElem(c.k, src, i, "[key]"); err != nil {
			return nil, 0, err
		}
		if v, i, err = decodeElem(c.v, src, i, "[value]"); err != nil {
			return nil, 0, err
		}
		m[k] = v
	}
	return m, i, nil
}

func (c mapCodec[K, V]) minSize() int { return 1 }

// Pointer returns a codec for *T, i.e. an optional T: one flag byte (0 for
// nil, 1 for present) followed by the value when present.
func Pointer[T any](c Codec[T]) Codec[*T] {
	mustCodec("Pointer", c)
	return ptrCodec[T]{c}
}

type ptrCodec[T any] struct{ c Codec[T] }

func (c ptrCodec[T]) Append(dst []byte, p *T) []byte {
	if p == nil {
		return append(dst, 0)
	}
	return c.c.Append(append(dst, 1), *p)
}

func (c ptrCodec[T]) Decode(src []byte) (*T, int, error) {
	if len(src) == 0 {
		return nil, 0, corrupt(0, "truncated pointer flag")
	}
	switch src[0] {
	case 0:
		return nil, 1, nil
	case 1:
		v, n, err := decodeElem(c.c, src, 1, "")
		if err != nil {
			return nil, 0, err
		}
		return &v, n, nil
	}
	return nil, 0, corrupt(0, "invalid pointer flag 0x%02x", src[0])
}

func (c ptrCodec[T]) minSize() int { return 1 }
