package checkpointing

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/stream/runtime"
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
	if n <= 0 {
		return nil, errors.New("bad varint")
	}
	return int(v), nil
}

func (intCodec) TypeName() string { return "int" }

type strCodec struct{}

func (strCodec) Append(dst []byte, v any) ([]byte, error) { return append(dst, v.(string)...), nil }
func (strCodec) Decode(src []byte) (any, error)           { return string(src), nil }
func (strCodec) TypeName() string                         { return "string" }

// createsFS records the files created through it.
type createsFS struct {
	storage.FileSystem
	mu      sync.Mutex
	created []string
}

func (c *createsFS) Create(ctx context.Context, p string) (io.WriteCloser, error) {
	c.mu.Lock()
	c.created = append(c.created, p)
	c.mu.Unlock()
	return c.FileSystem.Create(ctx, p)
}

func (c *createsFS) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.created
	c.created = nil
	return out
}

func lsmBackend(t *testing.T, sub, par int) *runtime.KeyedStateBackend {
	t.Helper()
	b, err := runtime.NewKeyedStateBackendWithOptions(maxPar, runtime.StateBackendOptions{Type: "rocksdb", Incremental: true,
		LocalDir: t.TempDir(), OperatorID: "op-keyed", SubtaskIndex: sub, Parallelism: par})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	b.SetKeyCodec(intCodec{})
	if err := b.RegisterState("v", strCodec{}); err != nil {
		t.Fatal(err)
	}
	return b
}

func ackOf(t *testing.T, r *Responder, rep *reports, b runtime.CheckpointBarrier, op *runtime.OperatorSnapshot) *pb.AcknowledgeCheckpointRequest {
	t.Helper()
	r.Acknowledge(b, &runtime.TaskSnapshot{Operators: []*runtime.OperatorSnapshot{op}}, runtime.CheckpointSyncMetrics{})
	x := rep.next(t)
	ack := x.GetAcknowledge()
	if ack == nil {
		t.Fatalf("checkpoint %d: %v", b.ID, x)
	}
	return ack
}

