package codec

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// decodeErr decodes src with c and requires an ErrCorrupt failure.
func decodeErr[T any](t *testing.T, c Codec[T], src []byte) *CorruptError {
	t.Helper()
	_, _, err := c.Decode(src)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Decode(%x) error = %v, want ErrCorrupt", src, err)
	}
	var ce *CorruptError
	if !errors.As(err, &ce) {
		t.Fatalf("Decode(%x) error %v is not a *CorruptError", src, err)
	}
	return ce
}

func TestHugeLengthFailsFast(t *testing.T) {
	// 10 bytes claiming a 2^40-byte string, []byte, slice and map.
	claim := appendUvarint(nil, 1<<40)
	src := append(claim, bytes.Repeat([]byte{'a'}, 10-len(claim))...)
	decodeErr(t, String, src)
	decodeErr(t, Bytes, src)
	decodeErr(t, SliceOf(Int64), src)
	decodeErr(t, MapOf(Int64, Int64), src)
	decodeErr(t, MustFor[[]Event](), src)
	decodeErr(t, MustFor[map[string]Event](), src)
	decodeErr(t, MustFor[MyBytes](), src)
	decodeErr(t, Gob[Event](), src)
	ce := decodeErr(t, MustFor[Event](), append([]byte{2}, src...))
	if ce.Offset != 1 || ce.Path != "codec.Event.Word" || !strings.Contains(ce.Reason, "1099511627776") {
		t.Errorf("error %q: offset %d path %q", ce, ce.Offset, ce.Path)
	}
	// Elements of more than one byte: the count is checked against the
	// minimum element size, not just the byte count.
	src = append(appendUvarint(nil, 3), make([]byte, 20)...) // 3 fixed64 need 24
	decodeErr(t, SliceOf(Int64Fixed), src)
	decodeErr(t, MustFor[[]Tuple2[int64, float64]](), src)
	if n := testing.AllocsPerRun(10, func() { String.Decode(src) }); n > 1 {
		t.Errorf("failing decode allocates %v times", n)
	}
}

func TestMalformedVarints(t *testing.T) {
	for _, src := range [][]byte{
		{},
		{0x80},
		{0xff, 0xff},
		{0x80, 0x00},                   // non-minimal zero
		{0xff, 0x80, 0x00},             // non-minimal
		bytes.Repeat([]byte{0xff}, 10), // unterminated
		append(bytes.Repeat([]byte{0xff}, 9), 0x02), // > 64 bits
		bytes.Repeat([]byte{0xff}, 11),
	} {
		decodeErr(t, Int64, src)
		decodeErr(t, Uint64, src)
		decodeErr(t, String, src)
	}
	// 2^64-1 is the largest accepted.
	if v, n, err := Uint64.Decode(append(bytes.Repeat([]byte{0xff}, 9), 0x01)); err != nil || n != 10 || v != 1<<64-1 {
		t.Errorf("max uvarint: %v %d %v", v, n, err)
	}
}

func TestRangeChecks(t *testing.T) {
	decodeErr(t, Int8, nil)
	decodeErr(t, Int32, Int64.Append(nil, 1<<31))
	decodeErr(t, Int16, Int64.Append(nil, -1<<15-1))
	decodeErr(t, Uint16, Uint64.Append(nil, 1<<16))
	decodeErr(t, Uint32, Uint64.Append(nil, 1<<32))
	decodeErr(t, Bool, []byte{2})
	decodeErr(t, Pointer(Int64), []byte{2, 0})
	type s struct {
		A int32
		B uint16
		C bool
		P *int
	}
	c := MustFor[s]()
	decodeErr(t, c, append(Int64.Append(nil, 1<<40), 0, 0, 0))
	decodeErr(t, c, []byte{0, 0xff, 0xff, 0x7f, 0, 0})
	decodeErr(t, c, []byte{0, 0, 7, 0})
	decodeErr(t, c, []byte{0, 0, 0, 9})
	decodeErr(t, Float64, []byte{1, 2, 3})
	decodeErr(t, MustFor[[16]byte](), make([]byte, 15))
	decodeErr(t, MustFor[[4]int64](), make([]byte, 3))
}

// TestTruncations decodes every proper prefix of valid encodings: each
// must fail with ErrCorrupt (never panic, never succeed).
func TestTruncations(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	g := gen{r}
	checkPrefixes(t, MustFor[Kitchen](), g, 50)
	checkPrefixes(t, MustFor[Tree](), g, 50)
	checkPrefixes(t, MustFor[[]Tuple3[string, *Event, map[int8]bool]](), g, 50)
	checkPrefixes(t, SliceOf(TupleCodec2(String, Pointer(Time))), g, 50)
}

func checkPrefixes[T any](t *testing.T, c Codec[T], g gen, rounds int) {
	t.Helper()
	for range rounds {
		v := g.value(reflect.TypeFor[T](), 0).Interface().(T)
		enc := c.Append(nil, v)
		for k := range len(enc) {
			if _, _, err := c.Decode(enc[:k]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Decode of %d/%d-byte prefix: err = %v", k, len(enc), err)
			}
		}
	}
}

