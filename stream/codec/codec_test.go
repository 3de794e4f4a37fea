package codec

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// roundTrip encodes v after a prefix (to check Append appends), decodes it
// and checks the value, the byte count and that For agrees with c.
func roundTrip[T any](t *testing.T, c Codec[T], v T) []byte {
	t.Helper()
	prefix := []byte("xyz")
	buf := c.Append(append([]byte(nil), prefix...), v)
	if !bytes.Equal(buf[:3], prefix) {
		t.Fatalf("Append clobbered dst prefix: %q", buf[:3])
	}
	enc := buf[3:]
	// Trailing bytes must be left alone.
	got, n, err := c.Decode(append(enc[:len(enc):len(enc)], 0xff, 0xff))
	if err != nil {
		t.Fatalf("Decode(%x) of %#v: %v", enc, v, err)
	}
	if n != len(enc) {
		t.Fatalf("Decode used %d bytes, want %d (value %#v)", n, len(enc), v)
	}
	if !equal(got, v) {
		t.Fatalf("round trip of %#v gave %#v (bytes %x)", v, got, enc)
	}
	return enc
}

func equal[T any](a, b T) bool {
	if at, ok := any(a).(time.Time); ok {
		return at.Equal(any(b).(time.Time))
	}
	return reflect.DeepEqual(a, b)
}

func TestBuiltinRoundTrip(t *testing.T) {
	for _, v := range []bool{false, true} {
		roundTrip(t, Bool, v)
	}
	for _, v := range []int64{0, 1, -1, 63, -64, 64, -65, math.MaxInt64, math.MinInt64, 1 << 40} {
		roundTrip(t, Int64, v)
		roundTrip(t, Int64Fixed, v)
		roundTrip(t, Int, int(v))
	}
	for _, v := range []int32{0, -1, math.MaxInt32, math.MinInt32} {
		roundTrip(t, Int32, v)
		roundTrip(t, Int32Fixed, v)
	}
	for _, v := range []int16{0, -1, math.MaxInt16, math.MinInt16} {
		roundTrip(t, Int16, v)
	}
	for _, v := range []int8{0, -1, math.MaxInt8, math.MinInt8} {
		roundTrip(t, Int8, v)
	}
	for _, v := range []uint64{0, 1, 127, 128, 1<<63 + 5, math.MaxUint64} {
		roundTrip(t, Uint64, v)
		roundTrip(t, Uint64Fixed, v)
		roundTrip(t, Uint, uint(v))
	}
	for _, v := range []uint32{0, 300, math.MaxUint32} {
		roundTrip(t, Uint32, v)
		roundTrip(t, Uint32Fixed, v)
	}
	for _, v := range []uint16{0, 300, math.MaxUint16} {
		roundTrip(t, Uint16, v)
	}
	for _, v := range []uint8{0, 200, 255} {
		roundTrip(t, Uint8, v)
	}
	for _, v := range []float64{0, math.Copysign(0, -1), 1.5, -math.MaxFloat64, math.SmallestNonzeroFloat64, math.Inf(1), math.Inf(-1)} {
		roundTrip(t, Float64, v)
		roundTrip(t, Float32, float32(v))
	}
	for _, v := range []string{"", "a", strings.Repeat("é", 200), "\x00\xff"} {
		roundTrip(t, String, v)
	}
	for _, v := range [][]byte{nil, {0}, bytes.Repeat([]byte{7}, 300)} {
		roundTrip(t, Bytes, v)
	}
	for _, v := range []time.Time{{}, time.Unix(0, 0).UTC(), time.Unix(1_700_000_000, 123456789).UTC(), time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1700, 1, 1, 0, 0, 0, 1, time.UTC)} {
		roundTrip(t, Time, v)
	}
	for _, v := range []time.Duration{0, time.Nanosecond, -time.Hour, math.MaxInt64} {
		roundTrip(t, Duration, v)
	}
}

