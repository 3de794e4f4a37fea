package runtime

import (
	"fmt"
	goruntime "runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
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
// Checkpoints snapshot asynchronously (SnapshotAsync): the task freezes
// the tables and goes on; tables and values still being serialized are
// copied before the task writes them. Values handed out by Get must
// therefore not be changed in place: use GetForUpdate for that.
//
// NewKeyedStateBackendWithOptions selects another engine: "rocksdb" keeps
// the state serialized in an embedded LSM on local disk (lsm.go); values
// are then decoded on every Get, so a value changed in place must be Put
// again to be kept.
type KeyedStateBackend struct {
	maxParallelism int
	// tables holds each state's tables by key group (maxParallelism
	// long, nil where the group has no entries), as Flink's StateTable:
	// an access indexes its group instead of hashing it.
	tables map[string][]*stateTable
	// lastName and lastTables are the state accessed last and its tables
	// (most operators use one state), saving the lookup by name.
	lastName   string
	lastTables []*stateTable
	key        any
	group      int
	hasKey     bool

	keyCodec Codec
	codecs   map[string]Codec
	restore  *OperatorRestore
	// raw holds the restored sections of states not registered yet, by
	// state name and key group.
	raw map[string]map[int][]byte

	// lsm is the LSM engine; nil for the maps above (hashmap).
	lsm *lsmEngine

	// Copy-on-write for asynchronous snapshots (as Flink's
	// CopyOnWriteStateMap, at table granularity): epoch advances at every
	// snapshot; a table or entry last written in epoch x is shared with
	// every in-flight snapshot taken in an epoch >= x, and frozen is the
	// highest epoch of an in-flight snapshot (0: none). The task clones a
	// shared table before writing it, and a shared value before handing it
	// out for in-place mutation (GetForUpdate).
	epoch    uint64
	frozen   atomic.Uint64
	snapMu   sync.Mutex
	inflight map[uint64]int

	// last is what the last Get found for the current key, so that a
	// GetForUpdate of the same state (a value read, then written back in
	// place) looks it up once. A change of key, any write and any table
	// installed drop it.
	last lastEntry
}

// lastEntry is a state's entry of the current key, when ok.
type lastEntry struct {
	name string
	e    stateEntry
	ok   bool
}

// stateTable is one state's entries in one key group.
type stateTable struct {
	m map[any]stateEntry
	// epoch is when the table was created or cloned.
	epoch uint64
}

// stateEntry is a value with the epoch it was written in.
type stateEntry struct {
	v     any
	epoch uint64
}

// NewKeyedStateBackend returns an empty backend for keys hashed into
// maxParallelism key groups.
func NewKeyedStateBackend(maxParallelism int) *KeyedStateBackend {
	return &KeyedStateBackend{maxParallelism: maxParallelism, tables: map[string][]*stateTable{}, epoch: 1}
}

// SetCurrentKey scopes the following state accesses to key.
func (b *KeyedStateBackend) SetCurrentKey(key any) {
	b.key, b.hasKey = key, true
	b.group = KeyGroup(key, b.maxParallelism)
	b.last.ok = false
	if b.lsm != nil {
		b.lsm.keyValid = false
	}
}

// CurrentKey is the key set last.
func (b *KeyedStateBackend) CurrentKey() any { return b.key }

// CurrentKeyGroup is the key group of the current key.
func (b *KeyedStateBackend) CurrentKeyGroup() int { return b.group }

// readTable is the current key group's table of name, nil when absent.
func (b *KeyedStateBackend) readTable(name string) *stateTable {
	if !b.hasKey {
		panic("keyed state accessed without a current key")
	}
	if ts := b.stateTables(name); ts != nil {
		if t := ts[b.group]; t != nil {
			return t
		}
	}
	return b.decodeGroup(b.group, name)
}

// stateTables is name's tables by key group, nil when it has none.
func (b *KeyedStateBackend) stateTables(name string) []*stateTable {
	if b.lastTables != nil && name == b.lastName {
		return b.lastTables
	}
	ts := b.tables[name]
	if ts != nil {
		b.lastName, b.lastTables = name, ts
	}
	return ts
}

// newStateTables makes name's tables (it has none yet).
func (b *KeyedStateBackend) newStateTables(name string) []*stateTable {
	ts := make([]*stateTable, b.maxParallelism)
	b.tables[name] = ts
	return ts
}

// writeTable is the current key group's table of name, to write: a table
// shared with an in-flight snapshot is cloned first. Nil when absent and
// not create.
func (b *KeyedStateBackend) writeTable(name string, create bool) *stateTable {
	if !b.hasKey {
		panic("keyed state accessed without a current key")
	}
	return b.writableTable(b.group, name, create)
}

func (b *KeyedStateBackend) writableTable(group int, name string, create bool) *stateTable {
	b.last.ok = false
	ts := b.stateTables(name)
	var t *stateTable
	if ts != nil {
		t = ts[group]
	}
	if t == nil {
		t = b.decodeGroup(group, name)
		ts = b.stateTables(name)
	}
	switch {
	case t == nil:
		if !create {
			return nil
		}
		if ts == nil {
			ts = b.newStateTables(name)
		}
		t = &stateTable{m: map[any]stateEntry{}, epoch: b.epoch}
		ts[group] = t
	case t.epoch != b.epoch && b.shared(t.epoch):
		c := &stateTable{m: make(map[any]stateEntry, len(t.m)), epoch: b.epoch}
		for k, e := range t.m {
			c.m[k] = e
		}
		t = c
		ts[group] = t
	default:
		t.epoch = b.epoch // not shared: the table is the task's again
	}
	return t
}

// shared reports whether what was written in epoch x is part of a
// snapshot still being written. A snapshot that ends meanwhile only costs
// a needless copy.
func (b *KeyedStateBackend) shared(x uint64) bool { return x <= b.frozen.Load() }

// Get reads the named state of the current key. The value must not be
// changed in place (it may be part of a snapshot being written): replace
// it with Put, or take it with GetForUpdate.
func (b *KeyedStateBackend) Get(name string) (any, bool) {
	if b.lsm != nil {
		return b.lsm.get(b, name)
	}
	if t := b.readTable(name); t != nil {
		e, ok := t.m[b.key]
		if ok {
			b.last = lastEntry{name: name, e: e, ok: true}
		}
		return e.v, ok
	}
	return nil, false
}

// GetForUpdate reads the named state of the current key to change it in
// place (a map, a list compacted, an accumulator): when the value is part
// of a snapshot still being written it is replaced by a copy made with the
// state's codec first, so the snapshot keeps the value of its checkpoint.
// With the rocksdb engine, changes must still be Put to be kept.
func (b *KeyedStateBackend) GetForUpdate(name string) (any, bool) {
	if b.lsm != nil {
		return b.lsm.get(b, name)
	}
	if l := &b.last; l.ok && l.name == name && (l.e.epoch == b.epoch || !b.shared(l.e.epoch)) {
		return l.e.v, true // what Get just read, not shared with a snapshot
	}
	t := b.readTable(name)
	if t == nil {
		return nil, false
	}
	e, ok := t.m[b.key]
	if !ok || e.epoch == b.epoch || !b.shared(e.epoch) {
		return e.v, ok
	}
	c := b.codecs[name]
	if c == nil {
		return e.v, true // never snapshotted: a snapshot needs the codec
	}
	data, err := c.Append(nil, e.v)
	if err == nil {
		var v any
		if v, err = c.Decode(data); err == nil {
			b.writeTable(name, true).m[b.key] = stateEntry{v: v, epoch: b.epoch}
			return v, true
		}
	}
	// The snapshot of this value fails the same way, and declines.
	return e.v, true
}

// Put writes the named state of the current key.
func (b *KeyedStateBackend) Put(name string, v any) {
	if b.lsm != nil {
		b.lsm.put(b, name, v)
		return
	}
	b.writeTable(name, true).m[b.key] = stateEntry{v: v, epoch: b.epoch}
}

// Delete clears the named state of the current key.
func (b *KeyedStateBackend) Delete(name string) {
	if b.lsm != nil {
		b.lsm.delete(b, name)
		return
	}
	if t := b.readTable(name); t == nil {
		return
	} else if _, ok := t.m[b.key]; !ok {
		return
	}
	delete(b.writeTable(name, false).m, b.key)
}

// Keys lists the keys that have the named state, key group by key group.
// Within a key group the order is unspecified.
func (b *KeyedStateBackend) Keys(name string) []any {
	if b.lsm != nil {
		return b.lsm.keys(b, name)
	}
	b.decodeAll(name)
	var keys []any
	for _, t := range b.tables[name] {
		if t != nil {
			for k := range t.m {
				keys = append(keys, k)
			}
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
	if _, ok := b.raw[name]; ok {
		if err := b.checkRestored(name, c); err != nil {
			return err
		}
	}
	b.codecs[name] = c
	return nil
}

// checkRestored fails when restored state name cannot be decoded with c.
func (b *KeyedStateBackend) checkRestored(name string, c Codec) error {
	if err := b.restore.CheckType(stateSection(name), c.TypeName()); err != nil {
		return fmt.Errorf("keyed state %q: %w", name, err)
	}
	if b.keyCodec == nil {
		return fmt.Errorf("restoring keyed state %q: %w", name, errNoCodec("the key"))
	}
	return nil
}

// decodeGroup decodes the restored section of registered state name in
// key group group, when it has one not decoded yet, into its table, and
// returns that table (nil otherwise). Restored states are decoded key
// group by key group on first access, so that a restore costs reading
// and checking the bytes and the task starts at once; checkRestored has
// vetted the type at registration, so a failure here is corrupt state (or
// a codec that changed its format without changing its type name) and
// fails the task with a panic naming the state and key group.
func (b *KeyedStateBackend) decodeGroup(group int, name string) *stateTable {
	rg := b.raw[name]
	if rg == nil {
		return nil
	}
	data, ok := rg[group]
	c := b.codecs[name]
	if !ok || c == nil {
		return nil
	}
	m, err := decodeTable(b.keyCodec, c, data, b.epoch)
	if err != nil {
		panic(fmt.Errorf("restoring keyed state %q, key group %d: %w", name, group, err))
	}
	return b.install(group, name, m)
}

// install makes m, decoded from the restored section of name in group,
// that state's table there, and forgets the section.
func (b *KeyedStateBackend) install(group int, name string, m map[any]stateEntry) *stateTable {
	b.last.ok = false
	ts := b.tables[name]
	if ts == nil {
		ts = b.newStateTables(name)
	}
	t := &stateTable{m: m, epoch: b.epoch}
	ts[group] = t
	rg := b.raw[name]
	delete(rg, group)
	if len(rg) == 0 {
		delete(b.raw, name)
	}
	// Forget the section in the restore as well (a copy of the map: the
	// sections may be shared with other restores), so that its bytes are
	// not kept for the task's life next to the decoded values.
	section := stateSection(name)
	rest := make(map[string][]byte, len(b.restore.Keyed[group]))
	for n, d := range b.restore.Keyed[group] {
		if n != section {
			rest[n] = d
		}
	}
	b.restore.Keyed[group] = rest
	return t
}

// decodeAll decodes every restored key group of registered state name not
// decoded yet, several key groups at a time (codecs are safe for
// concurrent use): for whole-state operations such as Keys.
func (b *KeyedStateBackend) decodeAll(name string) {
	c, groups := b.codecs[name], b.raw[name]
	if c == nil || len(groups) == 0 {
		return
	}
	gs := make([]int, 0, len(groups))
	size := 0
	for g, data := range groups {
		gs = append(gs, g)
		size += len(data)
	}
	sort.Ints(gs)
	tables := make([]map[any]stateEntry, len(gs))
	errs := make([]error, len(gs))
	workers := min(goruntime.GOMAXPROCS(0), len(gs), 1+size/(1<<20))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(gs) {
					return
				}
				tables[i], errs[i] = decodeTable(b.keyCodec, c, groups[gs[i]], b.epoch)
			}
		})
	}
	wg.Wait()
	for i, g := range gs {
		if errs[i] != nil {
			panic(fmt.Errorf("restoring keyed state %q, key group %d: %w", name, g, errs[i]))
		}
		b.install(g, name, tables[i])
	}
}