func TestDepthBomb(t *testing.T) {
	// 1 MiB of "present" pointer flags for a linked list: must fail with
	// ErrCorrupt at MaxDepth, not exhaust the stack.
	src := bytes.Repeat([]byte{0, 1}, 1<<19)
	ce := decodeErr(t, MustFor[List](), src)
	if !strings.Contains(ce.Reason, "MaxDepth") {
		t.Errorf("reason = %q", ce.Reason)
	}
	// Nested slices: each level is a count of 1.
	src = append(bytes.Repeat([]byte{0, 1}, 1<<19), 0, 0, 0)
	decodeErr(t, MustFor[Tree](), src)
}

func TestEmptyElementCounts(t *testing.T) {
	type skipped struct {
		X int `codec:"-"`
	}
	// Elements that encode as nothing: a huge count must not allocate
	// unboundedly, and a huge map count decodes the single possible entry.
	decodeErr(t, MustFor[[]skipped](), appendUvarint(nil, 1<<40))
	got, _, err := MustFor[[]struct{}]().Decode(appendUvarint(nil, 1<<30))
	if err != nil || len(got) != 1<<30 {
		t.Errorf("[]struct{} of 2^30: len %d, %v", len(got), err)
	}
	m, _, err := MustFor[map[skipped]struct{}]().Decode(appendUvarint(nil, 1<<62))
	if err != nil || len(m) != 1 {
		t.Errorf("map: %v %v", m, err)
	}
}

func TestErrorPaths(t *testing.T) {
	c := MustFor[Kitchen]()
	v := Kitchen{SlS: []Event{{}, {Word: "abc"}}}
	enc := c.Append(nil, v)
	// Find the Word of SlS[1] ("abc") and make its length claim too long.
	i := bytes.Index(enc, []byte("\x03abc"))
	enc[i] = 0x7f
	_, _, err := c.Decode(enc)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Path != "codec.Kitchen.SlS[].Word" || ce.Offset != i {
		t.Fatalf("err = %v (path %q, offset %d, want %d)", err, ce.Path, ce.Offset, i)
	}
	// Composed codecs rebase offsets of element errors.
	tc := SliceOf(TupleCodec2(String, Time))
	enc = tc.Append(nil, []Tuple2[string, time.Time]{T2("ab", time.Time{}), T2("c", time.Time{})})
	_, _, err = tc.Decode(enc[:len(enc)-2])
	if !errors.As(err, &ce) || ce.Path != "[].F1" || ce.Offset != len(enc)-10 {
		t.Fatalf("composed err = %v (path %q, offset %d, len %d)", err, ce.Path, ce.Offset, len(enc))
	}
}

// badCodec breaks the Codec contract; composed codecs must not panic.
type badCodec struct{}

func (badCodec) Append(dst []byte, v int) []byte { return append(dst, 1) }
func (badCodec) Decode(src []byte) (int, int, error) {
	if len(src) > 0 && src[0] == 9 {
		return 0, 0, errors.New("custom failure")
	}
	return 0, 1000, nil
}

func TestForeignCodecContract(t *testing.T) {
	decodeErr(t, SliceOf[int](badCodec{}), []byte{1, 1})
	ce := decodeErr(t, TupleCodec2[int, int](Int, badCodec{}), []byte{0, 9})
	if ce.Offset != 1 || !strings.Contains(ce.Error(), "custom failure") {
		t.Errorf("got %v", ce)
	}
}

func TestGobHostile(t *testing.T) {
	c := Gob[Event]()
	good := c.Append(nil, Event{Word: "x"})
	// Corrupt the inner gob message length to claim ~2^56 bytes.
	bad := append([]byte(nil), good...)
	bad[1] = 0xf9 // 7-byte count follows
	decodeErr(t, c, bad)
	for k := range len(good) {
		decodeErr(t, c, good[:k])
	}
}

func TestVarintAllLengths(t *testing.T) {
	// Every length from 1 to 10 bytes, at the end of the input and with
	// slack after it (the 8-byte fast path), plus non-minimal forms.
	for shift := range 64 {
		for _, x := range []uint64{1 << shift, 1<<shift - 1, 1<<shift + 1} {
			enc := appendUvarint(nil, x)
			for _, src := range [][]byte{enc, append(append([]byte(nil), enc...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)} {
				got, n, err := readUvarint(src, 0)
				if err != nil || got != x || n != len(enc) {
					t.Fatalf("%d (%x): got %d, %d, %v", x, src, got, n, err)
				}
			}
			if len(enc) < 10 {
				nonMin := append(append([]byte(nil), enc...), 0)
				nonMin[len(enc)-1] |= 0x80
				if _, _, err := readUvarint(append(nonMin, 0, 0, 0, 0, 0, 0, 0, 0), 0); err == nil {
					t.Fatalf("accepted non-minimal %x", nonMin)
				}
			}
		}
	}
}
