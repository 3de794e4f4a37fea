package runtime

import (
	"fmt"
	"sort"
	"strings"
)

// KeyedStateBackend is the in-memory keyed state of one operator subtask:
// one map per key group, so state can later be snapshotted and
// redistributed by key-group range as in Flink. Access is scoped to the
// current key, which the operator sets before calling user code.
//
// Snapshots (hashmap style, as Flink's HashMapStateBackend) write each state
// as keyed section "state:<name>" per key group, encoded with the key codec
// (SetKeyCodec) and the state's codec (RegisterState). A restore keeps the
// sections as they are and decodes a state when it is registered, so a
// state is decoded only by a job that still declares it, with the codec it
// declares, and a state no longer declared goes into later snapshots as it
// was restored.
//
// NewKeyedStateBackendWithOptions selects another engine: "rocksdb" keeps
// the state serialized in an embedded LSM on local disk (lsm.go); values
// are then decoded on every Get, so a value changed in place must be Put
// again to be kept.
type KeyedStateBackend struct {
	maxParallelism int
	groups         map[int]*keyGroupState
	key            any
	group          int
	hasKey         bool

	keyCodec Codec
	codecs   map[string]Codec
	restore  *OperatorRestore
	// raw holds the restored sections of states not registered yet, by
	// state name and key group.
	raw map[string]map[int][]byte

	// lsm is the LSM engine; nil for the maps above (hashmap).
	lsm *lsmEngine
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
	if b.lsm != nil {
		b.lsm.keyValid = false
	}
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
	if b.lsm != nil {
		return b.lsm.get(b, name)
	}
	v, ok := b.table(name, false)[b.key]
	return v, ok
}

// Put writes the named state of the current key.
func (b *KeyedStateBackend) Put(name string, v any) {
	if b.lsm != nil {
		b.lsm.put(b, name, v)
		return
	}
	b.table(name, true)[b.key] = v
}

// Delete clears the named state of the current key.
func (b *KeyedStateBackend) Delete(name string) {
	if b.lsm != nil {
		b.lsm.delete(b, name)
		return
	}
	if t := b.table(name, false); t != nil {
		delete(t, b.key)
	}
}

