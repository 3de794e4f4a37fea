package runtime

import (
	"fmt"
	"testing"
)

// GetForUpdate right after Get of the same state takes what Get found
// (one lookup for a read-modify-write) only while that is still the
// current key's value and no snapshot shares it.
func TestGetForUpdateAfterGet(t *testing.T) {
	b := NewKeyedStateBackend(testMaxPar)
	b.SetKeyCodec(intCodec{})
	if err := b.RegisterState("m", mapCodec{}); err != nil {
		t.Fatal(err)
	}
	for k := range 2 {
		b.SetCurrentKey(k)
		b.Put("m", map[int]int{0: k})
	}
	b.SetCurrentKey(0)
	got, _ := b.Get("m")
	upd, _ := b.GetForUpdate("m")
	if fmt.Sprintf("%p", got) != fmt.Sprintf("%p", upd) {
		t.Fatal("GetForUpdate after Get copied a value no snapshot shares")
	}

	// Another key: its own value.
	b.Get("m")
	b.SetCurrentKey(1)
	if v, _ := b.GetForUpdate("m"); v.(map[int]int)[0] != 1 {
		t.Fatalf("GetForUpdate after a change of key returned %v", v)
	}

	// A write in between: the value written.
	b.Get("m")
	b.Put("m", map[int]int{0: 11})
	if v, _ := b.GetForUpdate("m"); v.(map[int]int)[0] != 11 {
		t.Fatalf("GetForUpdate after a Put returned %v", v)
	}
	b.Get("m")
	b.Delete("m")
	if v, ok := b.GetForUpdate("m"); ok {
		t.Fatalf("GetForUpdate after a Delete returned %v", v)
	}

	// A snapshot in between: a copy, and the snapshot keeps the value of
	// its barrier.
	b.SetCurrentKey(0)
	got, _ = b.Get("m")
	s := &OperatorSnapshot{}
	if err := b.SnapshotAsync(s); err != nil {
		t.Fatal(err)
	}
	upd, _ = b.GetForUpdate("m")
	if fmt.Sprintf("%p", got) == fmt.Sprintf("%p", upd) {
		t.Fatal("GetForUpdate handed out a value a snapshot in flight shares")
	}
	upd.(map[int]int)[0] = 99
	if err := s.Materialize(); err != nil {
		t.Fatal(err)
	}
	r := NewKeyedStateBackend(testMaxPar)
	r.SetKeyCodec(intCodec{})
	if err := r.Restore(&OperatorRestore{Keyed: s.Keyed, StateTypes: s.StateTypes}); err != nil {
		t.Fatal(err)
	}
	if err := r.RegisterState("m", mapCodec{}); err != nil {
		t.Fatal(err)
	}
	r.SetCurrentKey(0)
	if v, _ := r.Get("m"); v.(map[int]int)[0] != 0 {
		t.Fatalf("the snapshot holds %v, want the value at its barrier", v)
	}
}
