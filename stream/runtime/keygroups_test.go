package runtime

import (
	"math"
	"testing"
)

type namedKey string

func checkKeyHasher[K comparable](t *testing.T, keys ...K) {
	t.Helper()
	hash := KeyHasher[K]()
	for _, k := range keys {
		if got, want := hash(k), HashKey(k); got != want {
			t.Errorf("KeyHasher[%T](%v) = %x, HashKey = %x", k, k, got, want)
		}
	}
}

// KeyHasher must agree with HashKey: producers with the typed path and
// state restored through HashKey must put a key in the same key group.
func TestKeyHasherAgreesWithHashKey(t *testing.T) {
	checkKeyHasher(t, "", "a", "köln", "東京", "word4711")
	checkKeyHasher(t, 0, 1, -1, math.MaxInt, math.MinInt)
	checkKeyHasher(t, int64(0), int64(-7), int64(math.MaxInt64))
	checkKeyHasher(t, int32(3), int32(-3))
	checkKeyHasher(t, namedKey("x"), namedKey(""))
	checkKeyHasher(t, [2]int{1, 2}, [2]int{})
	checkKeyHasher(t, struct {
		A string
		B int
	}{"a", 1})
}

func TestKeyHasherDoesNotAllocate(t *testing.T) {
	hs, hi := KeyHasher[string](), KeyHasher[int64]()
	key := string([]byte("some word"))
	if n := testing.AllocsPerRun(100, func() { _ = hs(key) + hi(42) }); n != 0 {
		t.Errorf("%v allocations per hash, want 0", n)
	}
}

func TestKeyGroupPartitionerHashOf(t *testing.T) {
	keyOf := func(v any) any { return v.(string) }
	hash := KeyHasher[string]()
	typed := KeyGroupPartitioner{KeyOf: keyOf, HashOf: func(v any) uint64 { return hash(v.(string)) }, MaxParallelism: 128}
	boxed := KeyGroupPartitioner{KeyOf: keyOf, MaxParallelism: 128}
	for _, w := range []string{"a", "b", "stream", "batch", "köln", "x1", "y2", "z3"} {
		for _, n := range []int{1, 2, 3, 7} {
			if got, want := typed.Select(Record{Value: w}, n), boxed.Select(Record{Value: w}, n); got != want {
				t.Errorf("%q of %d: typed %d, boxed %d", w, n, got, want)
			}
			if want := OperatorIndex(KeyGroup(w, 128), 128, n); boxed.Select(Record{Value: w}, n) != want {
				t.Errorf("%q of %d: boxed %d, want %d", w, n, boxed.Select(Record{Value: w}, n), want)
			}
		}
	}
}
