package runtime

import (
	"strings"
	"testing"
)

func TestKeyGroupsStable(t *testing.T) {
	type k struct {
		A string
		B int
	}
	// Pinned: key groups must not change between builds and processes.
	if a, b := HashKey("hello"), HashKey(string([]byte("hello"))); a != b {
		t.Fatal("hash not stable")
	}
	if HashKey(k{"a", 1}) == HashKey(k{"a", 2}) || HashKey(int64(7)) != HashKey(int64(3+4)) {
		t.Fatal("struct keys")
	}
	seen := map[int]int{}
	for i := 0; i < 12800; i++ {
		g := KeyGroup(i, 128)
		if g < 0 || g >= 128 {
			t.Fatalf("key group %d", g)
		}
		seen[OperatorIndex(g, 128, 4)]++
	}
	for s := 0; s < 4; s++ {
		if seen[s] < 2800 || seen[s] > 3600 {
			t.Fatalf("uneven spread %v", seen)
		}
	}
	if OperatorIndex(127, 128, 4) != 3 || OperatorIndex(0, 128, 4) != 0 || OperatorIndex(32, 128, 4) != 1 {
		t.Fatal("operator index")
	}
}

func TestRebalance(t *testing.T) {
	p := NewRebalance(2)
	var got []int
	for i := 0; i < 5; i++ {
		got = append(got, p.Select(Record{}, 3))
	}
	if want := []int{2, 0, 1, 2, 0}; len(got) != 5 || got[0] != want[0] || got[1] != want[1] || got[4] != want[4] {
		t.Fatalf("got %v", got)
	}
}

func TestKeyedValuesUpdateInPlaceAndRangeByKeyGroup(t *testing.T) {
	s := NewKeyedValues[string, int](16)
	for _, w := range strings.Fields("a b a c a b d e f g h") {
		v, created := s.Get(w)
		if created != (*v == 0) {
			t.Fatalf("%s: created=%v with value %d", w, created, *v)
		}
		*v++
	}
	if s.Len() != 8 {
		t.Fatalf("Len = %d", s.Len())
	}
	got := map[string]int{}
	last := -1
	s.Range(func(k string, v *int) {
		g := KeyGroup(k, 16)
		if g < last {
			t.Errorf("key %s of group %d after group %d", k, g, last)
		}
		last = g
		got[k] = *v
	})
	if got["a"] != 3 || got["b"] != 2 || got["h"] != 1 || len(got) != 8 {
		t.Fatalf("counts %v", got)
	}
}
