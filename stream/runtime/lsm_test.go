package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

// engine is one keyed state backend configuration the behaviour tests run
// against.
type engine struct {
	name string
	opts StateBackendOptions
}

func engines() []engine {
	return []engine{
		{"hashmap", StateBackendOptions{}},
		{"rocksdb", StateBackendOptions{Type: "rocksdb"}},
		{"rocksdb-incremental", StateBackendOptions{Type: "lsm", Incremental: true}},
	}
}

// newBackend opens a backend of e for subtask i of p, closed at the end of
// the test.
func newBackend(t testing.TB, e engine, i, p int) *KeyedStateBackend {
	t.Helper()
	opts := e.opts
	if opts.Type != "" {
		opts.LocalDir = t.TempDir()
	}
	opts.OperatorID, opts.SubtaskIndex, opts.Parallelism = "op", i, p
	b, err := NewKeyedStateBackendWithOptions(testMaxPar, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return b
}

// sharedStore plays the CheckpointResponder's part for shared files: it
// uploads the files of a snapshot not marked Uploaded to a shared
// directory, and gives a restore the files of the old subtasks it reads.
type sharedStore struct {
	t     testing.TB
	dir   string
	files map[*OperatorSnapshot][]SharedStateFile
}

func newSharedStore(t testing.TB) *sharedStore {
	return &sharedStore{t: t, dir: t.TempDir(), files: map[*OperatorSnapshot][]SharedStateFile{}}
}

// upload copies the new files of snap and returns the bytes uploaded.
func (s *sharedStore) upload(snap *OperatorSnapshot) int64 {
	s.t.Helper()
	var n int64
	for _, f := range snap.SharedFiles {
		dst := filepath.Join(s.dir, f.Name)
		if f.Uploaded {
			if _, err := os.Stat(dst); err != nil {
				s.t.Fatalf("file %s marked uploaded is not in shared storage: %v", f.Name, err)
			}
			continue
		}
		copyFile(s.t, f.LocalPath, dst)
		n += f.Size
	}
	s.files[snap] = snap.SharedFiles
	return n
}

// restoreFor is restoreFor plus the downloaded shared files of every old
// subtask that has key groups of subtask i's range.
func (s *sharedStore) restoreFor(snaps []*OperatorSnapshot, i, p int) *OperatorRestore {
	r := restoreFor(snaps, i, p)
	start, end := KeyGroupRange(i, p, testMaxPar)
	for _, snap := range snaps {
		overlaps := false
		for g := range snap.Keyed {
			overlaps = overlaps || (g >= start && g <= end)
		}
		if !overlaps {
			continue
		}
		for _, f := range s.files[snap] {
			f.LocalPath = filepath.Join(s.dir, f.Name)
			r.SharedFiles = append(r.SharedFiles, f)
		}
	}
	return r
}

func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

func mustRegister(t testing.TB, b *KeyedStateBackend, name string, c Codec) {
	t.Helper()
	if err := b.RegisterState(name, c); err != nil {
		t.Fatal(err)
	}
}

func TestKeyedStateBackendEnginesGetPutDeleteKeys(t *testing.T) {
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			b := newBackend(t, e, 0, 1)
			b.SetKeyCodec(intCodec{})
			mustRegister(t, b, "n", strCodec{})
			mustRegister(t, b, "n2", intCodec{})
			for k := 0; k < 300; k++ {
				b.SetCurrentKey(k)
				if _, ok := b.Get("n"); ok {
					t.Fatalf("key %d has state before Put", k)
				}
				b.Put("n", fmt.Sprintf("v%d", k))
				b.Put("n2", k)
			}
			for k := 0; k < 300; k += 3 {
				b.SetCurrentKey(k)
				b.Put("n", fmt.Sprintf("w%d", k))
				b.Delete("n2")
			}
			b.SetCurrentKey(1000)
			b.Delete("n") // absent: no effect
			for k := 0; k < 300; k++ {
				b.SetCurrentKey(k)
				if b.CurrentKeyGroup() != KeyGroup(k, testMaxPar) {
					t.Fatalf("key group of %d", k)
				}
				want := fmt.Sprintf("v%d", k)
				if k%3 == 0 {
					want = fmt.Sprintf("w%d", k)
				}
				if v, ok := b.Get("n"); !ok || v != want {
					t.Fatalf("key %d: n = %v %v, want %s", k, v, ok, want)
				}
				v, ok := b.Get("n2")
				if ok != (k%3 != 0) || (ok && v != k) {
					t.Fatalf("key %d: n2 = %v %v", k, v, ok)
				}
			}
			for name, n := range map[string]int{"n": 300, "n2": 200, "other": 0} {
				keys := b.Keys(name)
				if len(keys) != n {
					t.Fatalf("Keys(%q): %d keys, want %d", name, len(keys), n)
				}
				seen := map[int]bool{}
				last := -1
				for _, k := range keys {
					g := KeyGroup(k, testMaxPar)
					if g < last {
						t.Fatalf("Keys(%q) not in key-group order", name)
					}
					last = g
					if seen[k.(int)] || (name == "n2" && k.(int)%3 == 0) {
						t.Fatalf("Keys(%q): unexpected key %v", name, k)
					}
					seen[k.(int)] = true
				}
			}
		})
	}
}