func TestEncodings(t *testing.T) {
	// Spot-check the documented wire formats.
	cases := []struct {
		got, want []byte
	}{
		{Int64.Append(nil, 0), []byte{0}},
		{Int64.Append(nil, -1), []byte{1}},
		{Int64.Append(nil, 1), []byte{2}},
		{Int64.Append(nil, -65), []byte{0x81, 0x01}},
		{Uint64.Append(nil, 300), []byte{0xac, 0x02}},
		{Int64Fixed.Append(nil, 1), []byte{1, 0, 0, 0, 0, 0, 0, 0}},
		{Int8.Append(nil, -1), []byte{0xff}},
		{Float32.Append(nil, 1), []byte{0, 0, 0x80, 0x3f}},
		{String.Append(nil, "hi"), []byte{2, 'h', 'i'}},
		{Bytes.Append(nil, nil), []byte{0}},
		{Bool.Append(nil, true), []byte{1}},
	}
	for i, c := range cases {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("case %d: got %x, want %x", i, c.got, c.want)
		}
	}
	// Float NaN payloads survive (bitwise).
	nan := math.Float64frombits(0x7ff8_0000_dead_beef)
	got, _, err := Float64.Decode(Float64.Append(nil, nan))
	if err != nil || math.Float64bits(got) != math.Float64bits(nan) {
		t.Errorf("NaN payload: got %x, %v", math.Float64bits(got), err)
	}
}

func TestTimeKeepsInstant(t *testing.T) {
	loc := time.FixedZone("X", 3600)
	now := time.Now().In(loc) // has a monotonic reading and a zone
	got, _, err := Time.Decode(Time.Append(nil, now))
	if err != nil || !got.Equal(now) || got.Location() != time.UTC {
		t.Fatalf("got %v (%v), %v; want %v in UTC", got, got.Location(), err, now)
	}
}

func TestComposedRoundTrip(t *testing.T) {
	roundTrip(t, TupleCodec2(String, Int64), T2("word", int64(-3)))
	roundTrip(t, TupleCodec3(Bool, Float64, Bytes), T3(true, 2.5, []byte("x")))
	roundTrip(t, SliceOf(Int64), nil)
	roundTrip(t, SliceOf(Int64), []int64{1, -2, 3 << 50})
	roundTrip(t, SliceOf(SliceOf(String)), [][]string{{"a"}, nil, {"b", ""}})
	roundTrip(t, MapOf(String, Int64), nil)
	roundTrip(t, MapOf(String, Int64), map[string]int64{"a": 1, "b": -1, "": 0})
	roundTrip(t, MapOf(Int32, SliceOf(TupleCodec2(String, Time))), map[int32][]Tuple2[string, time.Time]{
		7: {T2("x", time.Unix(5, 5).UTC()), T2("", time.Time{})},
	})
	roundTrip(t, Pointer(String), nil)
	s := "hello"
	roundTrip(t, Pointer(String), &s)
	roundTrip(t, Pointer(Pointer(Int64)), new(*int64))
	roundTrip(t, Gob[Event](), Event{ID: 1, Word: "gob", Count: 2, TS: time.Unix(9, 0).UTC()})
	roundTrip(t, Gob[map[string][]int](), map[string][]int{"a": {1, 2}})
}

