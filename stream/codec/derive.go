package codec

import (
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// plans caches one compiled plan per root type (reflect.Type -> *plan).
var plans sync.Map

type plan struct {
	root *node
	desc string // layout description, see Fingerprint
	name string // root type name, the first segment of error paths
	err  error
}

// For derives a codec for T by reflection, once per type (the compiled
// plan is cached, so calling For repeatedly is cheap, but job code should
// still keep the codec in a variable). Encoding and decoding then run the
// compiled plan directly on the value's memory without reflecting on types.
//
// T may be built from: bool; int, int8..int64; uint, uint8..uint64,
// uintptr; float32, float64; string; []byte; time.Time; time.Duration (and
// any named type of these kinds); slices, arrays, maps, pointers; structs;
// Tuple2 and Tuple3; in any nesting, including recursive types.
//
//   - Struct fields are encoded in declaration order, exported fields only.
//     An unexported field is an error naming it unless it is tagged
//     `codec:"-"`, which skips the field (it decodes as its zero value);
//     exported fields may be skipped the same way. Blank (_) fields are
//     skipped. Embedded structs are encoded as a nested field.
//   - The tag `codec:"fixed"` on an int32, int64, uint32 or uint64 field
//     selects the fixed-width little-endian encoding (see Int64Fixed).
//   - Pointers are one flag byte, then the pointee if non-nil. Pointer
//     sharing and cycles are not preserved: a pointee reachable twice is
//     encoded twice, and nesting is limited to MaxDepth.
//   - Slices and maps are a uvarint count followed by the elements; empty
//     and nil both decode as nil. Arrays are their elements, no count.
//   - Map entries are written in Go's randomized iteration order: the
//     encoding of a map-bearing value is not canonical (see MapOf).
//   - Chans, funcs, interfaces, complex numbers and unsafe.Pointer are
//     rejected with an *UnsupportedError naming the path to them, such as
//     "codec: main.Event.Handler: func() is not serializable". For such
//     types, pick Gob explicitly or write a Codec by hand.
//
// The bytes For produces for a type equal those of the explicit codecs
// with default encodings (Int64, String, SliceOf, TupleCodec2, ...) for
// the same shape, so the two can be mixed across processes.
func For[T any]() (Codec[T], error) {
	if c := builtinFor[T](); c != nil {
		return c, nil
	}
	p := planFor(reflect.TypeFor[T]())
	if p.err != nil {
		return nil, p.err
	}
	return &planCodec[T]{root: p.root, name: p.name}, nil
}

// MustFor is like For but panics if T is not serializable. It is meant for
// package-level variables in job code:
//
//	var eventCodec = codec.MustFor[Event]()
func MustFor[T any]() Codec[T] {
	c, err := For[T]()
	if err != nil {
		panic(err.Error() + " (codec.MustFor[" + reflect.TypeFor[T]().String() + "])")
	}
	return c
}

// fingerprintVersion prefixes every fingerprint; it changes whenever the
// wire format of derived codecs changes.
const fingerprintVersion = "gofl.codec/1 "

// Fingerprint returns a stable description of the layout For[T] encodes:
// the kinds of all values, struct field names and their order, and field
// encodings (fixed-width, skipped fields omitted). Type names are not part
// of it, so two types with the same layout (say, the same struct declared in
// the producer's and the consumer's package) have the same fingerprint.
// The runtime compares fingerprints to detect a producer and a consumer
// built from different types. For example:
//
//	gofl.codec/1 struct{ID int64;Word string;Count int64;TS time}
//
// Within one fingerprint, "#n" refers back to the n-th struct or named
// composite type already described (0-based), so recursive types have
// finite fingerprints. If T is not serializable the fingerprint starts with
// "unsupported: " followed by the error.
func Fingerprint[T any]() string {
	p := planFor(reflect.TypeFor[T]())
	if p.err != nil {
		return "unsupported: " + p.err.Error()
	}
	return fingerprintVersion + p.desc
}

// builtinFor returns the built-in codec when T is exactly one of the
// built-in types (named types go through a plan, with the same encoding).
func builtinFor[T any]() Codec[T] {
	var c any
	switch any(*new(T)).(type) {
	case bool:
		c = Bool
	case int:
		c = Int
	case int8:
		c = Int8
	case int16:
		c = Int16
	case int32:
		c = Int32
	case int64:
		c = Int64
	case uint:
		c = Uint
	case uint8:
		c = Uint8
	case uint16:
		c = Uint16
	case uint32:
		c = Uint32
	case uint64:
		c = Uint64
	case float32:
		c = Float32
	case float64:
		c = Float64
	case string:
		c = String
	case []byte:
		c = Bytes
	case time.Time:
		c = Time
	case time.Duration:
		c = Duration
	default:
		return nil
	}
	return c.(Codec[T])
}

// planCodec runs a compiled plan for T.
type planCodec[T any] struct {
	root *node
	name string
}

func (c *planCodec[T]) Append(dst []byte, v T) []byte {
	return encValue(c.root, dst, noescape(unsafe.Pointer(&v)), 0)
}

func (c *planCodec[T]) Decode(src []byte) (v T, n int, err error) {
	if len(src) < c.root.min {
		return v, 0, &CorruptError{Path: c.name, Reason: "truncated: needs at least " +
			strconv.Itoa(c.root.min) + " bytes, have " + strconv.Itoa(len(src))}
	}
	n, err = decValue(c.root, src, 0, noescape(unsafe.Pointer(&v)), 0)
	if err != nil {
		var zero T
		return zero, 0, prependPath(err, c.name)
	}
	return v, n, nil
}

func (c *planCodec[T]) minSize() int { return c.root.min }

func planFor(t reflect.Type) *plan {
	if p, ok := plans.Load(t); ok {
		return p.(*plan)
	}
	b := &builder{nodes: map[reflect.Type]*node{}, ids: map[reflect.Type]int{}}
	root, desc, err := b.build(t, t.String(), "")
	p := &plan{root: root, desc: desc, name: t.String(), err: err}
	actual, _ := plans.LoadOrStore(t, p)
	return actual.(*plan)
}

var timeType = reflect.TypeFor[time.Time]()

// Leaf nodes are shared; their desc is produced by build per use.
var leaves = func() (m [opTime + 1]*node) {
	min := map[op]int{opFixed32: 4, opFixed64: 8, opFloat32: 4, opFloat64: 8}
	for o := opBool; o <= opTime; o++ {
		m[o] = &node{op: o, min: 1, enc: leafFuncs[o].enc, dec: leafFuncs[o].dec}
		if v, ok := min[o]; ok {
			m[o].min = v
		}
	}
	return m
}()

type builder struct {
	// nodes holds every composite node built so far, complete or in
	// progress, so shared and recursive types get one node.
	nodes map[reflect.Type]*node
	// ids numbers struct and named composite types in the order they are
	// first described, for the "#n" back-references of fingerprints.
	ids map[reflect.Type]int
}

func unsupported(path string, t reflect.Type, reason string) error {
	return &UnsupportedError{Path: path, Type: t, Reason: reason}
}

// build returns the node for t and the description of t at this use site.
func (b *builder) build(t reflect.Type, path, tag string) (*node, string, error) {
	if tag == "fixed" {
		switch t.Kind() {
		case reflect.Int32, reflect.Uint32:
			return leaves[opFixed32], "fixed(" + t.Kind().String() + ")", nil
		case reflect.Int64, reflect.Uint64:
			return leaves[opFixed64], "fixed(" + t.Kind().String() + ")", nil
		}
		return nil, "", unsupported(path, t, `tag codec:"fixed" applies only to int32, int64, uint32 and uint64, not `+t.String())
	}
	if t == timeType {
		return leaves[opTime], "time", nil
	}
	k := t.Kind()
	switch k {
	case reflect.Bool:
		return leaves[opBool], "bool", nil
	case reflect.Int8, reflect.Uint8:
		return leaves[opByte], k.String(), nil
	case reflect.Int16:
		return leaves[opInt16], "int16", nil
	case reflect.Int32:
		return leaves[opInt32], "int32", nil
	case reflect.Int64:
		return leaves[opInt64], "int64", nil
	case reflect.Int:
		if t.Size() == 8 {
			return leaves[opInt64], "int", nil
		}
		return leaves[opInt32], "int", nil
	case reflect.Uint16:
		return leaves[opUint16], "uint16", nil
	case reflect.Uint32:
		return leaves[opUint32], "uint32", nil
	case reflect.Uint64:
		return leaves[opUint64], "uint64", nil
	case reflect.Uint, reflect.Uintptr:
		if t.Size() == 8 {
			return leaves[opUint64], k.String(), nil
		}
		return leaves[opUint32], k.String(), nil
	case reflect.Float32:
		return leaves[opFloat32], "float32", nil
	case reflect.Float64:
		return leaves[opFloat64], "float64", nil
	case reflect.String:
		return leaves[opString], "string", nil
	case reflect.Slice:
		if ek := t.Elem().Kind(); ek == reflect.Uint8 || ek == reflect.Int8 {
			return leaves[opBytes], "[]" + ek.String(), nil
		}
	case reflect.Array, reflect.Map, reflect.Pointer, reflect.Struct:
	case reflect.Interface:
		return nil, "", unsupported(path, t, t.String()+" is not serializable (interfaces have no fixed layout: use a concrete type, or choose codec.Gob explicitly)")
	default: // Chan, Func, Complex64, Complex128, UnsafePointer, Invalid
		return nil, "", unsupported(path, t, t.String()+" is not serializable")
	}

	// Composite kinds.
	if n, ok := b.nodes[t]; ok {
		if id, ok := b.ids[t]; ok {
			return n, "#" + strconv.Itoa(id), nil
		}
		return n, n.desc, nil
	}
	n := &node{op: opDyn}
	b.nodes[t] = n
	if k == reflect.Struct || t.Name() != "" {
		b.ids[t] = len(b.ids)
	}
	var err error
	switch k {
	case reflect.Slice:
		n.min = 1
		var elem *node
		var edesc string
		if elem, edesc, err = b.build(t.Elem(), path+"[]", ""); err != nil {
			return nil, "", err
		}
		n.desc = "[]" + edesc
		n.enc = sliceEnc(elem, t.Elem().Size())
		n.dec = sliceDec(t, elem, t.Elem().Size())
	case reflect.Array:
		var elem *node
		var edesc string
		if elem, edesc, err = b.build(t.Elem(), path+"[]", ""); err != nil {
			return nil, "", err
		}
		n.min = t.Len() * elem.min
		n.desc = "[" + strconv.Itoa(t.Len()) + "]" + edesc
		n.enc = arrayEnc(elem, t.Len(), t.Elem().Size())
		n.dec = arrayDec(elem, t.Len(), t.Elem().Size(), n.min)
	case reflect.Pointer:
		n.min = 1
		var elem *node
		var edesc string
		if elem, edesc, err = b.build(t.Elem(), path, ""); err != nil {
			return nil, "", err
		}
		n.desc = "*" + edesc
		n.enc = ptrEnc(elem)
		n.dec = ptrDec(t.Elem(), elem)
	case reflect.Map:
		n.min = 1
		var kn, vn *node
		var kdesc, vdesc string
		if kn, kdesc, err = b.build(t.Key(), path+"[key]", ""); err != nil {
			return nil, "", err
		}
		if vn, vdesc, err = b.build(t.Elem(), path+"[value]", ""); err != nil {
			return nil, "", err
		}
		n.desc = "map[" + kdesc + "]" + vdesc
		if t.Size() != unsafe.Sizeof(unsafe.Pointer(nil)) {
			panic("codec: a map value is not one pointer in this Go runtime (" + t.String() + ")")
		}
		n.enc = mapEnc(t, kn, vn)
		n.dec = mapDec(t, kn, vn)
	case reflect.Struct:
		if err = b.structNode(n, t, path); err != nil {
			return nil, "", err
		}
	}
	return n, n.desc, nil
}

func (b *builder) structNode(n *node, t reflect.Type, path string) error {
	var fields []field
	var desc strings.Builder
	desc.WriteString("struct{")
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, hasTag := sf.Tag.Lookup("codec")
		if tag == "-" || sf.Name == "_" {
			continue
		}
		fpath := path + "." + sf.Name
		if !sf.IsExported() {
			return unsupported(fpath, sf.Type, "unexported field: derived codecs encode exported fields only (tag it `codec:\"-\"` to skip it)")
		}
		if hasTag && tag != "fixed" {
			return unsupported(fpath, sf.Type, "unknown codec tag "+strconv.Quote(tag)+` (want "-" or "fixed")`)
		}
		fn, fdesc, err := b.build(sf.Type, fpath, tag)
		if err != nil {
			return err
		}
		if len(fields) > 0 {
			desc.WriteByte(';')
		}
		desc.WriteString(sf.Name)
		desc.WriteByte(' ')
		desc.WriteString(fdesc)
		fields = append(fields, field{off: sf.Offset, n: fn, name: sf.Name})
		n.min += fn.min
	}
	desc.WriteByte('}')
	n.desc = desc.String()
	n.enc = structEnc(fields)
	n.dec = structDec(fields)
	return nil
}