// decodeTable decodes one key group's section into a table sized for it.
func decodeTable(keyCodec, c Codec, data []byte, epoch uint64) (map[any]stateEntry, error) {
	n, err := countEntries(data)
	if err != nil {
		return nil, err
	}
	t := make(map[any]stateEntry, n)
	err = rangeEntries(data, func(kb, vb []byte) error {
		k, err := keyCodec.Decode(kb)
		if err != nil {
			return fmt.Errorf("key: %w", err)
		}
		v, err := c.Decode(vb)
		if err != nil {
			return fmt.Errorf("value: %w", err)
		}
		t[k] = stateEntry{v: v, epoch: epoch}
		return nil
	})
	return t, err
}

// Snapshot writes every state into snap as section "state:<name>" per key
// group, serialized now (synchronously). A state without a registered
// codec fails the snapshot, naming it; restored states not registered
// since are written as they were restored.
func (b *KeyedStateBackend) Snapshot(snap *OperatorSnapshot) error {
	if err := b.SnapshotAsync(snap); err != nil {
		return err
	}
	return snap.Materialize()
}

// SnapshotAsync is Snapshot in two parts, as Flink's heap backend: it
// freezes the current tables now, on the task's goroutine, in time
// proportional to the number of key groups and states (not entries), and
// sets snap.KeyedStream, which serializes them later on the Responder's
// goroutine while the task goes on writing: tables and values shared with
// the frozen snapshot are copied before the task changes them (see
// GetForUpdate). Missing codecs fail here. The rocksdb engine snapshots
// synchronously.
func (b *KeyedStateBackend) SnapshotAsync(snap *OperatorSnapshot) error {
	if b.lsm != nil {
		return b.lsm.snapshot(snap)
	}
	var tables []frozenTable
	for name, ts := range b.tables {
		for g, t := range ts {
			if t == nil || len(t.m) == 0 {
				continue
			}
			c := b.codecs[name]
			if c == nil {
				return fmt.Errorf("snapshot of keyed state %q: %w", name, errNoCodec("the state"))
			}
			if b.keyCodec == nil {
				return fmt.Errorf("snapshot of keyed state %q: %w", name, errNoCodec("the key"))
			}
			tables = append(tables, frozenTable{group: g, name: name, section: stateSection(name), c: c, t: t})
		}
	}
	sort.Slice(tables, func(i, j int) bool {
		if tables[i].group != tables[j].group {
			return tables[i].group < tables[j].group
		}
		return tables[i].name < tables[j].name
	})
	for _, ft := range tables {
		snap.setType(ft.section, ft.c.TypeName())
	}
	for name, rg := range b.raw {
		section := stateSection(name)
		for g, data := range rg {
			snap.PutKeyed(g, section, b.restore.StateTypes[section], data)
		}
	}
	if len(b.raw) > 0 {
		snap.keep = append(snap.keep, b.restore)
	}
	if len(tables) == 0 {
		return nil
	}
	e := b.freeze()
	keyCodec := b.keyCodec
	var once sync.Once
	release := func() { once.Do(func() { b.release(e) }) }
	snap.KeyedStream = func(emit func(group int, sections map[string][]byte) error) error {
		defer release()
		return streamTables(tables, keyCodec, emit)
	}
	snap.ReleaseKeyed = release
	return nil
}