// TestForMatchesComposed checks that derived codecs produce exactly the
// bytes of the equivalent explicit codecs, so they interoperate.
func TestForMatchesComposed(t *testing.T) {
	check := func(name string, a, b []byte) {
		t.Helper()
		if !bytes.Equal(a, b) {
			t.Errorf("%s: For gives %x, composed gives %x", name, a, b)
		}
	}
	tup := T2("word", int64(42))
	check("tuple", MustFor[Tuple2[string, int64]]().Append(nil, tup), TupleCodec2(String, Int64).Append(nil, tup))
	ev := Event{ID: -7, Word: "w", Count: 300, TS: time.Unix(1, 2).UTC()}
	evc := TupleCodec2(TupleCodec2(Int64, String), TupleCodec2(Int64, Time))
	check("event", MustFor[Event]().Append(nil, ev), evc.Append(nil, T2(T2(ev.ID, ev.Word), T2(ev.Count, ev.TS))))
	sl := []Tuple3[int8, uint32, []byte]{{-1, 1 << 20, []byte("ab")}, {}}
	check("slice", MustFor[[]Tuple3[int8, uint32, []byte]]().Append(nil, sl), SliceOf(TupleCodec3(Int8, Uint32, Bytes)).Append(nil, sl))
	m := map[string]float32{"k": 1.5}
	check("map", MustFor[map[string]float32]().Append(nil, m), MapOf(String, Float32).Append(nil, m))
	p := &ev
	check("ptr", MustFor[*Event]().Append(nil, p), Pointer(MustFor[Event]()).Append(nil, p))
	check("nilptr", MustFor[*Event]().Append(nil, nil), Pointer(MustFor[Event]()).Append(nil, nil))
	type fx struct {
		A int64 `codec:"fixed"`
		B uint32
	}
	check("fixed", MustFor[fx]().Append(nil, fx{-1, 9}), TupleCodec2(Int64Fixed, Uint32).Append(nil, T2(int64(-1), uint32(9))))
	// Named types use the same encoding as their underlying kinds.
	check("named", MustFor[MyInt]().Append(nil, -5), Int32.Append(nil, -5))
	check("namedbytes", MustFor[MyBytes]().Append(nil, MyBytes("ab")), Bytes.Append(nil, []byte("ab")))
	check("bytes-as-slice", MustFor[[]uint8]().Append(nil, []byte{1, 200}), SliceOf(Uint8).Append(nil, []byte{1, 200}))
}

func TestForBuiltinsAreBuiltins(t *testing.T) {
	if c, _ := For[int64](); c != Int64 {
		t.Errorf("For[int64] = %T, want Int64", c)
	}
	if c, _ := For[string](); c != String {
		t.Errorf("For[string] = %T, want String", c)
	}
	if c, _ := For[time.Time](); c != Time {
		t.Errorf("For[time.Time] = %T, want Time", c)
	}
}

func TestForRoundTrip(t *testing.T) {
	one := 1
	pone := &one
	name := "n"
	k := Kitchen{
		B: true, I: -1, I8: -8, I16: -16, I32: -32, I64: math.MinInt64,
		U: 1, U8: 8, U16: 16, U32: 32, U64: math.MaxUint64, UP: 77,
		F32: 1.25, F64: -2.5, S: "string", Bs: []byte("bytes"),
		T: time.Unix(1_700_000_000, 5).UTC(), D: time.Minute,
		Fx32: -3, Fx64: 1 << 60, Named: 12, NamedS: "ns", NamedF: 0.5, Blob: MyBytes("blob"),
		Arr: [3]int16{1, -2, 3}, BArr: [4]byte{1, 2, 3, 4},
		Sl: []string{"a", "", "c"}, SlS: []Event{{ID: 1}, {Word: "w", TS: time.Unix(3, 0).UTC()}},
		SlI8: []int8{-1, 1},
		M:    map[string]int64{"x": 1, "y": -1},
		MS:   map[int32][]Event{-1: {{ID: 2}}, 5: nil},
		P:    &Event{ID: 9, Word: "p"}, PP: &pone,
		Tup: T2("t", int64(2)), Tup3: T3(true, []int{1, 2}, &name),
		Embedded: Embedded{E1: "e", E2: 65535},
		Arr2:     [2][2]uint8{{1, 2}, {3, 4}},
	}
	c := MustFor[Kitchen]()
	roundTrip(t, c, k)
	roundTrip(t, c, Kitchen{})
	// Skipped fields are not encoded and decode as zero.
	k2 := Kitchen{hidden: 5, Skipped: func() {}}
	got, _, err := c.Decode(c.Append(nil, k2))
	if err != nil || got.hidden != 0 || got.Skipped != nil {
		t.Fatalf("skipped fields: %+v, %v", got, err)
	}

	roundTrip(t, MustFor[[]Kitchen](), []Kitchen{k, {}, k})
	roundTrip(t, MustFor[map[MyString]*Kitchen](), map[MyString]*Kitchen{"a": &k, "b": nil})
	roundTrip(t, MustFor[[2]map[int64][]*string](), [2]map[int64][]*string{{1: {&name, nil}}, nil})
	roundTrip(t, MustFor[*[]Tuple2[MyFloat, [0]int]](), &[]Tuple2[MyFloat, [0]int]{{F0: 1}})
	roundTrip(t, MustFor[struct{}](), struct{}{})
	roundTrip(t, MustFor[[]struct{}](), make([]struct{}, 1000))
	roundTrip(t, MustFor[map[struct{}]struct{}](), map[struct{}]struct{}{{}: {}})
	roundTrip(t, MustFor[[1 << 20]struct{}](), [1 << 20]struct{}{})

	tree := Tree{V: 1, Kids: []Tree{{V: 2}, {V: 3, Left: &Tree{V: 4}}}, Attrs: map[string]*Tree{"a": {V: 5, Kids: []Tree{{V: 6}}}, "nil": nil}}
	roundTrip(t, MustFor[Tree](), tree)
	var list *List
	for i := range 5000 {
		list = &List{V: int64(i), Next: list}
	}
	roundTrip(t, MustFor[*List](), list)
}

