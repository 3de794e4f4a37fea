package runtime

import "sort"

// KeyedValues is the typed keyed state of a running aggregation (keyed
// Reduce and Aggregate): one value per key, with neither keys nor values
// boxed and no key-group hash per record, since the hot path is one map
// access. Range visits the keys key group by key group, the layout
// KeyedStateBackend keeps and a snapshot needs. Not safe for concurrent
// use: it belongs to one operator subtask.
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
