package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
)

type intCodec struct{}

func (intCodec) Append(dst []byte, v any) ([]byte, error) {
	i, ok := v.(int)
	if !ok {
		return dst, fmt.Errorf("not an int: %T", v)
	}
	return binary.AppendVarint(dst, int64(i)), nil
}

func (intCodec) Decode(src []byte) (any, error) {
	v, n := binary.Varint(src)
	if n <= 0 || n != len(src) {
		return nil, errors.New("bad varint")
	}
	return int(v), nil
}

func (intCodec) TypeName() string { return "int" }

type strCodec struct{}

func (strCodec) Append(dst []byte, v any) ([]byte, error) {
	s, ok := v.(string)
	if !ok {
		return dst, fmt.Errorf("not a string: %T", v)
	}
	return append(dst, s...), nil
}

func (strCodec) Decode(src []byte) (any, error) { return string(src), nil }
func (strCodec) TypeName() string               { return "string" }

const (
	testMaxPar = 128
	testKeys   = 1000
)

// snapshotAt builds the state of every key at parallelism p (each key in
// the subtask owning its key group) with build and snapshots each subtask.
func snapshotAt(t *testing.T, p int, build func(subtask int, keys []int) *OperatorSnapshot) []*OperatorSnapshot {
	t.Helper()
	bySubtask := make([][]int, p)
	for k := 0; k < testKeys; k++ {
		s := OperatorIndex(KeyGroup(k, testMaxPar), testMaxPar, p)
		bySubtask[s] = append(bySubtask[s], k)
	}
	snaps := make([]*OperatorSnapshot, p)
	for s := range snaps {
		snaps[s] = build(s, bySubtask[s])
	}
	return snaps
}

// restoreFor is what the runner gives subtask i of p: the key groups of its
// range out of every old subtask's snapshot.
func restoreFor(snaps []*OperatorSnapshot, i, p int) *OperatorRestore {
	start, end := KeyGroupRange(i, p, testMaxPar)
	r := &OperatorRestore{Keyed: map[int]map[string][]byte{}, StateTypes: map[string]string{}}
	for _, s := range snaps {
		for g, sections := range s.Keyed {
			if g >= start && g <= end {
				r.Keyed[g] = sections
			}
		}
		for n, typ := range s.StateTypes {
			r.StateTypes[n] = typ
		}
	}
	return r
}

// checkRescaled restores the snapshots into parallelism 2 and 6 and checks
// with restore, which returns each restored key with its value, that every
// key lands exactly once, in a subtask owning its key group, with its value.
func checkRescaled(t *testing.T, snaps []*OperatorSnapshot, want func(k int) string, restore func(r *OperatorRestore) (map[int]string, error)) {
	t.Helper()
	checkRescaledWith(t, snaps, restoreFor, want, func(_, _ int, r *OperatorRestore) (map[int]string, error) { return restore(r) })
}

// checkRescaledWith is checkRescaled with the restore built by restoreFor
// and handed to restore with the subtask and parallelism.
func checkRescaledWith(t *testing.T, snaps []*OperatorSnapshot, restoreFor func([]*OperatorSnapshot, int, int) *OperatorRestore,
	want func(k int) string, restore func(i, p int, r *OperatorRestore) (map[int]string, error)) {
	t.Helper()
	for _, p := range []int{2, 6} {
		found := map[int]int{}
		for i := 0; i < p; i++ {
			got, err := restore(i, p, restoreFor(snaps, i, p))
			if err != nil {
				t.Fatalf("p=%d subtask %d: %v", p, i, err)
			}
			for k, v := range got {
				found[k]++
				if owner := OperatorIndex(KeyGroup(k, testMaxPar), testMaxPar, p); owner != i {
					t.Fatalf("p=%d: key %d restored in subtask %d, owned by %d", p, k, i, owner)
				}
				if v != want(k) {
					t.Fatalf("p=%d: key %d has %q, want %q", p, k, v, want(k))
				}
			}
		}
		if len(found) != testKeys {
			t.Fatalf("p=%d: %d of %d keys restored", p, len(found), testKeys)
		}
		for k, n := range found {
			if n != 1 {
				t.Fatalf("p=%d: key %d restored %d times", p, k, n)
			}
		}
	}
}

