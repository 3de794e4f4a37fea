package checkpointing

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/stream/runtime"
)

// logBuf is a zerolog sink safe for the Responder's goroutines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// localFixture is a checkpoint of 4 subtasks written with local copies
// under root, one TaskLocalStateStore per subtask.
type localFixture struct {
	cfs    *countingFS
	fss    *FileSystems
	remote string // checkpoint storage directory of the checkpoint
	root   string
	stores []*TaskLocalStateStore
	log    *logBuf
}

func newLocalFixture(t *testing.T) *localFixture {
	t.Helper()
	f := &localFixture{cfs: &countingFS{FileSystem: storage.Local()}, root: t.TempDir(), log: &logBuf{}}
	f.fss = testFileSystems(f.cfs)
	t.Cleanup(func() { f.fss.Close() })
	for sub := range 4 {
		f.stores = append(f.stores, NewTaskLocalStateStore(f.root, "v1", sub, zerolog.New(f.log)))
	}
	return f
}

// write writes checkpoint id of every subtask (as a checkpoint of type
// typ) and returns its TaskRestore.
func (f *localFixture) write(t *testing.T, id int64, typ runtime.CheckpointType) *pb.TaskRestore {
	t.Helper()
	f.remote = filepath.Join(t.TempDir(), "chk")
	loc := "file://" + f.remote
	rep := newReports()
	tr := &pb.TaskRestore{CheckpointId: id, Location: loc}
	for sub := range 4 {
		r := NewResponder(ResponderConfig{JobID: "job", Attempt: attempt(sub), Parallelism: 4, MaxParallelism: maxPar,
			FileSystems: f.fss, Report: rep.report, InlineThreshold: -1, LocalState: f.stores[sub], Log: zerolog.New(f.log)})
		r.Acknowledge(runtime.CheckpointBarrier{ID: id, Options: runtime.CheckpointOptions{Type: typ, TargetLocation: loc}}, snapshotOf(sub, 4), runtime.CheckpointSyncMetrics{})
		x := rep.next(t)
		r.Close()
		ack := x.GetAcknowledge()
		if ack == nil {
			t.Fatalf("subtask %d: %v", sub, x)
		}
		tr.Operators = append(tr.Operators, ack.Operators...)
	}
	return tr
}

// localCopy is subtask sub's local copy of checkpoint id's state file.
func (f *localFixture) localCopy(t *testing.T, tr *pb.TaskRestore, sub int) string {
	t.Helper()
	for _, h := range tr.Operators {
		if int(h.SubtaskIndex) == sub && h.File.GetPath() != "" {
			return filepath.Join(f.root, fmt.Sprintf("v1-%d", sub), fmt.Sprintf("chk-%d", tr.CheckpointId), h.File.Path)
		}
	}
	t.Fatalf("subtask %d wrote no file", sub)
	return ""
}

// checkSame fails unless got restores what Restore from checkpoint
// storage alone gives.
func checkSame(t *testing.T, got, want *runtime.TaskRestore) {
	t.Helper()
	if got.CheckpointID != want.CheckpointID || len(got.Operators) != len(want.Operators) {
		t.Fatalf("restored %+v, want %+v", got, want)
	}
	for id, w := range want.Operators {
		g := got.Operators[id]
		if g == nil || len(g.Keyed) != len(w.Keyed) || len(g.Lists) != len(w.Lists) || g.Finished != w.Finished {
			t.Fatalf("operator %s: %+v, want %+v", id, g, w)
		}
		for kg, sec := range w.Keyed {
			for name, b := range sec {
				if !bytes.Equal(g.Keyed[kg][name], b) {
					t.Fatalf("operator %s key group %d section %s differs", id, kg, name)
				}
			}
		}
		for name, els := range w.Lists {
			if !slices.EqualFunc(g.Lists[name], els, bytes.Equal) {
				t.Fatalf("operator %s list %s: %q, want %q", id, name, g.Lists[name], els)
			}
		}
	}
}

