package codec

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// The fuzz targets decode arbitrary bytes. Decoding must never panic, must
// fail only with ErrCorrupt, must report a byte count within the input,
// and whatever it accepts must re-encode to something that decodes again;
// for types without maps the re-encoding must be the accepted bytes
// exactly (the format is canonical: minimal varints, 0/1 flags).
//
//	go test -run '^$' -fuzz FuzzDecodeEvent -fuzztime 20s ./stream/codec

func seed[T any](f *testing.F, c Codec[T], seed uint64) {
	g := gen{rand.New(rand.NewPCG(seed, seed))}
	for range 8 {
		f.Add(c.Append(nil, g.value(reflect.TypeFor[T](), 0).Interface().(T)))
	}
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
}

func fuzzDecode[T any](t *testing.T, c Codec[T], src []byte, canonical bool) {
	v, n, err := c.Decode(src)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error %v does not wrap ErrCorrupt", err)
		}
		return
	}
	if n < 0 || n > len(src) {
		t.Fatalf("n = %d for %d bytes", n, len(src))
	}
	enc := c.Append(nil, v)
	if canonical && !bytes.Equal(enc, src[:n]) {
		t.Fatalf("accepted %x but re-encodes as %x", src[:n], enc)
	}
	if _, n2, err := c.Decode(enc); err != nil || n2 != len(enc) {
		t.Fatalf("re-encoding %x does not decode: n %d, %v", enc, n2, err)
	}
}

func FuzzDecodeEvent(f *testing.F) {
	c := MustFor[Event]()
	seed(f, c, 1)
	f.Add(c.Append(nil, Event{ID: 1, Word: "hello", Count: 2, TS: time.Unix(1, 2)}))
	f.Fuzz(func(t *testing.T, src []byte) { fuzzDecode(t, c, src, true) })
}

func FuzzDecodeKitchen(f *testing.F) {
	c := MustFor[Kitchen]()
	seed(f, c, 2)
	f.Fuzz(func(t *testing.T, src []byte) { fuzzDecode(t, c, src, false) })
}

func FuzzDecodeTree(f *testing.F) {
	c := MustFor[Tree]()
	seed(f, c, 3)
	f.Fuzz(func(t *testing.T, src []byte) { fuzzDecode(t, c, src, false) })
}

func FuzzDecodeComposed(f *testing.F) {
	c := SliceOf(TupleCodec3(String, Pointer(Time), SliceOf(Int16)))
	seed(f, c, 4)
	f.Fuzz(func(t *testing.T, src []byte) { fuzzDecode(t, c, src, true) })
}

func FuzzDecodeGob(f *testing.F) {
	c := Gob[Event]()
	seed(f, c, 5)
	f.Fuzz(func(t *testing.T, src []byte) {
		if _, _, err := c.Decode(src); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error %v does not wrap ErrCorrupt", err)
		}
	})
}
