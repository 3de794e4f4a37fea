package codec

import (
	"encoding/binary"
	"math"
	"reflect"
	"time"
	"unsafe"
)

// This file holds the compiled form of a derived codec: a tree of nodes
// built once per type by reflection (see derive.go) and then executed per
// record on raw memory. Leaves are dispatched with a switch on op; only
// composite nodes (structs, slices, arrays, maps, pointers) go through
// their enc/dec closures. Nothing here calls reflect.TypeOf or walks types
// per record; reflect is used per record only to allocate slices, pointers
// and maps of a type fixed at plan time, and to iterate maps.

// MaxDepth bounds how deeply pointers, slices and maps may nest inside one
// derived value. Only recursive types (linked lists, trees) can get near
// it. Decoding deeper input fails with ErrCorrupt; encoding a deeper value
// (for example a pointer cycle) panics instead of overflowing the stack.
const MaxDepth = 10000

type op uint8

const (
	opDyn op = iota // composite: use node.enc / node.dec
	opBool
	opByte // int8, uint8: one raw byte
	opInt16
	opInt32
	opInt64
	opUint16
	opUint32
	opUint64
	opFixed32 // 4 bytes little-endian, any 32-bit integer
	opFixed64 // 8 bytes little-endian, any 64-bit integer
	opFloat32
	opFloat64
	opString
	opBytes // []byte and other slices of 1-byte integers
	opTime
)

// node is the plan for one type. enc appends the encoding of the value at
// p; dec decodes from src[i:] into the value at p, returning the new
// position, and always overwrites every encoded part of the value.
type node struct {
	op   op
	min  int    // smallest possible encoding in bytes; 0 means always empty
	desc string // layout description used by Fingerprint
	enc  func(dst []byte, p unsafe.Pointer, depth int) []byte
	dec  func(src []byte, i int, p unsafe.Pointer, depth int) (int, error)
}

// noescape hides p from escape analysis, so the value being encoded or
// decoded can stay on the caller's stack instead of being moved to the heap
// once per record (the calls are indirect, so the compiler cannot see that
// the plan functions do not keep it). This is the same technique the
// runtime uses, and it holds only as long as no plan function stores p, or
// a pointer derived from it, anywhere that outlives the call: not in a
// heap object, a pool, a reflect.MapIter or a closure. Plan functions
// read and write through p and hand it (or an offset of it) down the call
// chain; a reflect.Value made from it must stay a local of the function
// that made it.
//
//go:nosplit
func noescape(p unsafe.Pointer) unsafe.Pointer {
	x := uintptr(p)
	return *(*unsafe.Pointer)(unsafe.Pointer(&x))
}

func encValue(n *node, dst []byte, p unsafe.Pointer, depth int) []byte {
	return n.enc(dst, p, depth)
}

func decValue(n *node, src []byte, i int, p unsafe.Pointer, depth int) (int, error) {
	return n.dec(src, i, p, depth)
}

type (
	encFunc = func(dst []byte, p unsafe.Pointer, depth int) []byte
	decFunc = func(src []byte, i int, p unsafe.Pointer, depth int) (int, error)
)

