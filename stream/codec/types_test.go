package codec

import (
	"math"
	"math/rand/v2"
	"reflect"
	"time"
)

// Test types shared by the tests, fuzz targets and benchmarks.

type Event struct {
	ID    int64
	Word  string
	Count int64
	TS    time.Time
}

type (
	MyInt    int32
	MyString string
	MyBytes  []byte
	MyFloat  float64
)

type Embedded struct {
	E1 string
	E2 uint16
}

type Kitchen struct {
	B      bool
	I      int
	I8     int8
	I16    int16
	I32    int32
	I64    int64
	U      uint
	U8     uint8
	U16    uint16
	U32    uint32
	U64    uint64
	UP     uintptr
	F32    float32
	F64    float64
	S      string
	Bs     []byte
	T      time.Time
	D      time.Duration
	Fx32   int32  `codec:"fixed"`
	Fx64   uint64 `codec:"fixed"`
	Named  MyInt
	NamedS MyString
	NamedF MyFloat
	Blob   MyBytes
	Arr    [3]int16
	BArr   [4]byte
	Sl     []string
	SlS    []Event
	SlI8   []int8
	M      map[string]int64
	MS     map[int32][]Event
	P      *Event
	PP     **int
	Tup    Tuple2[string, int64]
	Tup3   Tuple3[bool, []int, *string]
	Nested struct{ A, B int }
	Embedded
	Skipped func() `codec:"-"`
	hidden  int    `codec:"-"`
	_       [2]byte
	Empty   struct{}
	Arr2    [2][2]uint8
}

// Tree is recursive through a slice, a pointer and a map.
type Tree struct {
	V     int
	Kids  []Tree
	Left  *Tree
	Attrs map[string]*Tree
}

type List struct {
	V    int64
	Next *List
}

// gen produces random values of arbitrary supported types. Zero-length
// slices and maps are nil, floats are never NaN (so reflect.DeepEqual
// works), and times are in UTC without monotonic reading.
type gen struct {
	r *rand.Rand
}

func (g gen) value(t reflect.Type, depth int) reflect.Value {
	v := reflect.New(t).Elem()
	g.fill(v, depth)
	return v
}

func (g gen) n(max int) int { return g.r.IntN(max + 1) }

func (g gen) fill(v reflect.Value, depth int) {
	t := v.Type()
	if t == timeType {
		switch g.r.IntN(4) {
		case 0: // zero time
		case 1:
			v.Set(reflect.ValueOf(time.Unix(0, int64(g.r.Uint64())).UTC()))
		default:
			v.Set(reflect.ValueOf(time.Unix(1_700_000_000+g.r.Int64N(1e8), g.r.Int64N(1e9)).UTC()))
		}
		return
	}
	switch t.Kind() {
	case reflect.Bool:
		v.SetBool(g.r.IntN(2) == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		x := g.int64()
		v.SetInt(x >> (64 - t.Bits()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(uint64(g.int64()) >> (64 - t.Bits()))
	case reflect.Float32, reflect.Float64:
		for {
			var f float64
			if t.Kind() == reflect.Float32 {
				f = float64(math.Float32frombits(g.r.Uint32()))
			} else {
				f = math.Float64frombits(g.r.Uint64())
			}
			if g.r.IntN(3) == 0 {
				f = float64(g.r.IntN(100)) / 4
			}
			if !math.IsNaN(f) {
				v.SetFloat(f)
				return
			}
		}
	case reflect.String:
		b := make([]byte, g.n(20))
		for i := range b {
			b[i] = byte(g.r.IntN(256))
		}
		v.SetString(string(b))
	case reflect.Slice:
		n := g.n(4)
		if depth > 3 {
			n = 0
		}
		if n == 0 {
			return
		}
		s := reflect.MakeSlice(t, n, n)
		for i := range n {
			g.fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			g.fill(v.Index(i), depth+1)
		}
	case reflect.Map:
		n := g.n(3)
		if depth > 3 || n == 0 {
			return
		}
		m := reflect.MakeMap(t)
		for range n {
			m.SetMapIndex(g.value(t.Key(), depth+1), g.value(t.Elem(), depth+1))
		}
		if m.Len() > 0 {
			v.Set(m)
		}
	case reflect.Pointer:
		if depth > 3 || g.r.IntN(3) == 0 {
			return
		}
		p := reflect.New(t.Elem())
		g.fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Struct:
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() || sf.Tag.Get("codec") == "-" {
				continue
			}
			g.fill(v.Field(i), depth)
		}
	}
}

// int64 favours small magnitudes and boundary values.
func (g gen) int64() int64 {
	switch g.r.IntN(6) {
	case 0:
		return int64(g.r.IntN(256)) - 128
	case 1:
		return math.MinInt64 + int64(g.r.IntN(3))
	case 2:
		return math.MaxInt64 - int64(g.r.IntN(3))
	case 3:
		return int64(g.r.Uint64()) >> g.r.IntN(64)
	}
	return int64(g.r.Uint64())
}
