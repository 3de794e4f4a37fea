package runtime

import (
	"fmt"
	"sort"
)

// KeyedValues is the typed keyed state of a running aggregation (keyed
// Reduce and Aggregate): one value per key, with neither keys nor values
// boxed and no key-group hash per record, since the hot path is one map
// access. Range visits the keys key group by key group, the layout
// KeyedStateBackend keeps and a snapshot needs. Not safe for concurrent
// use: it belongs to one operator subtask. Its snapshots (SnapshotTo) are
// serialized synchronously: a value per key of a running aggregation is
// small, and copy-on-write would cost the hot path a check per record.
type KeyedValues[K comparable, V any] struct {
	maxParallelism int
	values         map[K]*V
}

// NewKeyedValues returns empty state for keys hashed into maxParallelism
// key groups.
func NewKeyedValues[K comparable, V any](maxParallelism int) *KeyedValues[K, V] {
	return &KeyedValues[K, V]{maxParallelism: maxParallelism, values: map[K]*V{}}
}

// Get returns the key's value to read and update in place; created is true
// when the key had none (the value is V's zero value then).
func (s *KeyedValues[K, V]) Get(key K) (v *V, created bool) {
	if v = s.values[key]; v != nil {
		return v, false
	}
	v = new(V)
	s.values[key] = v
	return v, true
}

// Len is the number of keys.
func (s *KeyedValues[K, V]) Len() int { return len(s.values) }

// Range calls fn for every key, key group by key group (in unspecified
// order within one).
func (s *KeyedValues[K, V]) Range(fn func(key K, v *V)) {
	type entry struct {
		group int
		key   K
	}
	entries := make([]entry, 0, len(s.values))
	for k := range s.values {
		entries = append(entries, entry{group: KeyGroup(k, s.maxParallelism), key: k})
	}
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].group < entries[j].group })
	for _, e := range entries {
		fn(e.key, s.values[e.key])
	}
}

// SnapshotTo writes every key's value into snap as keyed section section
// per key group, keys encoded with keyCodec and values with valueCodec.
func (s *KeyedValues[K, V]) SnapshotTo(snap *OperatorSnapshot, section string, keyCodec, valueCodec Codec) error {
	byGroup := map[int][]byte{}
	var kw, vw int
	for k, v := range s.values {
		g := KeyGroup(k, s.maxParallelism)
		data, err := appendEncoded(byGroup[g], keyCodec, k, &kw)
		if err != nil {
			return fmt.Errorf("snapshot of %q: key %v: %w", section, k, err)
		}
		if data, err = appendEncoded(data, valueCodec, *v, &vw); err != nil {
			return fmt.Errorf("snapshot of %q: value of key %v: %w", section, k, err)
		}
		byGroup[g] = data
	}
	groups := make([]int, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	sort.Ints(groups)
	for _, g := range groups {
		snap.PutKeyed(g, section, valueCodec.TypeName(), byGroup[g])
	}
	return nil
}

// RestoreFrom adds the keys and values of r's section (its key groups) to
// s. It fails with ErrIncompatibleState when the section was written with
// another value type, and when a decoded key or value is not a K or a V.
func (s *KeyedValues[K, V]) RestoreFrom(r *OperatorRestore, section string, keyCodec, valueCodec Codec) error {
	if r == nil {
		return nil
	}
	if err := r.CheckType(section, valueCodec.TypeName()); err != nil {
		return err
	}
	return r.KeyedSection(section, func(g int, data []byte) error {
		err := rangeEntries(data, func(kb, vb []byte) error {
			ka, err := keyCodec.Decode(kb)
			if err != nil {
				return fmt.Errorf("key: %w", err)
			}
			k, ok := ka.(K)
			if !ok {
				return fmt.Errorf("%w: key %v is a %T", ErrIncompatibleState, ka, ka)
			}
			va, err := valueCodec.Decode(vb)
			if err != nil {
				return fmt.Errorf("value: %w", err)
			}
			v, ok := va.(V)
			if !ok {
				return fmt.Errorf("%w: value of key %v is a %T", ErrIncompatibleState, k, va)
			}
			s.values[k] = &v
			return nil
		})
		if err != nil {
			return fmt.Errorf("restoring %q, key group %d: %w", section, g, err)
		}
		return nil
	})
}
