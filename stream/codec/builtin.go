package codec

import (
	"encoding/binary"
	"math"
	"time"
)

// Built-in codecs. They are stateless values; the variables exist so job
// code can name them (codec.SliceOf(codec.Int64)) and must not be
// reassigned.
//
// Encodings: signed integers are zig-zag varints and unsigned integers are
// uvarints (1 byte below 128, at most 10 bytes), except 8-bit integers,
// which are one raw byte (a varint can never be shorter). The *Fixed
// variants are fixed-width little-endian: larger for small values but
// branch-free, and smaller for values that use the high bits (hashes, IDs,
// bit sets). Floats are fixed-width little-endian IEEE 754. Strings and
// []byte are a uvarint length followed by the bytes.
var (
	Bool Codec[bool] = boolCodec{}

	Int   Codec[int]   = varintCodec[int]{}
	Int8  Codec[int8]  = byteCodec[int8]{}
	Int16 Codec[int16] = varintCodec[int16]{}
	Int32 Codec[int32] = varintCodec[int32]{}
	Int64 Codec[int64] = varintCodec[int64]{}

	Uint   Codec[uint]   = uvarintCodec[uint]{}
	Uint8  Codec[uint8]  = byteCodec[uint8]{}
	Uint16 Codec[uint16] = uvarintCodec[uint16]{}
	Uint32 Codec[uint32] = uvarintCodec[uint32]{}
	Uint64 Codec[uint64] = uvarintCodec[uint64]{}

	Int32Fixed  Codec[int32]  = fixed32Codec[int32]{}
	Int64Fixed  Codec[int64]  = fixed64Codec[int64]{}
	Uint32Fixed Codec[uint32] = fixed32Codec[uint32]{}
	Uint64Fixed Codec[uint64] = fixed64Codec[uint64]{}

	Float32 Codec[float32] = float32Codec{}
	Float64 Codec[float64] = float64Codec{}

	String Codec[string] = stringCodec{}
	// Bytes copies on decode (the result never aliases the input); an
	// empty slice decodes as nil.
	Bytes Codec[[]byte] = bytesCodec{}

	// Time encodes the instant as zig-zag varint Unix nanoseconds. It keeps
	// the instant only: decoded times are in UTC with no monotonic reading,
	// so compare with Time.Equal. Instants outside 1678..2262 cannot be
	// represented (UnixNano is undefined there); the zero Time round-trips.
	Time Codec[time.Time] = timeCodec{}
	// Duration is a zig-zag varint of nanoseconds.
	Duration Codec[time.Duration] = varintCodec[time.Duration]{}
)

// minSizer is implemented by codecs that know the smallest encoding they
// produce; composite codecs use it to bound claimed element counts.
type minSizer interface{ minSize() int }

// minSizeOf returns c's minimum encoded size, assuming 1 for codecs that
// do not say (see SliceOf).
func minSizeOf(c any) int {
	if m, ok := c.(minSizer); ok {
		return m.minSize()
	}
	return 1
}

type boolCodec struct{}

func (boolCodec) Append(dst []byte, v bool) []byte { return appendBool(dst, v) }
func (boolCodec) Decode(src []byte) (bool, int, error) {
	return readBool(src, 0)
}
func (boolCodec) minSize() int { return 1 }

type byteCodec[T ~int8 | ~uint8] struct{}

func (byteCodec[T]) Append(dst []byte, v T) []byte { return append(dst, byte(v)) }
func (byteCodec[T]) Decode(src []byte) (T, int, error) {
	b, n, err := readByte(src, 0, "byte")
	return T(b), n, err
}
func (byteCodec[T]) minSize() int { return 1 }

type varintCodec[T ~int | ~int16 | ~int32 | ~int64] struct{}