// Keys lists the keys that have the named state, key group by key group.
// Within a key group the order is unspecified.
func (b *KeyedStateBackend) Keys(name string) []any {
	if b.lsm != nil {
		return b.lsm.keys(b, name)
	}
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

// SetKeyCodec sets the codec of the keys, which snapshots and restores
// need. Call it in Open, before RegisterState.
func (b *KeyedStateBackend) SetKeyCodec(c Codec) { b.keyCodec = c }

// RegisterState declares state name with the codec of its values. It is
// idempotent and cheap (typed state calls it before every access; the
// first registration of a name wins). Registering a restored state decodes
// its sections, which fails with ErrIncompatibleState when the state was
// written with another value type, or with the decoding error.
func (b *KeyedStateBackend) RegisterState(name string, c Codec) error {
	if _, ok := b.codecs[name]; ok {
		return nil
	}
	if b.codecs == nil {
		b.codecs = map[string]Codec{}
	}
	if b.lsm != nil {
		if err := b.lsm.register(b, name, c); err != nil {
			return err
		}
		b.codecs[name] = c
		return nil
	}
	if groups, ok := b.raw[name]; ok {
		if err := b.decode(name, c, groups); err != nil {
			return err
		}
		delete(b.raw, name)
	}
	b.codecs[name] = c
	return nil
}

func (b *KeyedStateBackend) decode(name string, c Codec, groups map[int][]byte) error {
	section := stateSection(name)
	if err := b.restore.CheckType(section, c.TypeName()); err != nil {
		return fmt.Errorf("keyed state %q: %w", name, err)
	}
	if b.keyCodec == nil {
		return fmt.Errorf("restoring keyed state %q: %w", name, errNoCodec("the key"))
	}
	for g, data := range groups {
		gs := b.groups[g]
		if gs == nil {
			gs = &keyGroupState{states: map[string]map[any]any{}}
			b.groups[g] = gs
		}
		t := gs.states[name]
		if t == nil {
			t = map[any]any{}
			gs.states[name] = t
		}
		err := rangeEntries(data, func(kb, vb []byte) error {
			k, err := b.keyCodec.Decode(kb)
			if err != nil {
				return fmt.Errorf("key: %w", err)
			}
			v, err := c.Decode(vb)
			if err != nil {
				return fmt.Errorf("value: %w", err)
			}
			t[k] = v
			return nil
		})
		if err != nil {
			return fmt.Errorf("restoring keyed state %q, key group %d: %w", name, g, err)
		}
	}
	return nil
}

// Snapshot writes every state into snap as section "state:<name>" per key
// group. A state without a registered codec fails the snapshot, naming it;
// restored states not registered since are written as they were restored.
func (b *KeyedStateBackend) Snapshot(snap *OperatorSnapshot) error {
	if b.lsm != nil {
		return b.lsm.snapshot(snap)
	}
	groups := make([]int, 0, len(b.groups))
	for g := range b.groups {
		groups = append(groups, g)
	}
	sort.Ints(groups)
	enc := tableEncoder{keyCodec: b.keyCodec}
	for _, g := range groups {
		for name, t := range b.groups[g].states {
			if len(t) == 0 {
				continue
			}
			c := b.codecs[name]
			if c == nil {
				return fmt.Errorf("snapshot of keyed state %q: %w", name, errNoCodec("the state"))
			}
			if b.keyCodec == nil {
				return fmt.Errorf("snapshot of keyed state %q: %w", name, errNoCodec("the key"))
			}
			data, err := enc.encode(nil, name, c, t)
			if err != nil {
				return err
			}
			snap.PutKeyed(g, stateSection(name), c.TypeName(), data)
		}
	}
	for name, rg := range b.raw {
		section := stateSection(name)
		for g, data := range rg {
			snap.PutKeyed(g, section, b.restore.StateTypes[section], data)
		}
	}
	return nil
}

// Restore starts the backend from r (nil: nothing): it keeps the "state:"
// sections of r's key groups to decode each state when it is registered.
// Call it in Open, before any state access.
func (b *KeyedStateBackend) Restore(r *OperatorRestore) error {
	if r == nil {
		return nil
	}
	b.restore = r
	if b.lsm != nil {
		return b.lsm.restore(r)
	}
	for g, sections := range r.Keyed {
		for section, data := range sections {
			if section == lsmManifestSection {
				return fmt.Errorf("restoring keyed state: %w: an incremental snapshot of the rocksdb state backend cannot be restored by the hashmap backend (take a savepoint)", ErrIncompatibleState)
			}
			name, ok := strings.CutPrefix(section, "state:")
			if !ok {
				continue
			}
			if b.raw == nil {
				b.raw = map[string]map[int][]byte{}
			}
			rg := b.raw[name]
			if rg == nil {
				rg = map[int][]byte{}
				b.raw[name] = rg
			}
			rg[g] = data
		}
	}
	for name, groups := range b.raw {
		if c := b.codecs[name]; c != nil {
			if err := b.decode(name, c, groups); err != nil {
				return err
			}
			delete(b.raw, name)
		}
	}
	return nil
}

// tableEncoder serializes state tables, sizing each table's buffer from the
// average entry size seen so far so that a section is allocated once.
type tableEncoder struct {
	keyCodec Codec
	// bytes and entries encoded so far, for the estimate.
	bytes, entries int
	kw, vw         int
}

// encode appends table t of state name to dst (nil: a new buffer of the
// estimated size).
func (e *tableEncoder) encode(dst []byte, name string, c Codec, t map[any]any) ([]byte, error) {
	if dst == nil {
		est := 64
		if e.entries > 0 {
			est += e.bytes / e.entries * len(t) * 17 / 16
		}
		dst = make([]byte, 0, est)
	}
	start := len(dst)
	for k, v := range t {
		var err error
		if dst, err = appendEncoded(dst, e.keyCodec, k, &e.kw); err != nil {
			return nil, fmt.Errorf("snapshot of keyed state %q: key %v: %w", name, k, err)
		}
		if dst, err = appendEncoded(dst, c, v, &e.vw); err != nil {
			return nil, fmt.Errorf("snapshot of keyed state %q: value of key %v: %w", name, k, err)
		}
	}
	e.bytes += len(dst) - start
	e.entries += len(t)
	return dst, nil
}
