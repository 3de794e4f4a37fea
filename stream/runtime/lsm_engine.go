package runtime

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rs/zerolog"
)

// lsmEngine is the pebble engine of a KeyedStateBackend. Keys are the key
// group (2 bytes big endian, so a key-group range is a key range), the
// state name (uvarint length and bytes) and the key encoded by the key
// codec; values are the state codec's bytes, decoded on every read. Like
// the rest of the backend it is used on the task goroutine only; pebble's
// own goroutines stop in close.
type lsmEngine struct {
	opts       StateBackendOptions
	maxPar     int
	start, end int
	root       string
	dbDir      string
	db         *pebble.DB
	id         string
	log        zerolog.Logger
	seq        int

	// types is the value type name of every state known (registered or
	// restored), for snapshots.
	types map[string]string
	// names maps files of a restored DB to the shared names they had.
	names map[string]string
	// uploaded holds the shared names of the last completed checkpoint.
	uploaded map[string]bool
	// pending holds the incremental snapshots not completed yet.
	pending map[int64]*lsmPending

	key      []byte
	keyValid bool
	vbuf     []byte
	closed   bool
}

type lsmPending struct {
	dir   string
	names []string
}

func newLSMEngine(maxPar int, opts StateBackendOptions) (*lsmEngine, error) {
	if maxPar <= 0 || maxPar > 1<<16 {
		return nil, fmt.Errorf("runtime: lsm state backend: max parallelism %d out of range", maxPar)
	}
	e := &lsmEngine{opts: opts, maxPar: maxPar, start: 0, end: maxPar - 1, log: zerolog.Nop(),
		types: map[string]string{}, uploaded: map[string]bool{}, pending: map[int64]*lsmPending{}}
	if opts.Logger != nil {
		e.log = *opts.Logger
	}
	if opts.Parallelism > 0 {
		e.start, e.end = KeyGroupRange(opts.SubtaskIndex, opts.Parallelism, maxPar)
	}
	if opts.LocalDir != "" {
		if err := os.MkdirAll(opts.LocalDir, 0o755); err != nil {
			return nil, fmt.Errorf("runtime: lsm state backend: %w", err)
		}
	}
	root, err := os.MkdirTemp(opts.LocalDir, "gofl-lsm-"+sanitize(opts.OperatorID)+"-*")
	if err != nil {
		return nil, fmt.Errorf("runtime: lsm state backend: %w", err)
	}
	e.root = root
	if err := e.openAt(e.nextDir("db"), newDBID(), nil); err != nil {
		_ = os.RemoveAll(root)
		return nil, err
	}
	return e, nil
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == os.PathSeparator || r == 0 {
			return '_'
		}
		return r
	}, s)
}

// newDBID names a DB instance: files it creates are named after it, so a
// restored job never reuses the name of another attempt's file.
func newDBID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (e *lsmEngine) nextDir(prefix string) string {
	e.seq++
	return filepath.Join(e.root, fmt.Sprintf("%s-%d", prefix, e.seq))
}

func (e *lsmEngine) pebbleOptions(readOnly bool) *pebble.Options {
	mem := e.opts.MemTableSize
	if mem <= 0 {
		mem = 4 << 20
	}
	return &pebble.Options{
		// Checkpoints, not a WAL, make the state durable (as in Flink's
		// RocksDB backend): a snapshot flushes the memtable first.
		DisableWAL:          true,
		MemTableSize:        uint64(mem),
		MaxManifestFileSize: 1 << 20,
		Logger:              pebbleLogger{e.log},
		ReadOnly:            readOnly,
	}
}

func (e *lsmEngine) openAt(dir, id string, names map[string]string) error {
	db, err := pebble.Open(dir, e.pebbleOptions(false))
	if err != nil {
		return fmt.Errorf("runtime: lsm state backend: open %s: %w", dir, err)
	}
	e.db, e.dbDir, e.id, e.names = db, dir, id, names
	return nil
}

// closeDB closes the DB and removes its directory.
func (e *lsmEngine) closeDB() error {
	if e.db == nil {
		return nil
	}
	err := e.db.Close()
	e.db = nil
	if rerr := os.RemoveAll(e.dbDir); err == nil {
		err = rerr
	}
	return err
}

