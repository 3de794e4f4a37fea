package stream

import (
	"testing"

	"github.com/gofl/gofl/stream/codec"
)

type boxedPair struct {
	Word  string
	Count int64
}

func TestSlabBoxerValuesStayDistinct(t *testing.T) {
	b := newSlabBoxer[boxedPair]()
	if b == nil {
		t.Fatal("no slab boxer for a struct")
	}
	var boxed []any
	for i := range 3*boxSlab + 5 {
		boxed = append(boxed, b.box(boxedPair{Word: string(rune('a' + i%26)), Count: int64(i)}))
	}
	for i, v := range boxed {
		p, ok := v.(boxedPair)
		if !ok || p.Count != int64(i) || p.Word != string(rune('a'+i%26)) {
			t.Fatalf("value %d: %#v", i, v)
		}
		if v != any(p) {
			t.Fatalf("value %d does not compare equal to its plain boxing", i)
		}
	}
	if n := testing.AllocsPerRun(1000, func() { _ = b.box(boxedPair{Count: 1}) }); n > 1.0/boxSlab+0.01 {
		t.Errorf("%v allocations per box, want at most 1/%d", n, boxSlab)
	}
}

func TestSlabBoxerPointerShapedAndEmpty(t *testing.T) {
	if newSlabBoxer[*boxedPair]() != nil || newSlabBoxer[map[string]int]() != nil || newSlabBoxer[struct{}]() != nil {
		t.Error("a slab boxer for a pointer-shaped or empty type")
	}
	if newSlabBoxer[int64]() == nil || newSlabBoxer[string]() == nil {
		t.Error("no slab boxer for int64 or string")
	}
}

func TestDecoderForRoundTrips(t *testing.T) {
	c, err := codec.For[boxedPair]()
	if err != nil {
		t.Fatal(err)
	}
	vc := valueCodec[boxedPair]{c: c, typ: "boxedPair"}
	dec := decoderFor(vc)
	for i := range 100 {
		want := boxedPair{Word: "wörd", Count: int64(i)}
		b, err := vc.Append(nil, want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dec(b)
		if err != nil || got.(boxedPair) != want {
			t.Fatalf("decoded %#v, %v; want %#v", got, err, want)
		}
		if _, err := dec(append(b, 0)); err == nil {
			t.Fatal("no error for a trailing byte")
		}
	}
}
