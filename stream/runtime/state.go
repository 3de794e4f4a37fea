package runtime

import "sort"

// KeyedStateBackend is the in-memory keyed state of one operator subtask:
// one map per key group, so state can later be snapshotted and
// redistributed by key-group range as in Flink. Access is scoped to the
// current key, which the operator sets before calling user code.
type KeyedStateBackend struct {
	maxParallelism int
	groups         map[int]*keyGroupState
	key            any
	group          int
	hasKey         bool
}

type keyGroupState struct {
	states map[string]map[any]any
}

// NewKeyedStateBackend returns an empty backend for keys hashed into
// maxParallelism key groups.
func NewKeyedStateBackend(maxParallelism int) *KeyedStateBackend {
	return &KeyedStateBackend{maxParallelism: maxParallelism, groups: map[int]*keyGroupState{}}
}

// SetCurrentKey scopes the following state accesses to key.
func (b *KeyedStateBackend) SetCurrentKey(key any) {
	b.key, b.hasKey = key, true
	b.group = KeyGroup(key, b.maxParallelism)
}

// CurrentKey is the key set last.
func (b *KeyedStateBackend) CurrentKey() any { return b.key }

// CurrentKeyGroup is the key group of the current key.
func (b *KeyedStateBackend) CurrentKeyGroup() int { return b.group }

func (b *KeyedStateBackend) table(name string, create bool) map[any]any {
	if !b.hasKey {
		panic("keyed state accessed without a current key")
	}
	g := b.groups[b.group]
	if g == nil {
		if !create {
			return nil
		}
		g = &keyGroupState{states: map[string]map[any]any{}}
		b.groups[b.group] = g
	}
	t := g.states[name]
	if t == nil && create {
		t = map[any]any{}
		g.states[name] = t
	}
	return t
}

// Get reads the named state of the current key.
func (b *KeyedStateBackend) Get(name string) (any, bool) {
	v, ok := b.table(name, false)[b.key]
	return v, ok
}

// Put writes the named state of the current key.
func (b *KeyedStateBackend) Put(name string, v any) { b.table(name, true)[b.key] = v }

// Delete clears the named state of the current key.
func (b *KeyedStateBackend) Delete(name string) {
	if t := b.table(name, false); t != nil {
		delete(t, b.key)
	}
}

// Keys lists the keys that have the named state, key group by key group.
// Within a key group the order is unspecified.
func (b *KeyedStateBackend) Keys(name string) []any {
	groups := make([]int, 0, len(b.groups))
	for g := range b.groups {
		groups = append(groups, g)
	}
	sort.Ints(groups)
	var keys []any
	for _, g := range groups {
		for k := range b.groups[g].states[name] {
			keys = append(keys, k)
		}
	}
	return keys
}