// mapScratch is the per-encode state for iterating a map without
// allocating: an iterator, a map-typed variable for it to iterate, and
// addressable key and value temporaries. It lives in a sync.Pool, so it
// must never hold the pointer a plan function was given (see noescape):
// m holds a copy of the map reference (a heap pointer), not the address of
// the caller's map variable.
type mapScratch struct {
	m      unsafe.Pointer // the map being encoded; nil between uses
	mv     reflect.Value  // the map-typed variable at &m
	it     reflect.MapIter
	k, v   reflect.Value
	kp, vp unsafe.Pointer
}

// mapRef is the map reference stored at p: a map value is a single
// pointer to the runtime's map, nil for a nil map (build checks the size).
func mapRef(p unsafe.Pointer) unsafe.Pointer { return *(*unsafe.Pointer)(p) }

func mapEnc(t reflect.Type, kn, vn *node) func([]byte, unsafe.Pointer, int) []byte {
	pool := &sync.Pool{New: func() any {
		k, v := reflect.New(t.Key()), reflect.New(t.Elem())
		s := &mapScratch{k: k.Elem(), v: v.Elem(), kp: k.UnsafePointer(), vp: v.UnsafePointer()}
		s.mv = reflect.NewAt(t, unsafe.Pointer(&s.m)).Elem()
		return s
	}}
	return func(dst []byte, p unsafe.Pointer, depth int) []byte {
		m := mapRef(p)
		if m == nil {
			return appendUvarint(dst, 0)
		}
		s := pool.Get().(*mapScratch)
		s.m = m
		n := s.mv.Len()
		dst = appendUvarint(dst, uint64(n))
		if n > 0 && kn.min+vn.min > 0 {
			if depth >= MaxDepth {
				s.m = nil
				pool.Put(s)
				encDepthPanic(depth)
			}
			s.it.Reset(s.mv)
			for s.it.Next() {
				s.k.SetIterKey(&s.it)
				s.v.SetIterValue(&s.it)
				dst = encValue(kn, dst, s.kp, depth+1)
				dst = encValue(vn, dst, s.vp, depth+1)
			}
			s.it.Reset(reflect.Value{})
			s.k.SetZero()
			s.v.SetZero()
		}
		s.m = nil // do not keep the map alive from the pool
		pool.Put(s)
		return dst
	}
}