// close releases the DB (stopping pebble's goroutines) and removes every
// local file of the backend. Idempotent.
func (e *lsmEngine) close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	err := e.closeDB()
	if rerr := os.RemoveAll(e.root); err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("runtime: closing lsm state backend: %w", err)
	}
	return nil
}

func (e *lsmEngine) mustOpen() {
	if e.db == nil {
		panic("runtime: lsm state backend used after Close")
	}
}

// appendStatePrefix appends the key prefix of state name in key group g.
func appendStatePrefix(dst []byte, g int, name string) []byte {
	dst = append(dst, byte(g>>8), byte(g))
	dst = binary.AppendUvarint(dst, uint64(len(name)))
	return append(dst, name...)
}

// parseStateKey splits a DB key into key group, state name and key bytes.
func parseStateKey(k []byte) (g int, name string, key []byte, err error) {
	if len(k) < 3 {
		return 0, "", nil, ErrCorruptState
	}
	g = int(k[0])<<8 | int(k[1])
	n, m := binary.Uvarint(k[2:])
	if m <= 0 || uint64(len(k)-2-m) < n {
		return 0, "", nil, ErrCorruptState
	}
	p := 2 + m
	return g, string(k[p : p+int(n)]), k[p+int(n):], nil
}

// groupBound is the first key of key group g (g may be maxParallelism: the
// end of the key space).
func groupBound(g int) []byte { return []byte{byte(g >> 8), byte(g)} }

// curKey is the DB key of state name for the backend's current key; the
// key is encoded once per SetCurrentKey.
func (e *lsmEngine) curKey(b *KeyedStateBackend, name string) []byte {
	if !b.hasKey {
		panic("keyed state accessed without a current key")
	}
	if !e.keyValid {
		if b.keyCodec == nil {
			panic(fmt.Errorf("keyed state %q: %w", name, errNoCodec("the key")))
		}
		kb, err := b.keyCodec.Append(e.key[:0], b.key)
		if err != nil {
			panic(fmt.Errorf("keyed state %q: key %v: %w", name, b.key, err))
		}
		e.key, e.keyValid = kb, true
	}
	k := appendStatePrefix(make([]byte, 0, 8+len(name)+len(e.key)), b.group, name)
	return append(k, e.key...)
}

func (e *lsmEngine) codec(b *KeyedStateBackend, name string) Codec {
	c := b.codecs[name]
	if c == nil {
		panic(fmt.Errorf("keyed state %q: %w", name, errNoCodec("the state")))
	}
	return c
}

func (e *lsmEngine) get(b *KeyedStateBackend, name string) (any, bool) {
	e.mustOpen()
	c := e.codec(b, name)
	v, closer, err := e.db.Get(e.curKey(b, name))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false
	}
	if err != nil {
		panic(fmt.Errorf("keyed state %q: get: %w", name, err))
	}
	defer closer.Close()
	x, err := c.Decode(v)
	if err != nil {
		panic(fmt.Errorf("keyed state %q: decode value of key %v: %w", name, b.key, err))
	}
	return x, true
}

func (e *lsmEngine) put(b *KeyedStateBackend, name string, v any) {
	e.mustOpen()
	c := e.codec(b, name)
	vb, err := c.Append(e.vbuf[:0], v)
	if err != nil {
		panic(fmt.Errorf("keyed state %q: encode value of key %v: %w", name, b.key, err))
	}
	e.vbuf = vb
	if err := e.db.Set(e.curKey(b, name), vb, pebble.NoSync); err != nil {
		panic(fmt.Errorf("keyed state %q: put: %w", name, err))
	}
}

func (e *lsmEngine) delete(b *KeyedStateBackend, name string) {
	e.mustOpen()
	if err := e.db.Delete(e.curKey(b, name), pebble.NoSync); err != nil {
		panic(fmt.Errorf("keyed state %q: delete: %w", name, err))
	}
}

