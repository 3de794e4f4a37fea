package runtime

import (
	"errors"
	"fmt"
	"maps"
	"testing"
)

// mapCodec encodes a map[int]int as a list of varint pairs (sorted keys
// are not needed: the test compares decoded maps).
type mapCodec struct{}

func (mapCodec) Append(dst []byte, v any) ([]byte, error) {
	m, ok := v.(map[int]int)
	if !ok {
		return dst, fmt.Errorf("not a map: %T", v)
	}
	for k, x := range m {
		dst, _ = intCodec{}.Append(dst, k)
		dst, _ = intCodec{}.Append(dst, x)
	}
	return dst, nil
}

func (mapCodec) Decode(src []byte) (any, error) {
	m := map[int]int{}
	for len(src) > 0 {
		var kv [2]int
		for i := range kv {
			n := 0
			for n < len(src) && src[n]&0x80 != 0 {
				n++
			}
			if n == len(src) {
				return nil, errors.New("bad map")
			}
			v, err := intCodec{}.Decode(src[:n+1])
			if err != nil {
				return nil, err
			}
			kv[i], src = v.(int), src[n+1:]
		}
		m[kv[0]] = kv[1]
	}
	return m, nil
}

func (mapCodec) TypeName() string { return "map[int]int" }

// contents reads every key's "n" and "m" states.
func contents(b *KeyedStateBackend) map[string]string {
	out := map[string]string{}
	for _, name := range []string{"n", "m"} {
		for _, k := range b.Keys(name) {
			b.SetCurrentKey(k)
			v, _ := b.Get(name)
			if mm, ok := v.(map[int]int); ok {
				v = fmt.Sprint(maps.Collect(maps.All(mm)))
			}
			out[fmt.Sprint(name, k)] = fmt.Sprint(v)
		}
	}
	return out
}

// Two snapshots in flight at once while the task replaces, deletes and
// changes values in place (GetForUpdate): each holds its barrier's state.
func TestSnapshotAsyncCopyOnWrite(t *testing.T) {
	b := NewKeyedStateBackend(testMaxPar)
	b.SetKeyCodec(intCodec{})
	if err := b.RegisterState("n", intCodec{}); err != nil {
		t.Fatal(err)
	}
	if err := b.RegisterState("m", mapCodec{}); err != nil {
		t.Fatal(err)
	}
	mutate := func(round int) {
		for k := 0; k < testKeys; k++ {
			b.SetCurrentKey(k)
			switch (k + round) % 4 {
			case 0:
				b.Put("n", k*round)
			case 1:
				b.Delete("n")
			}
			v, ok := b.GetForUpdate("m")
			if !ok {
				v = map[int]int{}
				b.Put("m", v)
			}
			v.(map[int]int)[round%3] += k // in place
		}
	}
	type taken struct {
		snap *OperatorSnapshot
		want map[string]string
		done chan error
	}
	var snaps []taken
	for round := 1; round <= 3; round++ {
		mutate(round)
		s := &OperatorSnapshot{}
		if err := b.SnapshotAsync(s); err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, taken{s, contents(b), make(chan error, 1)})
	}
	for _, s := range snaps { // serialized concurrently with the task
		go func() { s.done <- s.snap.Materialize() }()
	}
	for round := 4; round <= 8; round++ {
		mutate(round)
	}
	for i, s := range snaps {
		if err := <-s.done; err != nil {
			t.Fatal(err)
		}
		r := NewKeyedStateBackend(testMaxPar)
		r.SetKeyCodec(intCodec{})
		if err := r.Restore(&OperatorRestore{Keyed: s.snap.Keyed, StateTypes: s.snap.StateTypes}); err != nil {
			t.Fatal(err)
		}
		for name, c := range map[string]Codec{"n": intCodec{}, "m": mapCodec{}} {
			if err := r.RegisterState(name, c); err != nil {
				t.Fatal(err)
			}
		}
		if got := contents(r); !maps.Equal(got, s.want) {
			t.Fatalf("snapshot %d: restored %d entries differ from the %d at its barrier", i+1, len(got), len(s.want))
		}
	}
	if b.frozen.Load() != 0 {
		t.Fatalf("snapshots still marked in flight: %d", b.frozen.Load())
	}
	// No snapshot in flight: writes no longer copy.
	b.SetCurrentKey(1)
	before, _ := b.GetForUpdate("m")
	again, _ := b.GetForUpdate("m")
	if fmt.Sprintf("%p", before) != fmt.Sprintf("%p", again) {
		t.Fatal("a value was copied with no snapshot in flight")
	}
}

// A snapshot that is never serialized is released, and the task stops
// copying.
func TestSnapshotAsyncRelease(t *testing.T) {
	b := NewKeyedStateBackend(testMaxPar)
	b.SetKeyCodec(intCodec{})
	if err := b.RegisterState("m", mapCodec{}); err != nil {
		t.Fatal(err)
	}
	b.SetCurrentKey(7)
	b.Put("m", map[int]int{1: 1})
	s := &OperatorSnapshot{}
	if err := b.SnapshotAsync(s); err != nil {
		t.Fatal(err)
	}
	v1, _ := b.GetForUpdate("m")
	v2, _ := b.GetForUpdate("m")
	if fmt.Sprintf("%p", v1) != fmt.Sprintf("%p", v2) {
		t.Fatal("a value copied for this epoch was copied again")
	}
	(&TaskSnapshot{Operators: []*OperatorSnapshot{s}}).Release()
	(&TaskSnapshot{Operators: []*OperatorSnapshot{s}}).Release() // idempotent
	if b.frozen.Load() != 0 {
		t.Fatal("released snapshot still in flight")
	}
}