// leafFuncs holds the encoder and decoder of every leaf op. They are plain
// functions, not closures, so a struct field costs one indirect call.
var leafFuncs = [...]struct {
	enc encFunc
	dec decFunc
}{
	opBool: {
		func(dst []byte, p unsafe.Pointer, _ int) []byte { return appendBool(dst, *(*bool)(p)) },
		func(src []byte, i int, p unsafe.Pointer, _ int) (int, error) {
			v, j, err := readBool(src, i)
			*(*bool)(p) = v
			return j, err
		},
	},
	opByte: {
		func(dst []byte, p unsafe.Pointer, _ int) []byte { return append(dst, *(*byte)(p)) },
		func(src []byte, i int, p unsafe.Pointer, _ int) (int, error) {
			v, j, err := readByte(src, i, "byte")
			*(*byte)(p) = v
			return j, err
		},
	},
	opInt16: {
		func(dst []byte, p unsafe.Pointer, _ int) []byte { return appendVarint(dst, int64(*(*int16)(p))) },
		func(src []byte, i int, p unsafe.Pointer, _ int) (int, error) {
			x, j, err := readVarint(src, i)
			if err == nil && int64(int16(x)) != x {
				err = corrupt(i, "varint %d overflows int16", x)
			}
			*(*int16)(p) = int16(x)
			return j, err
		},
	},
	opInt32: {
		func(dst []byte, p unsafe.Pointer, _ int) []byte { return appendVarint(dst, int64(*(*int32)(p))) },
		func(src []byte, i int, p unsafe.Pointer, _ int) (int, error) {
			x, j, err := readVarint(src, i)
			if err == nil && int64(int32(x)) != x {
				err = corrupt(i, "varint %d overflows int32", x)
			}
			*(*int32)(p) = int32(x)
			return j, err
		},
	},
	opInt64: {
		func(dst []byte, p unsafe.Pointer, _ int) []byte { return appendVarint(dst, *(*int64)(p)) },
		func(src []byte, i int, p unsafe.Pointer, _ int) (int, error) {
			x, j, err := readVarint(src, i)
			*(*int64)(p) = x
			return j, err
		},
	},
	opUint16: {
		func(dst []byte, p unsafe.Pointer, _ int) []byte { return appendUvarint(dst, uint64(*(*uint16)(p))) },
		func(src []byte, i int, p unsafe.Pointer, _ int) (int, error) {
			x, j, err := readUvarint(src, i)
			if err == nil && x > math.MaxUint16 {
				err = corrupt(i, "uvarint %d overflows uint16", x)
			}
			*(*uint16)(p) = uint16(x)
			return j, err
		},
	},
	opUint32: {
		func(dst []byte, p unsafe.Pointer, _ int) []byte { return appendUvarint(dst, uint64(*(*uint32)(p))) },
		func(src []byte, i int, p unsafe.Pointer, _ int) (int, error) {
			x, j, err := readUvarint(src, i)
			if err == nil && x > math.MaxUint32 {
				err = corrupt(i, "uvarint %d overflows uint32", x)
			}
			*(*uint32)(p) = uint32(x)
			return j, err
		},
	},
	opUint64: {
		func(dst []byte, p unsafe.Pointer, _ int) []byte { return appendUvarint(dst, *(*uint64)(p)) },
		func(src []byte, i int, p unsafe.Pointer, _ int) (int, error) {
			x, j, err := readUvarint(src, i)
			*(*uint64)(p) = x
			return j, err
		},
	},
	opFixed32: {enc32, dec32},
	opFloat32: {enc32, dec32},
	opFixed64: {enc64, dec64},
	opFloat64: {enc64, dec64},
	opString: {
		func(dst []byte, p unsafe.Pointer, _ int) []byte { return appendString(dst, *(*string)(p)) },
		func(src []byte, i int, p unsafe.Pointer, _ int) (int, error) {
			s, j, err := readString(src, i)
			*(*string)(p) = s
			return j, err
		},
	},
	opBytes: {
		func(dst []byte, p unsafe.Pointer, _ int) []byte { return appendBytes(dst, *(*[]byte)(p)) },
		func(src []byte, i int, p unsafe.Pointer, _ int) (int, error) {
			b, j, err := readBytes(src, i)
			*(*[]byte)(p) = b
			return j, err
		},
	},
	opTime: {
		func(dst []byte, p unsafe.Pointer, _ int) []byte { return appendTime(dst, *(*time.Time)(p)) },
		func(src []byte, i int, p unsafe.Pointer, _ int) (int, error) {
			t, j, err := readTime(src, i)
			*(*time.Time)(p) = t
			return j, err
		},
	},
}