// frozenTable is a table of a snapshot being taken.
type frozenTable struct {
	group   int
	name    string
	section string
	c       Codec
	t       *stateTable
}

// groupBatch is the serialized sections of one key group.
type groupBatch struct {
	group    int
	sections map[string][]byte
	bufs     map[string][]byte // by state name, reused
	err      error
}

// streamTables serializes tables (sorted by key group and name) and emits
// them key group by key group. A helper goroutine serializes the next key
// group while emit writes the current one (two batches of buffers take
// turns), so encoding and writing use two cores; it ends before
// streamTables returns.
func streamTables(tables []frozenTable, keyCodec Codec, emit func(group int, sections map[string][]byte) error) error {
	const batches = 2
	free, ready := make(chan *groupBatch, batches), make(chan *groupBatch, batches)
	for range batches {
		free <- &groupBatch{sections: map[string][]byte{}, bufs: map[string][]byte{}}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(ready)
		enc := tableEncoder{keyCodec: keyCodec}
		for i := 0; i < len(tables); {
			var gb *groupBatch
			select {
			case gb = <-free:
			case <-stop:
				return
			}
			gb.group = tables[i].group
			clear(gb.sections)
			for ; i < len(tables) && tables[i].group == gb.group; i++ {
				ft := tables[i]
				data, err := enc.encode(gb.bufs[ft.name][:0], ft.name, ft.c, ft.t)
				if err != nil {
					gb.err = err
					ready <- gb // never blocks: at most batches are out
					return
				}
				gb.bufs[ft.name] = data
				gb.sections[ft.section] = data
			}
			ready <- gb
		}
	})
	defer func() {
		close(stop)
		wg.Wait()
	}()
	for gb := range ready {
		if gb.err != nil {
			return gb.err
		}
		if err := emit(gb.group, gb.sections); err != nil {
			return err
		}
		free <- gb
	}
	return nil
}