// snapshotEngine builds state of the keys at parallelism 4 with engine e
// (one snapshot per subtask, checkpoint 1), uploading shared files to st.
func snapshotEngine(t *testing.T, e engine, st *sharedStore) []*OperatorSnapshot {
	return snapshotAt(t, 4, func(i int, keys []int) *OperatorSnapshot {
		b := newBackend(t, e, i, 4)
		b.SetKeyCodec(intCodec{})
		mustRegister(t, b, "name", strCodec{})
		mustRegister(t, b, "count", intCodec{})
		for _, k := range keys {
			b.SetCurrentKey(k)
			b.Put("name", fmt.Sprintf("v%d", k))
			b.Put("count", k*2)
			if k%2 == 0 {
				b.Delete("count")
			}
		}
		snap := &OperatorSnapshot{OperatorID: "op", CheckpointID: 1}
		if err := b.Snapshot(snap); err != nil {
			t.Fatal(err)
		}
		st.upload(snap)
		b.NotifyCheckpointComplete(1)
		return snap
	})
}

func readEngine(b *KeyedStateBackend) (map[int]string, error) {
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
}

// TestKeyedStateBackendEnginesSnapshotRestoreRescale snapshots at p=4 and
// restores at p=2 and p=6: full snapshots of either engine into either
// engine, incremental ones into the rocksdb engine.
func TestKeyedStateBackendEnginesSnapshotRestoreRescale(t *testing.T) {
	all := engines()
	hashmap, rocks, incr := all[0], all[1], all[2]
	for _, c := range []struct{ from, to engine }{
		{hashmap, hashmap}, {hashmap, rocks}, {rocks, hashmap}, {rocks, rocks}, {incr, incr}, {hashmap, incr},
	} {
		t.Run(c.from.name+"->"+c.to.name, func(t *testing.T) {
			st := newSharedStore(t)
			snaps := snapshotEngine(t, c.from, st)
			if c.from.opts.Incremental {
				for _, s := range snaps {
					if len(s.SharedFiles) == 0 || s.Keyed[firstGroup(s)][lsmManifestSection] == nil {
						t.Fatalf("incremental snapshot without files or manifest: %+v", s)
					}
				}
			} else if snaps[0].StateTypes["state:name"] != "string" || snaps[0].StateTypes["state:count"] != "int" {
				t.Fatalf("state types %v", snaps[0].StateTypes)
			}
			if snaps[0].StateTypes["state:name"] != "string" {
				t.Fatalf("state types %v", snaps[0].StateTypes)
			}
			checkRescaledWith(t, snaps, st.restoreFor, func(k int) string { return fmt.Sprintf("v%d/%d", k, k*2*(k%2)) },
				func(i, p int, r *OperatorRestore) (map[int]string, error) {
					b := newBackend(t, c.to, i, p)
					b.SetKeyCodec(intCodec{})
					if err := b.Restore(r); err != nil {
						return nil, err
					}
					return readEngine(b)
				})
		})
	}
}

