package codec

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
	"testing/quick"
	"time"
)

// TestQuickBuiltins uses testing/quick for the primitive codecs.
func TestQuickBuiltins(t *testing.T) {
	props := map[string]any{
		"int64":  func(v int64) bool { return rt(Int64, v) && rt(Int64Fixed, v) },
		"int32":  func(v int32) bool { return rt(Int32, v) && rt(Int32Fixed, v) },
		"int16":  func(v int16) bool { return rt(Int16, v) },
		"int8":   func(v int8) bool { return rt(Int8, v) },
		"int":    func(v int) bool { return rt(Int, v) },
		"uint64": func(v uint64) bool { return rt(Uint64, v) && rt(Uint64Fixed, v) },
		"uint32": func(v uint32) bool { return rt(Uint32, v) && rt(Uint32Fixed, v) },
		"uint16": func(v uint16) bool { return rt(Uint16, v) },
		"uint":   func(v uint) bool { return rt(Uint, v) },
		"string": func(v string) bool { return rt(String, v) },
		"bytes":  func(v []byte) bool { return len(v) == 0 || rt(Bytes, v) },
		"dur":    func(v int64) bool { return rt(Duration, time.Duration(v)) },
		"time":   func(v int64) bool { return rt(Time, time.Unix(0, v).UTC()) },
		"tuple": func(a string, b int64, c []uint16) bool {
			return rt(TupleCodec3(String, Int64, SliceOf(Uint16)), T3(a, b, nilIfEmpty(c)))
		},
		"map": func(m map[string]int32) bool {
			if len(m) == 0 {
				m = nil
			}
			return rt(MapOf(String, Int32), m) && rt(MustFor[map[string]int32](), m)
		},
	}
	for name, f := range props {
		if err := quick.Check(f, &quick.Config{MaxCount: 2000}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func rt[T any](c Codec[T], v T) bool {
	enc := c.Append(nil, v)
	got, n, err := c.Decode(enc)
	return err == nil && n == len(enc) && reflect.DeepEqual(got, v)
}

// TestPropertyFor round-trips random values of many derived types, and
// checks that re-encoding the decoded value reproduces the bytes (maps
// excepted, whose order varies).
func TestPropertyFor(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 7))
	g := gen{r}
	propertyFor[Kitchen](t, g, 3000, false)
	propertyFor[Event](t, g, 3000, true)
	propertyFor[Tree](t, g, 2000, false)
	propertyFor[*List](t, g, 1000, true)
	propertyFor[[]Tuple2[string, int64]](t, g, 2000, true)
	propertyFor[Tuple3[[3]MyInt, *[]byte, map[uint8][]string]](t, g, 2000, false)
	propertyFor[[][]*Tuple2[float32, time.Time]](t, g, 2000, true)
	propertyFor[map[MyString]Embedded](t, g, 2000, false)
}

func propertyFor[T any](t *testing.T, g gen, rounds int, canonical bool) {
	t.Helper()
	c := MustFor[T]()
	typ := reflect.TypeFor[T]()
	for range rounds {
		v := g.value(typ, 0).Interface().(T)
		enc := c.Append(nil, v)
		got, n, err := c.Decode(enc)
		if err != nil || n != len(enc) {
			t.Fatalf("%v: Decode(%x) = n %d, err %v", typ, enc, n, err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Fatalf("%v: round trip changed the value:\n got  %#v\n want %#v", typ, got, v)
		}
		if canonical {
			if again := c.Append(nil, got); !bytes.Equal(again, enc) {
				t.Fatalf("%v: re-encoding differs: %x vs %x", typ, again, enc)
			}
		}
	}
}