// freeze starts a snapshot of the current epoch and opens the next one.
func (b *KeyedStateBackend) freeze() uint64 {
	e := b.epoch
	b.epoch++
	b.snapMu.Lock()
	defer b.snapMu.Unlock()
	if b.inflight == nil {
		b.inflight = map[uint64]int{}
	}
	b.inflight[e]++
	b.frozen.Store(max(b.frozen.Load(), e))
	return e
}

// release ends the snapshot of epoch e; called once it no longer reads
// the frozen tables, from any goroutine.
func (b *KeyedStateBackend) release(e uint64) {
	b.snapMu.Lock()
	defer b.snapMu.Unlock()
	if b.inflight[e]--; b.inflight[e] <= 0 {
		delete(b.inflight, e)
	}
	var top uint64
	for x := range b.inflight {
		top = max(top, x)
	}
	b.frozen.Store(top)
}

// Restore starts the backend from r (nil: nothing): it keeps the "state:"
// sections of r's key groups to decode each state when it is registered.
// Call it in Open, before any state access.
func (b *KeyedStateBackend) Restore(r *OperatorRestore) error {
	if r == nil {
		return nil
	}
	b.restore = r
	b.last.ok = false
	if b.lsm != nil {
		return b.lsm.restore(r)
	}
	for g, sections := range r.Keyed {
		if g < 0 || g >= b.maxParallelism {
			return fmt.Errorf("restoring keyed state: %w: key group %d is outside the max parallelism %d (it cannot change across a restore)", ErrIncompatibleState, g, b.maxParallelism)
		}
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
	for name := range b.raw {
		if c := b.codecs[name]; c != nil {
			if err := b.checkRestored(name, c); err != nil {
				return err
			}
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

// encode appends table t of state name to dst (without capacity: a new
// buffer of the estimated size).
func (e *tableEncoder) encode(dst []byte, name string, c Codec, t *stateTable) ([]byte, error) {
	if cap(dst) == 0 {
		est := 64
		if e.entries > 0 {
			est += e.bytes / e.entries * len(t.m) * 17 / 16
		}
		dst = make([]byte, 0, est)
	}
	start := len(dst)
	for k, en := range t.m {
		var err error
		if dst, err = appendEncoded(dst, e.keyCodec, k, &e.kw); err != nil {
			return nil, fmt.Errorf("snapshot of keyed state %q: key %v: %w", name, k, err)
		}
		if dst, err = appendEncoded(dst, c, en.v, &e.vw); err != nil {
			return nil, fmt.Errorf("snapshot of keyed state %q: value of key %v: %w", name, k, err)
		}
	}
	e.bytes += len(dst) - start
	e.entries += len(t.m)
	return dst, nil
}