// TestIncrementalUploadAndRestore: an incremental LSM snapshot's files go
// to <job>/shared once, every handle lists all of them by absolute URI,
// the metrics tell uploaded from total bytes, and a rescaled restore
// downloads what each new subtask needs and rebuilds the state.
func TestIncrementalUploadAndRestore(t *testing.T) {
	root := t.TempDir()
	cfs := &createsFS{}
	fss := NewFileSystems(storage.Options{})
	fss.open = func(ctx context.Context, uri string) (storage.FileSystem, string, error) {
		fsys, p, err := storage.Open(ctx, uri, storage.Options{})
		cfs.FileSystem = fsys
		return cfs, p, err
	}
	defer fss.Close()
	rep := newReports()
	r := NewResponder(ResponderConfig{JobID: "job", Attempt: attempt(0), Parallelism: 1, MaxParallelism: maxPar,
		FileSystems: fss, Report: rep.report, Log: zerolog.Nop()})
	defer r.Close()
	jobDir := "file://" + filepath.Join(root, "job")
	barrier := func(id int64) runtime.CheckpointBarrier {
		return runtime.CheckpointBarrier{ID: id, Options: runtime.CheckpointOptions{Type: runtime.Checkpoint,
			TargetLocation: fmt.Sprintf("%s/chk-%d", jobDir, id)}}
	}

	b := lsmBackend(t, 0, 1)
	const n = 5000
	pad := strings.Repeat("x", 100)
	for k := range n {
		b.SetCurrentKey(k)
		b.Put("v", fmt.Sprintf("%d-%s", k, pad))
	}
	snap1 := &runtime.OperatorSnapshot{OperatorID: "op-keyed", CheckpointID: 1}
	if err := b.Snapshot(snap1); err != nil {
		t.Fatal(err)
	}
	ack1 := ackOf(t, r, rep, barrier(1), snap1)
	h1 := ack1.Operators[0]
	if len(h1.SharedFiles) != len(snap1.SharedFiles) || len(h1.SharedFiles) == 0 {
		t.Fatalf("handle lists %d shared files, the snapshot has %d", len(h1.SharedFiles), len(snap1.SharedFiles))
	}
	var shared1 int64
	for i, f := range h1.SharedFiles {
		want := jobDir + "/shared/" + snap1.SharedFiles[i].Name
		if f.Path != want || f.Size != snap1.SharedFiles[i].Size {
			t.Fatalf("shared file %v, want %s of %d bytes", f, want, snap1.SharedFiles[i].Size)
		}
		if fi, err := os.Stat(strings.TrimPrefix(want, "file://")); err != nil || fi.Size() != f.Size {
			t.Fatalf("uploaded %s: %v", want, err)
		}
		shared1 += f.Size
	}
	if m := ack1.Metrics; m.StateSize <= shared1 || m.CheckpointedSize != m.StateSize {
		t.Fatalf("checkpoint 1 metrics %v; shared files %d bytes, all new", m, shared1)
	}
	cfs.take()
	b.NotifyCheckpointComplete(1)

	for k := range 10 {
		b.SetCurrentKey(k)
		b.Put("v", "updated")
	}
	snap2 := &runtime.OperatorSnapshot{OperatorID: "op-keyed", CheckpointID: 2}
	if err := b.Snapshot(snap2); err != nil {
		t.Fatal(err)
	}
	ack2 := ackOf(t, r, rep, barrier(2), snap2)
	var reused, all int64
	var created []string
	for _, p := range cfs.take() {
		created = append(created, filepath.Base(p))
	}
	for _, f := range snap2.SharedFiles {
		all += f.Size
		up := false
		for _, c := range created {
			up = up || strings.Contains(c, f.Name)
		}
		if f.Uploaded {
			reused += f.Size
			if up {
				t.Errorf("%s was uploaded by checkpoint 1 and again by 2", f.Name)
			}
		} else if !up {
			t.Errorf("%s is new in checkpoint 2 but was not uploaded", f.Name)
		}
	}
	m := ack2.Metrics
	if reused == 0 || m.StateSize-m.CheckpointedSize != reused || m.CheckpointedSize*2 > m.StateSize {
		t.Fatalf("checkpoint 2 metrics %v; %d of %d shared bytes reused", m, reused, all)
	}
	t.Logf("checkpoint 1: %d bytes uploaded; checkpoint 2: %d of %d bytes uploaded", ack1.Metrics.CheckpointedSize, m.CheckpointedSize, m.StateSize)

	// Restore at parallelism 2: each new subtask gets the old subtask's
	// files and keeps the keys of its range.
	tr := &pb.TaskRestore{CheckpointId: 2, Location: jobDir + "/chk-2", Operators: ack2.Operators}
	total := 0
	for sub := range 2 {
		dl := t.TempDir()
		got, _, err := RestoreShared(context.Background(), fss, nil, tr, sub, 2, maxPar, dl)
		if err != nil {
			t.Fatal(err)
		}
		or := got.Operators["op-keyed"]
		if len(or.SharedFiles) != len(snap2.SharedFiles) {
			t.Fatalf("subtask %d got %d shared files, want %d", sub, len(or.SharedFiles), len(snap2.SharedFiles))
		}
		for _, f := range or.SharedFiles {
			if !f.Uploaded || filepath.Dir(f.LocalPath) != dl {
				t.Fatalf("restored shared file %+v not downloaded into %s", f, dl)
			}
		}
		nb := lsmBackend(t, sub, 2)
		if err := nb.Restore(or); err != nil {
			t.Fatal(err)
		}
		keys := nb.Keys("v")
		total += len(keys)
		for _, k := range keys {
			nb.SetCurrentKey(k)
			want := fmt.Sprintf("%d-%s", k, pad)
			if k.(int) < 10 {
				want = "updated"
			}
			if v, _ := nb.Get("v"); v != want {
				t.Fatalf("subtask %d: key %v restored as %v", sub, k, v)
			}
		}
	}
	if total != n {
		t.Fatalf("restored %d keys in all, want %d", total, n)
	}

	// A missing shared file fails the restore naming it.
	gone := ack2.Operators[0].SharedFiles[0].Path
	if err := os.Remove(strings.TrimPrefix(gone, "file://")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := RestoreShared(context.Background(), fss, nil, tr, 0, 1, maxPar, t.TempDir()); err == nil || !strings.Contains(err.Error(), gone) {
		t.Fatalf("restore without %s: %v", gone, err)
	}
}

// TestSharedFilesOnlyInCheckpoints: a savepoint snapshot with shared files
// is declined, and a handle without shared files downloads nothing.
func TestSharedFilesOnlyInCheckpoints(t *testing.T) {
	root := t.TempDir()
	fss := NewFileSystems(storage.Options{})
	defer fss.Close()
	rep := newReports()
	r := NewResponder(ResponderConfig{JobID: "job", Attempt: attempt(0), Parallelism: 1, MaxParallelism: maxPar,
		FileSystems: fss, Report: rep.report, Log: zerolog.Nop()})
	defer r.Close()
	local := filepath.Join(root, "f.sst")
	if err := os.WriteFile(local, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	op := &runtime.OperatorSnapshot{OperatorID: "op", CheckpointID: 3,
		SharedFiles: []runtime.SharedStateFile{{Name: "op-0-db-f.sst", LocalPath: local, Size: 4}}}
	op.PutKeyed(0, "lsm:manifest", "m", []byte("x"))
	r.Acknowledge(runtime.CheckpointBarrier{ID: 3, Options: runtime.CheckpointOptions{Type: runtime.Savepoint,
		TargetLocation: "file://" + filepath.Join(root, "savepoint-1")}}, &runtime.TaskSnapshot{Operators: []*runtime.OperatorSnapshot{op}}, runtime.CheckpointSyncMetrics{})
	if d := rep.next(t).GetDecline(); d == nil || !strings.Contains(d.GetReason().String(), "savepoint") {
		t.Fatalf("savepoint with shared files: %v", d)
	}
	if got := SharedDir("hdfs://nn:8020/ck/job/chk-7/"); got != "hdfs://nn:8020/ck/job/shared" {
		t.Fatalf("SharedDir = %s", got)
	}
}