func TestKeyedStateBackendSnapshotRestoreRescale(t *testing.T) {
	snaps := snapshotAt(t, 4, func(_ int, keys []int) *OperatorSnapshot {
		b := NewKeyedStateBackend(testMaxPar)
		b.SetKeyCodec(intCodec{})
		for _, k := range keys {
			if err := b.RegisterState("name", strCodec{}); err != nil {
				t.Fatal(err)
			}
			b.SetCurrentKey(k)
			b.Put("name", fmt.Sprintf("v%d", k))
			if err := b.RegisterState("count", intCodec{}); err != nil {
				t.Fatal(err)
			}
			b.Put("count", k*2)
			if k%2 == 0 {
				b.Delete("count")
			}
		}
		snap := &OperatorSnapshot{OperatorID: "op"}
		if err := b.Snapshot(snap); err != nil {
			t.Fatal(err)
		}
		return snap
	})
	if snaps[0].StateTypes["state:name"] != "string" || snaps[0].StateTypes["state:count"] != "int" {
		t.Fatalf("state types %v", snaps[0].StateTypes)
	}
	checkRescaled(t, snaps, func(k int) string { return fmt.Sprintf("v%d/%d", k, k*2*(k%2)) },
		func(r *OperatorRestore) (map[int]string, error) {
			b := NewKeyedStateBackend(testMaxPar)
			b.SetKeyCodec(intCodec{})
			if err := b.Restore(r); err != nil {
				return nil, err
			}
			// Lazily decoded: nothing is visible before registration.
			if len(b.Keys("name")) != 0 {
				return nil, errors.New("state visible before it was registered")
			}
			if err := b.RegisterState("name", strCodec{}); err != nil {
				return nil, err
			}
			if err := b.RegisterState("count", intCodec{}); err != nil {
				return nil, err
			}
			got := map[int]string{}
			for _, k := range b.Keys("name") {
				b.SetCurrentKey(k)
				v, _ := b.Get("name")
				c, ok := b.Get("count")
				if ok != (k.(int)%2 == 1) {
					return nil, fmt.Errorf("key %v: count present %v", k, ok)
				}
				if !ok {
					c = 0
				}
				got[k.(int)] = fmt.Sprintf("%s/%d", v, c)
			}
			return got, nil
		})
}

func TestKeyedStateBackendIncompatibleAndMissingCodec(t *testing.T) {
	b := NewKeyedStateBackend(testMaxPar)
	b.SetKeyCodec(intCodec{})
	if err := b.RegisterState("count", intCodec{}); err != nil {
		t.Fatal(err)
	}
	b.SetCurrentKey(7)
	b.Put("count", 3)
	b.Put("orphan", 1)
	err := b.Snapshot(&OperatorSnapshot{})
	if err == nil || !strings.Contains(err.Error(), `"orphan"`) {
		t.Fatalf("snapshot of a state without codec: %v", err)
	}
	b.Delete("orphan")
	snap := &OperatorSnapshot{}
	if err := b.Snapshot(snap); err != nil {
		t.Fatal(err)
	}
	r := restoreFor([]*OperatorSnapshot{snap}, 0, 1)

	nb := NewKeyedStateBackend(testMaxPar)
	nb.SetKeyCodec(intCodec{})
	if err := nb.Restore(r); err != nil {
		t.Fatal(err)
	}
	err = nb.RegisterState("count", strCodec{})
	if !errors.Is(err, ErrIncompatibleState) || !strings.Contains(err.Error(), "count") {
		t.Fatalf("restore as another type: %v", err)
	}
	// A restored state that the new job does not register is carried into
	// its snapshots as it was.
	nb = NewKeyedStateBackend(testMaxPar)
	nb.SetKeyCodec(intCodec{})
	if err := nb.Restore(r); err != nil {
		t.Fatal(err)
	}
	again := &OperatorSnapshot{}
	if err := nb.Snapshot(again); err != nil {
		t.Fatal(err)
	}
	g := KeyGroup(7, testMaxPar)
	if string(again.Keyed[g]["state:count"]) != string(snap.Keyed[g]["state:count"]) || again.StateTypes["state:count"] != "int" {
		t.Fatalf("unregistered restored state not carried over: %v", again)
	}
}