func TestLocalCopyIsPreferred(t *testing.T) {
	f := newLocalFixture(t)
	tr := f.write(t, 5, runtime.Checkpoint)
	want, err := Restore(context.Background(), f.fss, tr, 0, 4, maxPar)
	if err != nil {
		t.Fatal(err)
	}
	local := f.localCopy(t, tr, 0)
	if _, err := os.Stat(local); err != nil {
		t.Fatalf("no local copy: %v", err)
	}
	// Corrupt subtask 0's file in checkpoint storage: only a restore that
	// reads the local copy of it succeeds.
	remote := filepath.Join(f.remote, filepath.Base(local))
	data, err := os.ReadFile(remote)
	if err != nil {
		t.Fatal(err)
	}
	bad := slices.Clone(data)
	bad[tr.Operators[0].KeyGroups[0].Region.Offset+1] ^= 0xff
	if err := os.WriteFile(remote, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	f.cfs.read.Store(0)
	got, st, err := f.stores[0].Restore(context.Background(), f.fss, tr, 0, 4, maxPar)
	if err != nil {
		t.Fatalf("restore preferring the local copy: %v", err)
	}
	checkSame(t, got, want)
	// Its own file is local; the union list reads the other subtasks' files.
	if st.LocalFiles != 1 || st.RemoteFiles != 3 || st.Fallbacks != 0 || st.LocalBytes != int64(len(data)) {
		t.Fatalf("stats %+v", st)
	}
	if n := f.cfs.read.Load(); n >= int64(len(data)) {
		t.Fatalf("read %d bytes of checkpoint storage; subtask 0's own %d-byte file should not be among them", n, len(data))
	}
	if _, err := Restore(context.Background(), f.fss, tr, 0, 4, maxPar); err == nil {
		t.Fatal("the remote file is corrupt, yet a restore without the local copy succeeded: the test proves nothing")
	}

	// Another parallelism (the same subtask index) never reads local copies.
	if _, st, err := f.stores[0].Restore(context.Background(), f.fss, tr, 0, 2, maxPar); err == nil || st.LocalFiles != 0 {
		t.Fatalf("rescaled restore: %+v, %v (want the corrupt remote file read and failing)", st, err)
	}
	// Nor does another subtask's store.
	if err := os.WriteFile(remote, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, st, err := f.stores[1].Restore(context.Background(), f.fss, tr, 1, 4, maxPar); err != nil || st.LocalFiles != 1 || st.RemoteFiles != 3 {
		t.Fatalf("subtask 1: %+v, %v", st, err)
	}
	// A nil store reads checkpoint storage only.
	var none *TaskLocalStateStore
	if _, st, err := none.Restore(context.Background(), f.fss, tr, 0, 4, maxPar); err != nil || st.LocalFiles != 0 || st.RemoteFiles != 4 {
		t.Fatalf("nil store: %+v, %v", st, err)
	}
}

func TestCorruptOrMissingLocalCopyFallsBack(t *testing.T) {
	f := newLocalFixture(t)
	tr := f.write(t, 5, runtime.Checkpoint)
	want, err := Restore(context.Background(), f.fss, tr, 0, 4, maxPar)
	if err != nil {
		t.Fatal(err)
	}
	local := f.localCopy(t, tr, 0)
	data, err := os.ReadFile(local)
	if err != nil {
		t.Fatal(err)
	}
	kg := tr.Operators[0].KeyGroups[2].Region
	for _, tc := range []struct {
		name    string
		prepare func() error
		warn    string
	}{
		{"flipped byte", func() error {
			bad := slices.Clone(data)
			bad[kg.Offset+3] ^= 0xff
			return os.WriteFile(local, bad, 0o644)
		}, "checksum mismatch"},
		{"bad header of the same size", func() error {
			bad := slices.Clone(data)
			copy(bad, "NOTSTATE")
			return os.WriteFile(local, bad, 0o644)
		}, "bad magic"},
		{"truncated", func() error { return os.WriteFile(local, data[:len(data)/2], 0o644) }, "local copy has"},
		{"missing", func() error { return os.Remove(local) }, ""},
		{"local directory deleted", func() error { return os.RemoveAll(f.root) }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(local, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := tc.prepare(); err != nil {
				t.Fatal(err)
			}
			before := len(f.log.String())
			got, st, err := f.stores[0].Restore(context.Background(), f.fss, tr, 0, 4, maxPar)
			if err != nil {
				t.Fatalf("no fallback to checkpoint storage: %v", err)
			}
			checkSame(t, got, want)
			wantFallbacks := 0
			if tc.warn != "" {
				wantFallbacks = 1
			}
			if st.LocalFiles != 0 || st.RemoteFiles != 4 || st.Fallbacks != wantFallbacks {
				t.Fatalf("stats %+v", st)
			}
			logged := f.log.String()[before:]
			if tc.warn != "" && (!strings.Contains(logged, `"level":"warn"`) || !strings.Contains(logged, tc.warn)) {
				t.Fatalf("want a warning with %q, logged %s", tc.warn, logged)
			}
			if tc.warn == "" && strings.Contains(logged, `"level":"warn"`) {
				t.Fatalf("a missing copy is no warning: %s", logged)
			}
			if tc.warn != "" && tc.warn != "local copy has" {
				if _, err := os.Stat(local); !os.IsNotExist(err) {
					t.Fatalf("a corrupt local copy stays: %v", err)
				}
			}
		})
	}
}

func TestLocalCopyRetention(t *testing.T) {
	f := newLocalFixture(t)
	s := f.stores[2]
	ids := func() []int64 {
		got := s.localChkDirs()
		slices.Sort(got)
		return got
	}
	for _, id := range []int64{3, 4, 5, 6} {
		f.write(t, id, runtime.Checkpoint)
	}
	if got := ids(); !slices.Equal(got, []int64{3, 4, 5, 6}) {
		t.Fatalf("local copies %v", got)
	}
	rep := newReports()
	r := NewResponder(ResponderConfig{JobID: "job", Attempt: attempt(2), Parallelism: 4, MaxParallelism: maxPar,
		FileSystems: f.fss, Report: rep.report, LocalState: s, Log: zerolog.Nop()})
	defer r.Close()
	r.NotifyCheckpointComplete(5) // 6 is still pending: it stays
	if got := ids(); !slices.Equal(got, []int64{5, 6}) {
		t.Fatalf("after completing 5: %v", got)
	}
	r.NotifyCheckpointComplete(5) // idempotent
	r.NotifyCheckpointAborted(6)
	if got := ids(); !slices.Equal(got, []int64{5}) {
		t.Fatalf("after aborting 6: %v", got)
	}
	// Each subtask's store is its own: subtask 1 still has everything.
	if got := f.stores[1].localChkDirs(); len(got) != 4 {
		t.Fatalf("subtask 1's copies %v", got)
	}
	// Savepoints are never kept locally.
	f.write(t, 7, runtime.Savepoint)
	if got := ids(); !slices.Equal(got, []int64{5}) {
		t.Fatalf("after a savepoint: %v", got)
	}
	// A failing local write does not fail the checkpoint.
	if err := os.WriteFile(filepath.Join(s.Dir(), "chk-8"), []byte("a file where the directory goes"), 0o644); err != nil {
		t.Fatal(err)
	}
	loc := "file://" + filepath.Join(t.TempDir(), "chk-8")
	r2 := NewResponder(ResponderConfig{JobID: "job", Attempt: attempt(2), Parallelism: 4, MaxParallelism: maxPar,
		FileSystems: f.fss, Report: rep.report, InlineThreshold: -1, LocalState: s, Log: zerolog.New(f.log)})
	r2.Acknowledge(runtime.CheckpointBarrier{ID: 8, Options: runtime.CheckpointOptions{TargetLocation: loc}}, snapshotOf(2, 4), runtime.CheckpointSyncMetrics{})
	x := rep.next(t)
	r2.Close()
	if x.GetAcknowledge() == nil || !strings.Contains(f.log.String(), "keeping a local copy of the task's state failed") {
		t.Fatalf("want an acknowledgement and a warning, got %v; log %s", x, f.log.String())
	}
	// Without a store nothing happens.
	var none *TaskLocalStateStore
	none.ConfirmCheckpoint(1)
	none.AbortCheckpoint(1)
	if NewTaskLocalStateStore("", "v1", 0, zerolog.Nop()) != nil {
		t.Fatal("an empty root keeps local state")
	}
}

// BenchmarkRestoreLocalVsRemote restores one subtask's ~8 MiB keyed state
// from its local copy and from file:// checkpoint storage (the same disk,
// so this measures the read paths, not a remote file system's latency).
func BenchmarkRestoreLocalVsRemote(b *testing.B) {
	cfs := &countingFS{FileSystem: storage.Local()}
	fss := testFileSystems(cfs)
	defer fss.Close()
	store := NewTaskLocalStateStore(b.TempDir(), "v1", 0, zerolog.Nop())
	op := &runtime.OperatorSnapshot{OperatorID: "op-keyed"}
	for g := range maxPar {
		op.PutKeyed(g, "state:big", "bytes", bytes.Repeat([]byte{byte(g)}, 64<<10))
	}
	loc := "file://" + b.TempDir()
	rep := make(chan *pb.RunnerCheckpointReport, 1)
	r := NewResponder(ResponderConfig{JobID: "job", Attempt: attempt(0), Parallelism: 1, MaxParallelism: maxPar, FileSystems: fss,
		Report: func(x *pb.RunnerCheckpointReport) { rep <- x }, InlineThreshold: -1, LocalState: store, Log: zerolog.Nop()})
	r.Acknowledge(runtime.CheckpointBarrier{ID: 1, Options: runtime.CheckpointOptions{TargetLocation: loc}},
		&runtime.TaskSnapshot{Operators: []*runtime.OperatorSnapshot{op}}, runtime.CheckpointSyncMetrics{})
	ack := (<-rep).GetAcknowledge()
	r.Close()
	if ack == nil {
		b.Fatal("not acknowledged")
	}
	tr := &pb.TaskRestore{CheckpointId: 1, Location: loc, Operators: ack.Operators}
	for _, tc := range []struct {
		name  string
		store *TaskLocalStateStore
		local int
	}{{"local", store, 1}, {"remote", nil, 0}} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(ack.Operators[0].File.Size)
			for b.Loop() {
				_, st, err := tc.store.Restore(context.Background(), fss, tr, 0, 1, maxPar)
				if err != nil || st.LocalFiles != tc.local {
					b.Fatalf("%+v %v", st, err)
				}
			}
		})
	}
}