func (varintCodec[T]) Append(dst []byte, v T) []byte { return appendVarint(dst, int64(v)) }
func (varintCodec[T]) Decode(src []byte) (T, int, error) {
	x, n, err := readVarint(src, 0)
	if err != nil {
		return 0, 0, err
	}
	v := T(x)
	if int64(v) != x {
		return 0, 0, corrupt(0, "varint %d overflows %T", x, v)
	}
	return v, n, nil
}
func (varintCodec[T]) minSize() int { return 1 }

type uvarintCodec[T ~uint | ~uint16 | ~uint32 | ~uint64 | ~uintptr] struct{}

func (uvarintCodec[T]) Append(dst []byte, v T) []byte { return appendUvarint(dst, uint64(v)) }
func (uvarintCodec[T]) Decode(src []byte) (T, int, error) {
	x, n, err := readUvarint(src, 0)
	if err != nil {
		return 0, 0, err
	}
	v := T(x)
	if uint64(v) != x {
		return 0, 0, corrupt(0, "uvarint %d overflows %T", x, v)
	}
	return v, n, nil
}
func (uvarintCodec[T]) minSize() int { return 1 }

type fixed32Codec[T ~int32 | ~uint32] struct{}

func (fixed32Codec[T]) Append(dst []byte, v T) []byte {
	return binary.LittleEndian.AppendUint32(dst, uint32(v))
}
func (fixed32Codec[T]) Decode(src []byte) (T, int, error) {
	x, n, err := readFixed32(src, 0, "fixed32")
	return T(x), n, err
}
func (fixed32Codec[T]) minSize() int { return 4 }

type fixed64Codec[T ~int64 | ~uint64] struct{}

func (fixed64Codec[T]) Append(dst []byte, v T) []byte {
	return binary.LittleEndian.AppendUint64(dst, uint64(v))
}
func (fixed64Codec[T]) Decode(src []byte) (T, int, error) {
	x, n, err := readFixed64(src, 0, "fixed64")
	return T(x), n, err
}
func (fixed64Codec[T]) minSize() int { return 8 }

type float32Codec struct{}

func (float32Codec) Append(dst []byte, v float32) []byte {
	return binary.LittleEndian.AppendUint32(dst, math.Float32bits(v))
}
func (float32Codec) Decode(src []byte) (float32, int, error) {
	x, n, err := readFixed32(src, 0, "float32")
	return math.Float32frombits(x), n, err
}
func (float32Codec) minSize() int { return 4 }

type float64Codec struct{}

func (float64Codec) Append(dst []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
}
func (float64Codec) Decode(src []byte) (float64, int, error) {
	x, n, err := readFixed64(src, 0, "float64")
	return math.Float64frombits(x), n, err
}
func (float64Codec) minSize() int { return 8 }

type stringCodec struct{}

func (stringCodec) Append(dst []byte, v string) []byte { return appendString(dst, v) }
func (stringCodec) Decode(src []byte) (string, int, error) {
	return readString(src, 0)
}
func (stringCodec) minSize() int { return 1 }

type bytesCodec struct{}

func (bytesCodec) Append(dst []byte, v []byte) []byte { return appendBytes(dst, v) }
func (bytesCodec) Decode(src []byte) ([]byte, int, error) {
	return readBytes(src, 0)
}
func (bytesCodec) minSize() int { return 1 }

type timeCodec struct{}

func (timeCodec) Append(dst []byte, v time.Time) []byte { return appendTime(dst, v) }
func (timeCodec) Decode(src []byte) (time.Time, int, error) {
	return readTime(src, 0)
}
func (timeCodec) minSize() int { return 1 }

func appendTime(dst []byte, t time.Time) []byte {
	if t.IsZero() {
		return appendVarint(dst, zeroTimeNanos)
	}
	return appendVarint(dst, t.UnixNano())
}

func readTime(src []byte, i int) (time.Time, int, error) {
	x, j, err := readVarint(src, i)
	if err != nil {
		return time.Time{}, i, err
	}
	if x == zeroTimeNanos {
		return time.Time{}, j, nil
	}
	return time.Unix(0, x).UTC(), j, nil
}