func enc32(dst []byte, p unsafe.Pointer, _ int) []byte {
	return binary.LittleEndian.AppendUint32(dst, *(*uint32)(p))
}

func dec32(src []byte, i int, p unsafe.Pointer, _ int) (int, error) {
	x, j, err := readFixed32(src, i, "fixed32")
	*(*uint32)(p) = x
	return j, err
}

func enc64(dst []byte, p unsafe.Pointer, _ int) []byte {
	return binary.LittleEndian.AppendUint64(dst, *(*uint64)(p))
}

func dec64(src []byte, i int, p unsafe.Pointer, _ int) (int, error) {
	x, j, err := readFixed64(src, i, "fixed64")
	*(*uint64)(p) = x
	return j, err
}

// field is one encoded struct field.
type field struct {
	off  uintptr
	n    *node
	name string
}

func structEnc(fields []field) func([]byte, unsafe.Pointer, int) []byte {
	return func(dst []byte, p unsafe.Pointer, depth int) []byte {
		for k := range fields {
			f := &fields[k]
			dst = encValue(f.n, dst, unsafe.Add(p, f.off), depth)
		}
		return dst
	}
}

func structDec(fields []field) func([]byte, int, unsafe.Pointer, int) (int, error) {
	return func(src []byte, i int, p unsafe.Pointer, depth int) (int, error) {
		var err error
		for k := range fields {
			f := &fields[k]
			if i, err = decValue(f.n, src, i, unsafe.Add(p, f.off), depth); err != nil {
				return i, prependPath(err, "."+f.name)
			}
		}
		return i, nil
	}
}

func tooDeep(off int) error {
	return &CorruptError{Offset: off, Reason: "value nests deeper than MaxDepth"}
}

func encDepthPanic(depth int) {
	panic("codec: value nests pointers, slices or maps more than MaxDepth (" +
		itoa(MaxDepth) + ") deep; is there a pointer cycle?")
}

func itoa(n int) string {
	return string(appendUint(nil, uint64(n)))
}

func appendUint(dst []byte, x uint64) []byte {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + x%10)
		x /= 10
		if x == 0 {
			break
		}
	}
	return append(dst, b[i:]...)
}

// maxEmptyAlloc caps the memory a decoded slice of always-empty elements
// (for example structs whose fields are all skipped) may take, since such
// elements give no input bytes to check a claimed count against.
const maxEmptyAlloc = 1 << 26

// anySlice reads the slice at p, whatever its element type, as a []byte
// of the same length: every slice type has the same layout (data pointer,
// length, capacity), so only its length and unsafe.SliceData are
// meaningful, never its elements.
func anySlice(p unsafe.Pointer) []byte { return *(*[]byte)(p) }

func sliceEnc(elem *node, esz uintptr) func([]byte, unsafe.Pointer, int) []byte {
	return func(dst []byte, p unsafe.Pointer, depth int) []byte {
		s := anySlice(p)
		n := len(s)
		dst = appendUvarint(dst, uint64(n))
		if n == 0 || elem.min == 0 {
			return dst
		}
		if depth >= MaxDepth {
			encDepthPanic(depth)
		}
		data := unsafe.Pointer(unsafe.SliceData(s))
		for k := 0; k < n; k++ {
			dst = encValue(elem, dst, unsafe.Add(data, uintptr(k)*esz), depth+1)
		}
		return dst
	}
}

