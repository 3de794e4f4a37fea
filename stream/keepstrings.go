package stream

import (
	"reflect"
	"strings"
	"unsafe"
)

// stringKeeper makes the values an operator keeps across records (a
// combiner's partial results) hold their own strings, not strings cut from
// their input: a word of a line would keep the line's memory alive (and a
// line from a text source its whole chunk, lineSlab) for as long as the
// value stays. It knows the strings a T holds in itself (the value, its
// struct fields and array elements; not those behind pointers, slices,
// maps or interfaces, which it leaves alone) by their offsets, found once
// per type. Its zero value keeps nothing; one is shared by the values of
// one operator instance.
type stringKeeper[T any] struct {
	offsets []uintptr
}

func newStringKeeper[T any]() stringKeeper[T] {
	return stringKeeper[T]{offsets: inlineStrings(reflect.TypeFor[T](), 0, nil)}
}

// maxInlineStrings bounds the strings a keeper looks at: a value with more
// (a large array of strings) is left as it is, the check per record would
// cost more than the memory it saves.
const maxInlineStrings = 64

// inlineStrings appends the offsets of the strings a value of t holds in
// itself, from base, to out.
func inlineStrings(t reflect.Type, base uintptr, out []uintptr) []uintptr {
	switch t.Kind() {
	case reflect.String:
		out = append(out, base)
	case reflect.Struct:
		for i := 0; i < t.NumField() && len(out) <= maxInlineStrings; i++ {
			f := t.Field(i)
			out = inlineStrings(f.Type, base+f.Offset, out)
		}
	case reflect.Array:
		for i := 0; i < t.Len() && len(out) <= maxInlineStrings; i++ {
			out = inlineStrings(t.Elem(), base+uintptr(i)*t.Elem().Size(), out)
		}
	}
	if len(out) > maxInlineStrings {
		return nil
	}
	return out
}

func (k stringKeeper[T]) at(v *T, off uintptr) *string {
	return (*string)(unsafe.Add(unsafe.Pointer(v), off))
}

// own gives a new kept value v copies of its strings; one with the same
// bytes as key (what the value was keyed by) becomes keyCopy instead, the
// copy the caller keeps of key, so the two share it.
func (k stringKeeper[T]) own(v *T, key, keyCopy string) {
	for _, off := range k.offsets {
		s := k.at(v, off)
		switch {
		case *s == "":
		case *s == key:
			*s = keyCopy
		default:
			*s = strings.Clone(*s)
		}
	}
}

// shares reports whether next holds the string prev holds at the first
// offset, the only one (a value with one string, as a word count's): the
// check per record, small enough to inline, that spares the call to keep
// when the reduce kept its accumulator's string.
func (k stringKeeper[T]) shares(prev, next *T) bool {
	return len(k.offsets) == 1 &&
		unsafe.StringData(*k.at(prev, k.offsets[0])) == unsafe.StringData(*k.at(next, k.offsets[0]))
}

// keep makes next, the value replacing the kept value prev, hold kept
// strings: a string of next that is prev's (the same bytes where prev has
// them: a reduce keeping its accumulator's field, or taking an equal one
// from its input) becomes prev's; another one is copied. A string that
// does not change costs a comparison per record and no allocation.
func (k stringKeeper[T]) keep(prev, next *T) {
	for _, off := range k.offsets {
		p, n := k.at(prev, off), k.at(next, off)
		switch {
		case unsafe.StringData(*n) == unsafe.StringData(*p) && len(*n) == len(*p):
		case *n == *p:
			*n = *p
		default:
			*n = strings.Clone(*n)
		}
	}
}