func firstGroup(s *OperatorSnapshot) int {
	gs := make([]int, 0, len(s.Keyed))
	for g := range s.Keyed {
		gs = append(gs, g)
	}
	sort.Ints(gs)
	return gs[0]
}

// TestRocksDBIncrementalRestoreKeepsSharedFiles: a restore at the same
// range opens the checkpoint's DB, so the next checkpoint reuses its files
// as uploaded; a rescaled restore contained in one old range (p=4 -> 6,
// subtasks 0 and 5) does too and drops the keys outside its range.
func TestRocksDBIncrementalRestoreKeepsSharedFiles(t *testing.T) {
	incr := engines()[2]
	st := newSharedStore(t)
	snaps := snapshotEngine(t, incr, st)
	for _, c := range []struct{ i, p int }{{1, 4}, {0, 6}, {5, 6}} {
		b := newBackend(t, incr, c.i, c.p)
		b.SetKeyCodec(intCodec{})
		if err := b.Restore(st.restoreFor(snaps, c.i, c.p)); err != nil {
			t.Fatal(err)
		}
		got, err := readEngine(b)
		if err != nil {
			t.Fatal(err)
		}
		start, end := KeyGroupRange(c.i, c.p, testMaxPar)
		for k := range got {
			if g := KeyGroup(k, testMaxPar); g < start || g > end {
				t.Fatalf("p=%d subtask %d: key %d of key group %d outside [%d, %d]", c.p, c.i, k, g, start, end)
			}
		}
		snap := &OperatorSnapshot{CheckpointID: 2}
		if err := b.Snapshot(snap); err != nil {
			t.Fatal(err)
		}
		reused := 0
		for _, f := range snap.SharedFiles {
			if f.Uploaded {
				reused++
			}
		}
		if reused == 0 {
			t.Fatalf("p=%d subtask %d: no file of the restored checkpoint reused: %+v", c.p, c.i, snap.SharedFiles)
		}
		st.upload(snap)
		// The second generation restores too.
		nb := newBackend(t, incr, c.i, c.p)
		nb.SetKeyCodec(intCodec{})
		if err := nb.Restore(st.restoreFor([]*OperatorSnapshot{snap}, c.i, c.p)); err != nil {
			t.Fatal(err)
		}
		again, err := readEngine(nb)
		if err != nil {
			t.Fatal(err)
		}
		if len(again) != len(got) || len(got) == 0 {
			t.Fatalf("p=%d subtask %d: %d keys after the second restore, %d after the first", c.p, c.i, len(again), len(got))
		}
	}
}

