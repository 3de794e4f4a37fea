package stream

import (
	"testing"
	"unsafe"
)

// pointsInto reports whether s's bytes lie in within's.
func pointsInto(s, within string) bool {
	if len(s) == 0 || len(within) == 0 {
		return false
	}
	p, from := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(within)))
	return p >= from && p < from+uintptr(len(within))
}

type keptValue struct {
	Word  string
	N     int
	Tags  [2]string
	Inner struct{ S string }
	Ptr   *string // behind a pointer: left alone
}

func TestInlineStrings(t *testing.T) {
	k := newStringKeeper[keptValue]()
	if len(k.offsets) != 4 {
		t.Fatalf("%d inline strings found in keptValue, want 4 (Word, Tags[0], Tags[1], Inner.S)", len(k.offsets))
	}
	if n := len(newStringKeeper[int]().offsets); n != 0 {
		t.Fatalf("%d inline strings found in int", n)
	}
	if n := len(newStringKeeper[[maxInlineStrings + 1]string]().offsets); n != 0 {
		t.Fatalf("a value with more than %d strings is kept as it is, found %d", maxInlineStrings, n)
	}
}

// TestStringKeeperOwnCopiesAndSharesTheKey checks that a new kept value
// points into neither its input nor the key's input, and shares the key's
// copy where it holds the key.
func TestStringKeeperOwnCopiesAndSharesTheKey(t *testing.T) {
	line := "alpha beta gamma delta"
	v := keptValue{Word: line[:5], Tags: [2]string{line[6:10], ""}, Inner: struct{ S string }{line[11:16]}, Ptr: &line}
	keyCopy := "alpha" // a different allocation with the key's bytes
	newStringKeeper[keptValue]().own(&v, line[:5], keyCopy)
	for _, s := range []string{v.Word, v.Tags[0], v.Inner.S} {
		if pointsInto(s, line) {
			t.Errorf("%q still points into the input", s)
		}
	}
	if unsafe.StringData(v.Word) != unsafe.StringData(keyCopy) {
		t.Error("the value's key field is not the key's copy")
	}
	if v.Word != "alpha" || v.Tags != [2]string{"beta", ""} || v.Inner.S != "gamma" || v.Ptr != &line {
		t.Errorf("the value changed: %+v", v)
	}
}

func TestStringKeeperKeep(t *testing.T) {
	k := newStringKeeper[keptValue]()
	prev := keptValue{Word: "alpha", Inner: struct{ S string }{"x"}}
	line := "alpha and more"
	// A reduce returning its input's (equal) word and a new inner string.
	next := keptValue{Word: line[:5], N: 2, Inner: struct{ S string }{line[6:9]}}
	k.keep(&prev, &next)
	if unsafe.StringData(next.Word) != unsafe.StringData(prev.Word) {
		t.Error("an equal string is not the kept one")
	}
	if pointsInto(next.Inner.S, line) || next.Inner.S != "and" {
		t.Errorf("a changed string %q is not a copy", next.Inner.S)
	}
	// Unchanged: no allocation.
	same := prev
	same.N = 3
	if n := testing.AllocsPerRun(100, func() { k.keep(&prev, &same) }); n != 0 {
		t.Errorf("keeping unchanged strings allocates %.1f times", n)
	}
}

// TestReduceCombinerKeepsNoInput checks a combiner's kept values for a
// reduce that keeps its accumulator's word and one that takes its input's
// (Flink users write both): neither keeps its input alive, and the
// per-record path does not allocate (AllocsPerRun adds 101 records).
func TestReduceCombinerKeepsNoInput(t *testing.T) {
	for name, fn := range map[string]func(a, b combKV) combKV{
		"accumulator's": func(a, b combKV) combKV { return combKV{a.K, a.V + b.V} },
		"input's":       func(a, b combKV) combKV { b.V += a.V; return b },
	} {
		c := newReduceCombiner(func(v combKV) string { return v.K }, fn)
		out := &collectOutput{}
		first, second := "alpha beta", "beta alpha"
		c.addValue(combKV{first[6:], 1}, out)
		c.addValue(combKV{second[:4], 1}, out)
		if n := testing.AllocsPerRun(100, func() { c.addValue(combKV{second[:4], 1}, out) }); n != 0 {
			t.Errorf("%s: adding to a kept key allocates %.1f times", name, n)
		}
		for k, p := range c.idx {
			v := *p
			if pointsInto(v.K, first) || pointsInto(v.K, second) {
				t.Errorf("%s: the kept value %+v points into an input", name, v)
			}
			if unsafe.StringData(v.K) != unsafe.StringData(k) {
				t.Errorf("%s: the kept value does not share the key's copy", name)
			}
		}
		c.Flush(out)
		if len(out.recs) != 1 || out.recs[0].Value.(combKV) != (combKV{"beta", 103}) {
			t.Fatalf("%s: flushed %v, want one {beta 103}", name, out.recs)
		}
	}
}