func TestTimerServiceSnapshotRestoreRescale(t *testing.T) {
	newService := func() (*TimerService, *task, *[]Timer) {
		tk := &task{}
		ctx := &Context{task: tk}
		var fired []Timer
		b := NewKeyedStateBackend(testMaxPar)
		on := func(tm Timer) error {
			if b.CurrentKey() != tm.Key {
				return fmt.Errorf("current key %v for timer of %v", b.CurrentKey(), tm.Key)
			}
			fired = append(fired, tm)
			return nil
		}
		return NewNamedTimerService("win", ctx, b, on, on), tk, &fired
	}
	snaps := snapshotAt(t, 4, func(_ int, keys []int) *OperatorSnapshot {
		s, _, _ := newService()
		for _, k := range keys {
			s.RegisterEventTimeTimer(k, fmt.Sprintf("w%d", k), int64(k))
			s.RegisterProcessingTimeTimer(k, nil, int64(10_000+k))
		}
		snap := &OperatorSnapshot{}
		if err := s.Snapshot(snap, intCodec{}, strCodec{}); err != nil {
			t.Fatal(err)
		}
		return snap
	})
	for g, sections := range snaps[0].Keyed {
		if _, ok := sections["timers:win"]; !ok {
			t.Fatalf("key group %d has sections %v", g, sections)
		}
	}
	checkRescaled(t, snaps, func(k int) string { return fmt.Sprintf("e%d:w%d p%d", k, k, 10_000+k) },
		func(r *OperatorRestore) (map[int]string, error) {
			s, tk, fired := newService()
			if err := s.Restore(r, intCodec{}, strCodec{}); err != nil {
				return nil, err
			}
			if err := s.AdvanceWatermark(MaxWatermark); err != nil {
				return nil, err
			}
			got := map[int]string{}
			for _, tm := range *fired {
				got[tm.Key.(int)] = fmt.Sprintf("e%d:%s", tm.Timestamp, tm.Namespace)
			}
			*fired = nil
			// Processing timers were registered with the task: fire them.
			for len(tk.timers.items) > 0 {
				pt := tk.timers.items[0]
				tk.timers.items = tk.timers.items[1:]
				if err := pt.fn(pt.ts); err != nil {
					return nil, err
				}
			}
			for _, tm := range *fired {
				if tm.Namespace != nil {
					return nil, fmt.Errorf("processing timer namespace %v", tm.Namespace)
				}
				got[tm.Key.(int)] += fmt.Sprintf(" p%d", tm.Timestamp)
			}
			return got, nil
		})
	s, _, _ := newService()
	err := s.Restore(restoreFor(snaps, 0, 1), intCodec{}, intCodec{})
	if !errors.Is(err, ErrIncompatibleState) || !strings.Contains(err.Error(), "timers:win") {
		t.Fatalf("restore with another namespace type: %v", err)
	}
}

func TestKeyedValuesSnapshotRestoreRescale(t *testing.T) {
	snaps := snapshotAt(t, 4, func(_ int, keys []int) *OperatorSnapshot {
		s := NewKeyedValues[int, string](testMaxPar)
		for _, k := range keys {
			v, _ := s.Get(k)
			*v = fmt.Sprintf("v%d", k)
		}
		snap := &OperatorSnapshot{}
		if err := s.SnapshotTo(snap, "agg", intCodec{}, strCodec{}); err != nil {
			t.Fatal(err)
		}
		return snap
	})
	checkRescaled(t, snaps, func(k int) string { return fmt.Sprintf("v%d", k) },
		func(r *OperatorRestore) (map[int]string, error) {
			s := NewKeyedValues[int, string](testMaxPar)
			if err := s.RestoreFrom(r, "agg", intCodec{}, strCodec{}); err != nil {
				return nil, err
			}
			got := map[int]string{}
			s.Range(func(k int, v *string) { got[k] = *v })
			return got, nil
		})
	s := NewKeyedValues[int, int](testMaxPar)
	if err := s.RestoreFrom(restoreFor(snaps, 0, 1), "agg", intCodec{}, intCodec{}); !errors.Is(err, ErrIncompatibleState) {
		t.Fatalf("restore as another type: %v", err)
	}
}