func TestRocksDBIncrementalUploadsOnlyNewFiles(t *testing.T) {
	e := engines()[2]
	b := newBackend(t, e, 0, 1)
	b.SetKeyCodec(intCodec{})
	mustRegister(t, b, "v", strCodec{})
	pad := strings.Repeat("x", 100)
	const n = 20000
	for k := 0; k < n; k++ {
		b.SetCurrentKey(k)
		b.Put("v", fmt.Sprintf("%d-%s", k, pad))
	}
	// Settle the LSM (flush, compact), so that no background compaction of
	// the first flushes rewrites the files between the two checkpoints.
	if err := b.lsm.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := b.lsm.db.Compact(context.Background(), groupBound(0), groupBound(testMaxPar), false); err != nil {
		t.Fatal(err)
	}
	st := newSharedStore(t)
	snap1 := &OperatorSnapshot{CheckpointID: 1}
	if err := b.Snapshot(snap1); err != nil {
		t.Fatal(err)
	}
	for _, f := range snap1.SharedFiles {
		if f.Uploaded {
			t.Fatalf("first checkpoint has a file marked uploaded: %+v", f)
		}
	}
	total1 := st.upload(snap1)
	b.NotifyCheckpointComplete(1)
	for _, f := range snap1.SharedFiles {
		if _, err := os.Stat(f.LocalPath); !os.IsNotExist(err) {
			t.Fatalf("local file %s of completed checkpoint 1 not removed: %v", f.LocalPath, err)
		}
	}
	for k := 0; k < 10; k++ {
		b.SetCurrentKey(k)
		b.Put("v", "updated")
	}
	snap2 := &OperatorSnapshot{CheckpointID: 2}
	if err := b.Snapshot(snap2); err != nil {
		t.Fatal(err)
	}
	var total2, uploadedFiles int64
	for _, f := range snap2.SharedFiles {
		total2 += f.Size
		if f.Uploaded {
			uploadedFiles++
		}
	}
	newBytes := st.upload(snap2)
	if uploadedFiles == 0 || newBytes*20 > total2 {
		t.Fatalf("second checkpoint uploads %d of %d bytes (%d files reused; first checkpoint %d bytes)", newBytes, total2, uploadedFiles, total1)
	}
	t.Logf("checkpoint 1: %d bytes in %d files; checkpoint 2: %d of %d bytes new", total1, len(snap1.SharedFiles), newBytes, total2)

	nb := newBackend(t, e, 0, 1)
	nb.SetKeyCodec(intCodec{})
	if err := nb.Restore(st.restoreFor([]*OperatorSnapshot{snap2}, 0, 1)); err != nil {
		t.Fatal(err)
	}
	mustRegister(t, nb, "v", strCodec{})
	if keys := nb.Keys("v"); len(keys) != n {
		t.Fatalf("%d keys restored, want %d", len(keys), n)
	}
	for _, k := range []int{0, 9, 10, n - 1} {
		nb.SetCurrentKey(k)
		want := fmt.Sprintf("%d-%s", k, pad)
		if k < 10 {
			want = "updated"
		}
		if v, _ := nb.Get("v"); v != want {
			t.Fatalf("key %d restored as %v", k, v)
		}
	}
}

func TestRocksDBLargerThanMemTable(t *testing.T) {
	e := engine{"rocksdb", StateBackendOptions{Type: "rocksdb", MemTableSize: 64 << 10}}
	b := newBackend(t, e, 0, 1)
	b.SetKeyCodec(intCodec{})
	mustRegister(t, b, "v", strCodec{})
	pad := strings.Repeat("y", 200)
	const n = 30000 // ~6 MB, about 100 memtables
	for k := 0; k < n; k++ {
		b.SetCurrentKey(k)
		b.Put("v", fmt.Sprintf("%d%s", k, pad))
	}
	if m := b.lsm.db.Metrics(); m.Flush.Count == 0 {
		t.Fatalf("no memtable was flushed to disk: %s", m)
	}
	for k := 0; k < n; k += 7 {
		b.SetCurrentKey(k)
		if v, _ := b.Get("v"); v != fmt.Sprintf("%d%s", k, pad) {
			t.Fatalf("key %d: %.20v", k, v)
		}
	}
	if keys := b.Keys("v"); len(keys) != n {
		t.Fatalf("%d keys, want %d", len(keys), n)
	}
}

func TestRocksDBCloseReleasesDB(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	b, err := NewKeyedStateBackendWithOptions(testMaxPar, StateBackendOptions{Type: "rocksdb", LocalDir: dir, Incremental: true, OperatorID: "op"})
	if err != nil {
		t.Fatal(err)
	}
	b.SetKeyCodec(intCodec{})
	mustRegister(t, b, "v", intCodec{})
	for k := 0; k < 1000; k++ {
		b.SetCurrentKey(k)
		b.Put("v", k)
	}
	if err := b.Snapshot(&OperatorSnapshot{CheckpointID: 1}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("local dir not cleaned: %v", ents)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("Get after Close did not panic")
			}
		}()
		b.Get("v")
	}()
}