// keys lists the keys of state name in key-group order, seeking from one
// key group's part of the state to the next.
func (e *lsmEngine) keys(b *KeyedStateBackend, name string) []any {
	e.mustOpen()
	if b.keyCodec == nil {
		panic(fmt.Errorf("keyed state %q: %w", name, errNoCodec("the key")))
	}
	it, err := e.db.NewIter(nil)
	if err != nil {
		panic(fmt.Errorf("keyed state %q: keys: %w", name, err))
	}
	defer it.Close()
	var out []any
	var prefix []byte
	for valid := it.SeekGE(appendStatePrefix(nil, 0, name)); valid; {
		k := it.Key()
		g := int(k[0])<<8 | int(k[1])
		prefix = appendStatePrefix(prefix[:0], g, name)
		switch c := bytes.Compare(k[:min(len(k), len(prefix))], prefix); {
		case c == 0 && len(k) >= len(prefix):
			key, err := b.keyCodec.Decode(k[len(prefix):])
			if err != nil {
				panic(fmt.Errorf("keyed state %q: decode key: %w", name, err))
			}
			out = append(out, key)
			valid = it.Next()
		case c < 0:
			valid = it.SeekGE(prefix)
		default:
			if g+1 >= e.maxPar {
				valid = false
			} else {
				valid = it.SeekGE(appendStatePrefix(prefix[:0], g+1, name))
			}
		}
	}
	if err := it.Error(); err != nil {
		panic(fmt.Errorf("keyed state %q: keys: %w", name, err))
	}
	return out
}

// register checks a state against the type it was restored with.
func (e *lsmEngine) register(b *KeyedStateBackend, name string, c Codec) error {
	if err := b.restore.CheckType(stateSection(name), c.TypeName()); err != nil {
		return fmt.Errorf("keyed state %q: %w", name, err)
	}
	e.types[name] = c.TypeName()
	return nil
}

// snapshot writes a full snapshot (the hashmap format) or, for an
// incremental checkpoint, flushes, takes a pebble checkpoint and describes
// its files.
func (e *lsmEngine) snapshot(snap *OperatorSnapshot) error {
	e.mustOpen()
	if e.opts.Incremental && !snap.Type.IsSavepoint() {
		return e.snapshotIncremental(snap)
	}
	return e.snapshotFull(snap)
}

func (e *lsmEngine) snapshotFull(snap *OperatorSnapshot) error {
	it, err := e.db.NewIter(nil)
	if err != nil {
		return fmt.Errorf("snapshot of keyed state: %w", err)
	}
	defer it.Close()
	curG, curName := -1, ""
	var data []byte
	emit := func() error {
		if curG < 0 || len(data) == 0 {
			return nil
		}
		typ, ok := e.types[curName]
		if !ok {
			return fmt.Errorf("snapshot of keyed state %q: %w", curName, errNoCodec("the state"))
		}
		snap.PutKeyed(curG, stateSection(curName), typ, data)
		data = nil
		return nil
	}
	for valid := it.First(); valid; valid = it.Next() {
		g, name, kb, err := parseStateKey(it.Key())
		if err != nil {
			return fmt.Errorf("snapshot of keyed state: %w", err)
		}
		if g != curG || name != curName {
			if err := emit(); err != nil {
				return err
			}
			curG, curName = g, name
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("snapshot of keyed state %q: %w", name, err)
		}
		data = binary.AppendUvarint(data, uint64(len(kb)))
		data = append(data, kb...)
		data = binary.AppendUvarint(data, uint64(len(v)))
		data = append(data, v...)
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("snapshot of keyed state: %w", err)
	}
	return emit()
}

// notifyComplete marks the files of checkpoint id uploaded and removes the
// local copies of checkpoints up to id (their uploads are done).
func (e *lsmEngine) notifyComplete(id int64) {
	if p := e.pending[id]; p != nil {
		// Files of earlier checkpoints that id does not have were compacted
		// away and never come back.
		e.uploaded = make(map[string]bool, len(p.names))
		for _, n := range p.names {
			e.uploaded[n] = true
		}
	}
	for pid, p := range e.pending {
		if pid <= id {
			_ = os.RemoveAll(p.dir)
			delete(e.pending, pid)
		}
	}
}

func (e *lsmEngine) notifyAborted(id int64) {
	if p := e.pending[id]; p != nil {
		_ = os.RemoveAll(p.dir)
		delete(e.pending, id)
	}
}