func TestForUnsupported(t *testing.T) {
	type withFunc struct {
		Name    string
		Handler func()
	}
	type withUnexported struct {
		A      int
		secret string
	}
	_ = withUnexported{secret: "used"}
	type deep struct {
		M map[string][]*struct{ C chan int }
	}
	type badTag struct {
		A string `codec:"fixed"`
	}
	cases := []struct {
		err  error
		want string
	}{
		{errOf[withFunc](), "codec: codec.withFunc.Handler: func() is not serializable"},
		{errOf[withUnexported](), "codec: codec.withUnexported.secret: unexported field"},
		{errOf[deep](), "codec: codec.deep.M[value][].C: chan int is not serializable"},
		{errOf[any](), "codec: interface {}: interface {} is not serializable"},
		{errOf[[]complex128](), "codec: []complex128[]: complex128 is not serializable"},
		{errOf[map[string]any](), "codec: map[string]interface {}[value]: interface {} is not serializable"},
		{errOf[badTag](), `codec: codec.badTag.A: tag codec:"fixed" applies only to`},
	}
	for _, c := range cases {
		if c.err == nil || !strings.HasPrefix(c.err.Error(), c.want) {
			t.Errorf("got error %v, want prefix %q", c.err, c.want)
		}
		var ue *UnsupportedError
		if !errors.As(c.err, &ue) {
			t.Errorf("%v is not an *UnsupportedError", c.err)
		}
	}
	func() {
		defer func() {
			r := recover()
			if r == nil || !strings.Contains(r.(string), "func() is not serializable") {
				t.Errorf("MustFor panic = %v", r)
			}
		}()
		MustFor[withFunc]()
	}()
	if fp := Fingerprint[withFunc](); !strings.HasPrefix(fp, "unsupported: ") {
		t.Errorf("Fingerprint of unsupported type = %q", fp)
	}
}

func errOf[T any]() error {
	_, err := For[T]()
	return err
}