func TestStateBackendOptions(t *testing.T) {
	if _, err := NewKeyedStateBackendWithOptions(testMaxPar, StateBackendOptions{Type: "filesystem"}); !errors.Is(err, ErrUnknownStateBackend) {
		t.Fatalf("unknown type: %v", err)
	}
	ctx := &Context{OperatorID: "op", SubtaskIndex: 1, Parallelism: 4, MaxParallelism: testMaxPar, task: &task{}}
	b, err := ctx.NewKeyedStateBackend()
	if err != nil || b.Engine() != HashMapStateBackend {
		t.Fatalf("default engine: %v %v", b, err)
	}
	ctx.task.env.StateBackend = StateBackendOptions{Type: "RocksDB", LocalDir: t.TempDir()}
	b, err = ctx.NewKeyedStateBackend()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	start, end := KeyGroupRange(1, 4, testMaxPar)
	if b.Engine() != RocksDBStateBackend || b.lsm.start != start || b.lsm.end != end {
		t.Fatalf("engine %s range [%d, %d]", b.Engine(), b.lsm.start, b.lsm.end)
	}
}

// TestRocksDBIncrementalEdgeCases: savepoints are full, a hashmap backend
// refuses an incremental snapshot, a missing shared file fails the restore
// naming it, and a restored state of another type fails registration.
func TestRocksDBIncrementalEdgeCases(t *testing.T) {
	all := engines()
	incr := all[2]
	b := newBackend(t, incr, 0, 1)
	b.SetKeyCodec(intCodec{})
	mustRegister(t, b, "v", intCodec{})
	b.SetCurrentKey(5)
	b.Put("v", 5)

	sp := &OperatorSnapshot{CheckpointID: 1, Type: Savepoint}
	if err := b.Snapshot(sp); err != nil {
		t.Fatal(err)
	}
	if len(sp.SharedFiles) != 0 || sp.Keyed[KeyGroup(5, testMaxPar)]["state:v"] == nil {
		t.Fatalf("savepoint not full: %+v", sp)
	}

	st := newSharedStore(t)
	snap := &OperatorSnapshot{CheckpointID: 2}
	if err := b.Snapshot(snap); err != nil {
		t.Fatal(err)
	}
	st.upload(snap)
	r := st.restoreFor([]*OperatorSnapshot{snap}, 0, 1)

	hb := newBackend(t, all[0], 0, 1)
	if err := hb.Restore(r); !errors.Is(err, ErrIncompatibleState) {
		t.Fatalf("hashmap restore of an incremental snapshot: %v", err)
	}

	nb := newBackend(t, incr, 0, 1)
	nb.SetKeyCodec(intCodec{})
	if err := nb.Restore(r); err != nil {
		t.Fatal(err)
	}
	if err := nb.RegisterState("v", strCodec{}); !errors.Is(err, ErrIncompatibleState) {
		t.Fatalf("restore as another type: %v", err)
	}

	missing := *r
	missing.SharedFiles = r.SharedFiles[1:]
	nb = newBackend(t, incr, 0, 1)
	if err := nb.Restore(&missing); !errors.Is(err, ErrSharedFileMissing) || !strings.Contains(err.Error(), r.SharedFiles[0].Name) {
		t.Fatalf("restore without a file: %v", err)
	}

	if err := b.Snapshot(&OperatorSnapshot{}); err == nil {
		t.Fatal("incremental snapshot without a checkpoint ID succeeded")
	}
}