func mapDec(t reflect.Type, kn, vn *node) func([]byte, int, unsafe.Pointer, int) (int, error) {
	pairMin := kn.min + vn.min
	return func(src []byte, i int, p unsafe.Pointer, depth int) (int, error) {
		start := i
		// The map at p is written as its reference (see mapRef), with a
		// typed pointer store, so no reflect.Value holds p.
		u, i, err := readUvarint(src, i)
		if err != nil {
			return i, err
		}
		if u == 0 {
			*(*unsafe.Pointer)(p) = nil
			return i, nil
		}
		if depth >= MaxDepth {
			return start, tooDeep(start)
		}
		k, v := reflect.New(t.Key()), reflect.New(t.Elem())
		if pairMin == 0 {
			// Keys and values encode as nothing, so they are all zero and
			// the map has at most one entry, whatever the count says.
			m := reflect.MakeMapWithSize(t, 1)
			m.SetMapIndex(k.Elem(), v.Elem())
			*(*unsafe.Pointer)(p) = m.UnsafePointer()
			return i, nil
		}
		if u > uint64((len(src)-i)/pairMin) {
			return start, corrupt(start, "map length %d needs at least %d bytes per entry but only %d bytes remain", u, pairMin, len(src)-i)
		}
		m := reflect.MakeMapWithSize(t, int(u))
		kp, vp := k.UnsafePointer(), v.UnsafePointer()
		for range u {
			if i, err = decValue(kn, src, i, kp, depth+1); err != nil {
				*(*unsafe.Pointer)(p) = nil
				return i, prependPath(err, "[key]")
			}
			if i, err = decValue(vn, src, i, vp, depth+1); err != nil {
				*(*unsafe.Pointer)(p) = nil
				return i, prependPath(err, "[value]")
			}
			m.SetMapIndex(k.Elem(), v.Elem())
		}
		*(*unsafe.Pointer)(p) = m.UnsafePointer()
		return i, nil
	}
}