func TestFingerprint(t *testing.T) {
	if got, want := Fingerprint[Event](), "gofl.codec/1 struct{ID int64;Word string;Count int64;TS time}"; got != want {
		t.Errorf("Fingerprint[Event] = %q, want %q", got, want)
	}
	// Same layout in another type: same fingerprint.
	type event2 struct {
		ID    int64
		Word  string
		Count int64
		TS    time.Time
		X     int `codec:"-"`
	}
	if Fingerprint[event2]() != Fingerprint[Event]() {
		t.Errorf("same layout, different fingerprints: %q vs %q", Fingerprint[event2](), Fingerprint[Event]())
	}
	// Any change in order, names, kinds or encodings changes it.
	type reordered struct {
		Word  string
		ID    int64
		Count int64
		TS    time.Time
	}
	type renamed struct {
		ID    int64
		Text  string
		Count int64
		TS    time.Time
	}
	type retyped struct {
		ID    int32
		Word  string
		Count int64
		TS    time.Time
	}
	type fixed struct {
		ID    int64 `codec:"fixed"`
		Word  string
		Count int64
		TS    time.Time
	}
	seen := map[string]string{}
	for name, fp := range map[string]string{
		"Event": Fingerprint[Event](), "reordered": Fingerprint[reordered](), "renamed": Fingerprint[renamed](),
		"retyped": Fingerprint[retyped](), "fixed": Fingerprint[fixed](), "tuple": Fingerprint[Tuple2[string, int64]](),
		"[]Event": Fingerprint[[]Event](), "*Event": Fingerprint[*Event](),
	} {
		if other, dup := seen[fp]; dup {
			t.Errorf("%s and %s share fingerprint %q", name, other, fp)
		}
		seen[fp] = name
	}
	if got, want := Fingerprint[Tree](), "gofl.codec/1 struct{V int;Kids []#0;Left *#0;Attrs map[string]*#0}"; got != want {
		t.Errorf("Fingerprint[Tree] = %q, want %q", got, want)
	}
	if got, want := Fingerprint[Tuple2[string, int64]](), "gofl.codec/1 struct{F0 string;F1 int64}"; got != want {
		t.Errorf("Fingerprint[Tuple2] = %q, want %q", got, want)
	}
	if Fingerprint[int64]() != "gofl.codec/1 int64" || Fingerprint[MyBytes]() != "gofl.codec/1 []uint8" {
		t.Errorf("leaf fingerprints: %q %q", Fingerprint[int64](), Fingerprint[MyBytes]())
	}
	// Stable across calls.
	if fp1, fp2 := Fingerprint[Kitchen](), Fingerprint[Kitchen](); fp1 != fp2 {
		t.Error("unstable fingerprint")
	}
}

func TestEncodeTooDeepPanics(t *testing.T) {
	l := &List{V: 1}
	l.Next = l // cycle
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(r.(string), "MaxDepth") {
			t.Fatalf("recover() = %v", r)
		}
	}()
	MustFor[List]().Append(nil, *l)
}

func TestNoAllocEncode(t *testing.T) {
	ev := Event{ID: 1, Word: strings.Repeat("w", 70), Count: 3, TS: time.Unix(1, 1)}
	c := MustFor[Event]()
	k := MustFor[Kitchen]()
	kv := Kitchen{S: "x", M: map[string]int64{"a": 1}, P: &ev, SlS: []Event{ev}}
	tc := MustFor[Tuple2[string, int64]]()
	buf := make([]byte, 0, 4096)
	for name, f := range map[string]func(){
		"Event":   func() { buf = c.Append(buf[:0], ev) },
		"Kitchen": func() { buf = k.Append(buf[:0], kv) },
		"Tuple2":  func() { buf = tc.Append(buf[:0], T2("a", int64(1))) },
		"Int64":   func() { buf = Int64.Append(buf[:0], 5) },
	} {
		n := testing.AllocsPerRun(100, f)
		if raceEnabled && name == "Kitchen" {
			continue // its map scratch is pooled; checked by the non-race pass
		}
		if n != 0 {
			t.Errorf("%s: Append allocates %.1f times per record", name, n)
		}
	}
	enc := c.Append(nil, ev)
	if n := testing.AllocsPerRun(100, func() { c.Decode(enc) }); n != 1 {
		t.Errorf("Event: Decode allocates %.1f times per record, want 1 (the string)", n)
	}
}