func sliceDec(t reflect.Type, elem *node, esz uintptr) func([]byte, int, unsafe.Pointer, int) (int, error) {
	return func(src []byte, i int, p unsafe.Pointer, depth int) (int, error) {
		start := i
		var n int
		var err error
		if elem.min == 0 {
			var u uint64
			u, i, err = readUvarint(src, i)
			if err != nil {
				return i, err
			}
			if esz > 0 && u > maxEmptyAlloc/uint64(esz) || u > math.MaxInt32 {
				return start, corrupt(start, "slice length %d of empty elements is too large", u)
			}
			n = int(u)
		} else if n, i, err = readLen(src, i, elem.min, "slice"); err != nil {
			return i, err
		}
		// The slice at p is set through a reflect.Value that lives only in
		// this frame (see noescape); Grow on the nil slice allocates the
		// array with the element type's pointer layout.
		sv := reflect.NewAt(t, p).Elem()
		sv.SetZero()
		if n == 0 {
			return i, nil
		}
		if depth >= MaxDepth {
			return start, tooDeep(start)
		}
		sv.Grow(n)
		sv.SetLen(n)
		if elem.min == 0 {
			return i, nil // elements encode nothing; they stay zero
		}
		data := unsafe.Pointer(unsafe.SliceData(anySlice(p)))
		for k := 0; k < n; k++ {
			if i, err = decValue(elem, src, i, unsafe.Add(data, uintptr(k)*esz), depth+1); err != nil {
				sv.SetZero()
				return i, prependPath(err, "[]")
			}
		}
		return i, nil
	}
}

func arrayEnc(elem *node, n int, esz uintptr) func([]byte, unsafe.Pointer, int) []byte {
	if elem.op == opByte {
		return func(dst []byte, p unsafe.Pointer, _ int) []byte {
			return append(dst, unsafe.Slice((*byte)(p), n)...)
		}
	}
	return func(dst []byte, p unsafe.Pointer, depth int) []byte {
		for k := 0; k < n; k++ {
			dst = encValue(elem, dst, unsafe.Add(p, uintptr(k)*esz), depth)
		}
		return dst
	}
}

func arrayDec(elem *node, n int, esz uintptr, min int) func([]byte, int, unsafe.Pointer, int) (int, error) {
	if elem.op == opByte {
		return func(src []byte, i int, p unsafe.Pointer, _ int) (int, error) {
			if len(src)-i < n {
				return i, corrupt(i, "truncated [%d]byte: %d bytes remain", n, len(src)-i)
			}
			copy(unsafe.Slice((*byte)(p), n), src[i:])
			return i + n, nil
		}
	}
	return func(src []byte, i int, p unsafe.Pointer, depth int) (int, error) {
		if len(src)-i < min {
			return i, corrupt(i, "truncated array: needs at least %d bytes, %d remain", min, len(src)-i)
		}
		var err error
		for k := 0; k < n; k++ {
			if i, err = decValue(elem, src, i, unsafe.Add(p, uintptr(k)*esz), depth); err != nil {
				return i, prependPath(err, "[]")
			}
		}
		return i, nil
	}
}

func ptrEnc(elem *node) func([]byte, unsafe.Pointer, int) []byte {
	return func(dst []byte, p unsafe.Pointer, depth int) []byte {
		q := *(*unsafe.Pointer)(p)
		if q == nil {
			return append(dst, 0)
		}
		if depth >= MaxDepth {
			encDepthPanic(depth)
		}
		return encValue(elem, append(dst, 1), q, depth+1)
	}
}

func ptrDec(et reflect.Type, elem *node) func([]byte, int, unsafe.Pointer, int) (int, error) {
	return func(src []byte, i int, p unsafe.Pointer, depth int) (int, error) {
		if i >= len(src) {
			return i, corrupt(i, "truncated pointer flag")
		}
		switch src[i] {
		case 0:
			*(*unsafe.Pointer)(p) = nil
			return i + 1, nil
		case 1:
		default:
			return i, corrupt(i, "invalid pointer flag 0x%02x", src[i])
		}
		if depth >= MaxDepth {
			return i, tooDeep(i)
		}
		q := reflect.New(et).UnsafePointer()
		j, err := decValue(elem, src, i+1, q, depth+1)
		if err != nil {
			*(*unsafe.Pointer)(p) = nil
			return j, err
		}
		*(*unsafe.Pointer)(p) = q
		return j, nil
	}
}