func BenchmarkKeyedStateBackend(b *testing.B) {
	for _, e := range engines()[:2] {
		b.Run(e.name+"/put", func(b *testing.B) {
			kb := newBackend(b, e, 0, 1)
			kb.SetKeyCodec(intCodec{})
			mustRegister(b, kb, "v", intCodec{})
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				kb.SetCurrentKey(i % 100000)
				kb.Put("v", i)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
		b.Run(e.name+"/get", func(b *testing.B) {
			kb := newBackend(b, e, 0, 1)
			kb.SetKeyCodec(intCodec{})
			mustRegister(b, kb, "v", intCodec{})
			for i := 0; i < 100000; i++ {
				kb.SetCurrentKey(i)
				kb.Put("v", i)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				kb.SetCurrentKey(i % 100000)
				if v, ok := kb.Get("v"); !ok || v != i%100000 {
					b.Fatalf("key %d: %v", i%100000, v)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}

// keyedCountOp counts records per key (value mod 50) in a keyed state
// backend of the task's configured engine.
type keyedCountOp struct {
	Base
	state *KeyedStateBackend
	seen  atomic.Int64
}

func (o *keyedCountOp) Open(ctx *Context) error {
	o.Ctx = ctx
	b, err := ctx.NewKeyedStateBackend()
	if err != nil {
		return err
	}
	o.state = b
	b.SetKeyCodec(intCodec{})
	if err := b.RegisterState("count", intCodec{}); err != nil {
		return err
	}
	return b.Restore(ctx.Restore)
}

func (o *keyedCountOp) ProcessElement(_ int, r Record) error {
	o.state.SetCurrentKey(r.Value.(int) % 50)
	n, _ := o.state.Get("count")
	c, _ := n.(int)
	o.state.Put("count", c+1)
	o.seen.Add(1)
	return nil
}

func (o *keyedCountOp) SnapshotState(_ int64, snap *OperatorSnapshot) error {
	return o.state.Snapshot(snap)
}

func (o *keyedCountOp) NotifyCheckpointComplete(id int64) error {
	o.state.NotifyCheckpointComplete(id)
	return nil
}

func (o *keyedCountOp) NotifyCheckpointAborted(id int64) error {
	o.state.NotifyCheckpointAborted(id)
	return nil
}

func (o *keyedCountOp) Close() error { return o.state.Close() }

// TestRunTaskRocksDBIncremental runs a keyed operator on the rocksdb
// engine chosen by TaskEnv.StateBackend through two incremental
// checkpoints: the second reuses the first one's uploaded files, restores
// the counts, and the task's end closes the backend.
func TestRunTaskRocksDBIncremental(t *testing.T) {
	local := t.TempDir()
	t.Cleanup(func() { // runs after the task ended
		if ents, _ := os.ReadDir(local); len(ents) != 0 {
			t.Errorf("backend files left after the task ended: %v", ents)
		}
	})
	vals := make([]int, 1000)
	for i := range vals {
		vals[i] = i
	}
	op := &keyedCountOp{}
	src := &ckSource{name: "src", log: &callLog{}, vals: vals}
	spec := &TaskSpec{
		Name: "keyed",
		Operators: []OperatorSpec{
			{ID: "src", Name: "src", Input: -1, NewSource: func() Source { return src }},
			{ID: "count", Name: "count", Input: 0, NewOperator: func() Operator { return op }},
		},
		Outputs: []OutputSpec{{From: 1, NewPartitioner: func(int) Partitioner { return Forward{} }}},
	}
	h := (&harness{t: t}).start(spec, TaskEnv{StateBackend: StateBackendOptions{Type: "rocksdb", LocalDir: local, Incremental: true}}, true)
	eventually(t, "records counted", func() bool { return op.seen.Load() == 1000 })
	st := newSharedStore(t)
	opSnap := func(a ackCall) *OperatorSnapshot {
		for _, s := range a.snap.Operators {
			if s.OperatorID == "count" {
				return s
			}
		}
		t.Fatal("no snapshot of the keyed operator")
		return nil
	}
	h.control(trigger(1, Checkpoint))
	s1 := opSnap(h.resp.waitAck(t, 1))
	if s1.CheckpointID != 1 || len(s1.SharedFiles) == 0 {
		t.Fatalf("checkpoint 1 snapshot: %+v", s1)
	}
	st.upload(s1)
	h.control(complete(1))
	h.control(trigger(2, Checkpoint))
	s2 := opSnap(h.resp.waitAck(t, 2))
	for _, f := range s2.SharedFiles {
		if isImmutable(filepath.Base(f.LocalPath)) && !f.Uploaded {
			t.Fatalf("file %s of completed checkpoint 1 not marked uploaded in checkpoint 2", f.Name)
		}
	}
	st.upload(s2)

	b := newBackend(t, engines()[2], 0, 1)
	b.SetKeyCodec(intCodec{})
	if err := b.Restore(st.restoreFor([]*OperatorSnapshot{s2}, 0, 1)); err != nil {
		t.Fatal(err)
	}
	mustRegister(t, b, "count", intCodec{})
	for k := 0; k < 50; k++ {
		b.SetCurrentKey(k)
		if n, _ := b.Get("count"); n != 20 {
			t.Fatalf("key %d restored count %v, want 20", k, n)
		}
	}
}