// A restored state is decoded key group by key group on first access: a
// snapshot taken before every key group was touched carries the others as
// restored, writes to an untouched key group keep its restored entries,
// Keys sees them all, and a corrupt section fails the access naming the
// state and the key group.
func TestKeyedStateBackendDecodesRestoredKeyGroupsLazily(t *testing.T) {
	src := NewKeyedStateBackend(testMaxPar)
	src.SetKeyCodec(intCodec{})
	if err := src.RegisterState("count", intCodec{}); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < testKeys; k++ {
		src.SetCurrentKey(k)
		src.Put("count", k*10)
	}
	snap := &OperatorSnapshot{}
	if err := src.Snapshot(snap); err != nil {
		t.Fatal(err)
	}
	r := restoreFor([]*OperatorSnapshot{snap}, 0, 1)
	b := NewKeyedStateBackend(testMaxPar)
	b.SetKeyCodec(intCodec{})
	if err := b.Restore(r); err != nil {
		t.Fatal(err)
	}
	if err := b.RegisterState("count", intCodec{}); err != nil {
		t.Fatal(err)
	}
	restored := len(b.raw["count"])
	if restored == 0 {
		t.Fatal("nothing restored")
	}
	// Reading key 1 decodes its key group only.
	b.SetCurrentKey(1)
	if v, ok := b.Get("count"); !ok || v != 10 {
		t.Fatalf("key 1 = %v, %v", v, ok)
	}
	if got := len(b.raw["count"]); got != restored-1 {
		t.Fatalf("%d key groups left to decode after one access, want %d", got, restored-1)
	}
	if _, ok := r.Keyed[KeyGroup(1, testMaxPar)]["state:count"]; ok {
		t.Fatal("the decoded section is still kept in the restore")
	}
	// A write to an untouched key group keeps that group's restored keys.
	var other int
	for k := 2; k < testKeys; k++ {
		if g := KeyGroup(k, testMaxPar); g != KeyGroup(1, testMaxPar) {
			other = k
			break
		}
	}
	b.SetCurrentKey(other)
	b.Put("count", -1)
	for k := 0; k < testKeys; k++ {
		if k != other && KeyGroup(k, testMaxPar) == KeyGroup(other, testMaxPar) {
			b.SetCurrentKey(k)
			if v, ok := b.Get("count"); !ok || v != k*10 {
				t.Fatalf("key %d in the written key group = %v, %v", k, v, ok)
			}
		}
	}
	// A snapshot now holds every key: decoded groups re-encoded, the
	// others as restored.
	again := &OperatorSnapshot{}
	if err := b.Snapshot(again); err != nil {
		t.Fatal(err)
	}
	nb := NewKeyedStateBackend(testMaxPar)
	nb.SetKeyCodec(intCodec{})
	if err := nb.Restore(restoreFor([]*OperatorSnapshot{again}, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if err := nb.RegisterState("count", intCodec{}); err != nil {
		t.Fatal(err)
	}
	keys := nb.Keys("count")
	if len(keys) != testKeys || len(nb.raw) != 0 {
		t.Fatalf("Keys after restore: %d keys, %d states left to decode", len(keys), len(nb.raw))
	}
	for k := 0; k < testKeys; k++ {
		want := k * 10
		if k == other {
			want = -1
		}
		nb.SetCurrentKey(k)
		if v, ok := nb.Get("count"); !ok || v != want {
			t.Fatalf("key %d = %v, %v after snapshot of a partly decoded backend; want %d", k, v, ok, want)
		}
	}

	// Corrupt bytes fail the first access to their key group.
	bad := restoreFor([]*OperatorSnapshot{snap}, 0, 1)
	g := KeyGroup(5, testMaxPar)
	bad.Keyed[g] = map[string][]byte{"state:count": {0xff, 0xff, 0xff}}
	cb := NewKeyedStateBackend(testMaxPar)
	cb.SetKeyCodec(intCodec{})
	if err := cb.Restore(bad); err != nil {
		t.Fatal(err)
	}
	if err := cb.RegisterState("count", intCodec{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		p := recover()
		err, _ := p.(error)
		if err == nil || !strings.Contains(err.Error(), `"count"`) || !strings.Contains(err.Error(), fmt.Sprintf("key group %d", g)) {
			t.Fatalf("access to a corrupt key group: %v", p)
		}
	}()
	cb.SetCurrentKey(5)
	cb.Get("count")
	t.Fatal("a corrupt key group was read without failing")
}

// A restore whose key groups lie beyond the backend's max parallelism
// (another max parallelism, or a corrupt checkpoint) fails and names the
// key group, rather than indexing past the state tables.
func TestRestoreRejectsKeyGroupsBeyondMaxParallelism(t *testing.T) {
	b := NewKeyedStateBackend(256)
	b.SetKeyCodec(intCodec{})
	mustRegister(t, b, "count", intCodec{})
	for k := range 100 {
		b.SetCurrentKey(k)
		b.Put("count", k)
	}
	snap := &OperatorSnapshot{}
	if err := b.Snapshot(snap); err != nil {
		t.Fatal(err)
	}
	r := &OperatorRestore{Keyed: snap.Keyed, StateTypes: snap.StateTypes}
	beyond := 0
	for g := range r.Keyed {
		beyond = max(beyond, g)
	}
	if beyond < testMaxPar {
		t.Fatalf("no key group at or beyond %d among 100 keys", testMaxPar)
	}
	nb := NewKeyedStateBackend(testMaxPar)
	nb.SetKeyCodec(intCodec{})
	err := nb.Restore(r)
	if !errors.Is(err, ErrIncompatibleState) || !strings.Contains(err.Error(), "key group") {
		t.Fatalf("restore of key group %d into max parallelism %d: %v", beyond, testMaxPar, err)
	}
}
