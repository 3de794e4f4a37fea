package checkpointing

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/stream/runtime"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const maxPar = 128

// reports collects a Responder's reports.
type reports struct {
	ch chan *pb.RunnerCheckpointReport
}

func newReports() *reports { return &reports{ch: make(chan *pb.RunnerCheckpointReport, 100)} }

func (r *reports) report(x *pb.RunnerCheckpointReport) { r.ch <- x }

func (r *reports) next(t *testing.T) *pb.RunnerCheckpointReport {
	t.Helper()
	select {
	case x := <-r.ch:
		return x
	case <-time.After(30 * time.Second):
		t.Fatal("no checkpoint report")
		return nil
	}
}

// countingFS counts the bytes read through it and can fail renames.
type countingFS struct {
	storage.FileSystem
	read       atomic.Int64
	failRename error
}

func (c *countingFS) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	rc, err := c.FileSystem.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	return &countingReader{rc.(readSeekCloser), &c.read}, nil
}

func (c *countingFS) Rename(ctx context.Context, from, to string) error {
	if c.failRename != nil {
		return c.failRename
	}
	return c.FileSystem.Rename(ctx, from, to)
}

type readSeekCloser interface {
	io.ReadSeekCloser
}

type countingReader struct {
	readSeekCloser
	n *atomic.Int64
}

func (r *countingReader) Read(b []byte) (int, error) {
	n, err := r.readSeekCloser.Read(b)
	r.n.Add(int64(n))
	return n, err
}

func testFileSystems(fs *countingFS) *FileSystems {
	f := NewFileSystems(storage.Options{})
	f.open = func(ctx context.Context, uri string) (storage.FileSystem, string, error) {
		_, root, err := storage.Open(ctx, uri, storage.Options{})
		return fs, root, err
	}
	return f
}

func attempt(sub int) *pb.ExecutionAttemptID {
	return &pb.ExecutionAttemptID{Graph: 7, JobVertexId: "v1", SubtaskIndex: int32(sub), AttemptNumber: 2}
}

// snapshotOf is subtask sub's state out of 4: keyed sections in each of its
// key groups, SPLIT list "split" with sub+1 elements, UNION "union" with
// one, BROADCAST "bcast" the same everywhere (but tagged, to tell whose is
// read). A second operator holds only a finished flag.
func snapshotOf(sub, par int) *runtime.TaskSnapshot {
	op := &runtime.OperatorSnapshot{OperatorID: "op-keyed"}
	start, end := runtime.KeyGroupRange(sub, par, maxPar)
	for g := start; g <= end; g++ {
		op.PutKeyed(g, "state:count", "int64", []byte(fmt.Sprintf("count-%d", g)))
		op.PutKeyed(g, "timers", "timers", bytes.Repeat([]byte{byte(g)}, 300))
	}
	var split [][]byte
	for i := 0; i <= sub; i++ {
		split = append(split, []byte(fmt.Sprintf("split-%d-%d", sub, i)))
	}
	op.PutList("split", runtime.SplitList, "string", split)
	op.PutList("union", runtime.UnionList, "string", [][]byte{[]byte(fmt.Sprintf("union-%d", sub))})
	op.PutList("bcast", runtime.BroadcastList, "string", [][]byte{[]byte(fmt.Sprintf("bcast-from-%d", sub))})
	return &runtime.TaskSnapshot{Operators: []*runtime.OperatorSnapshot{op, {OperatorID: "op-sink", Finished: sub != 3}}}
}

// writeCheckpoint writes the snapshots of 4 subtasks and returns the
// TaskRestore a JobMaster would build from their acknowledgements.
func writeCheckpoint(t *testing.T, fss *FileSystems, dir string, inline int) *pb.TaskRestore {
	t.Helper()
	rep := newReports()
	loc := "file://" + dir
	tr := &pb.TaskRestore{CheckpointId: 5, Location: loc}
	for sub := range 4 {
		r := NewResponder(ResponderConfig{JobID: "job", Attempt: attempt(sub), Parallelism: 4, MaxParallelism: maxPar,
			FileSystems: fss, Report: rep.report, InlineThreshold: inline, Log: zerolog.Nop()})
		r.Acknowledge(runtime.CheckpointBarrier{ID: 5, Options: runtime.CheckpointOptions{TargetLocation: loc}}, snapshotOf(sub, 4),
			runtime.CheckpointSyncMetrics{SyncDuration: 3 * time.Millisecond, AlignmentDuration: 4 * time.Millisecond})
		x := rep.next(t)
		r.Close()
		ack := x.GetAcknowledge()
		if ack == nil {
			t.Fatalf("subtask %d: %v", sub, x)
		}
		if ack.CheckpointId != 5 || ack.JobId != "job" || ack.Attempt.SubtaskIndex != int32(sub) || len(ack.Operators) != 2 ||
			ack.Metrics.StateSize <= 0 || ack.Metrics.SyncDurationMs != 3 || ack.Metrics.AlignmentDurationMs != 4 {
			t.Fatalf("subtask %d acknowledged %v", sub, ack)
		}
		if h := ack.Operators[1]; h.OperatorId != "op-sink" || h.File != nil || h.Finished != (sub != 3) {
			t.Fatalf("stateless operator's handle %v", h)
		}
		h := ack.Operators[0]
		if h.Parallelism != 4 || h.MaxParallelism != maxPar || h.SubtaskIndex != int32(sub) || h.StateTypes["timers"] != "timers" {
			t.Fatalf("handle %v", h)
		}
		if inline < 0 && (h.File.GetPath() == "" || strings.Contains(h.File.Path, "/") || len(h.File.Inline) > 0) {
			t.Fatalf("want a relative file, got %v", h.File)
		}
		if inline > 0 && len(h.File.GetInline()) == 0 {
			t.Fatalf("want inline state, got %v", h.File)
		}
		tr.Operators = append(tr.Operators, ack.Operators...)
	}
	return tr
}

func checkRescaled(t *testing.T, fss *FileSystems, tr *pb.TaskRestore, par int) []*runtime.TaskRestore {
	t.Helper()
	seen := map[int]int{}
	var splits []string
	var out []*runtime.TaskRestore
	for sub := range par {
		got, err := Restore(context.Background(), fss, tr, sub, par, maxPar)
		if err != nil {
			t.Fatalf("p=%d subtask %d: %v", par, sub, err)
		}
		out = append(out, got)
		if got.CheckpointID != 5 {
			t.Fatalf("checkpoint ID %d", got.CheckpointID)
		}
		or := got.Operators["op-keyed"]
		start, end := runtime.KeyGroupRange(sub, par, maxPar)
		if len(or.Keyed) != end-start+1 {
			t.Fatalf("p=%d subtask %d restored %d key groups, owns %d", par, sub, len(or.Keyed), end-start+1)
		}
		for g, sec := range or.Keyed {
			if g < start || g > end {
				t.Fatalf("p=%d subtask %d got key group %d outside [%d, %d]", par, sub, g, start, end)
			}
			seen[g]++
			if string(sec["state:count"]) != fmt.Sprintf("count-%d", g) || !bytes.Equal(sec["timers"], bytes.Repeat([]byte{byte(g)}, 300)) {
				t.Fatalf("key group %d: %q", g, sec)
			}
		}
		for _, e := range or.Lists["split"] {
			splits = append(splits, string(e))
		}
		var union []string
		for _, e := range or.Lists["union"] {
			union = append(union, string(e))
		}
		if !slices.Equal(union, []string{"union-0", "union-1", "union-2", "union-3"}) {
			t.Fatalf("union list %q", union)
		}
		if b := or.Lists["bcast"]; len(b) != 1 || string(b[0]) != "bcast-from-0" {
			t.Fatalf("broadcast list %q", b)
		}
		if or.StateTypes["state:count"] != "int64" || or.StateTypes["split"] != "string" {
			t.Fatalf("state types %v", or.StateTypes)
		}
		if sink := got.Operators["op-sink"]; sink == nil || sink.Finished {
			t.Fatalf("sink restore %+v: one old subtask had not finished", sink)
		}
	}
	for g := range maxPar {
		if seen[g] != 1 {
			t.Fatalf("p=%d: key group %d restored %d times", par, g, seen[g])
		}
	}
	var want []string
	for sub := range 4 {
		for i := 0; i <= sub; i++ {
			want = append(want, fmt.Sprintf("split-%d-%d", sub, i))
		}
	}
	if !slices.Equal(splits, want) {
		t.Fatalf("p=%d: split elements %q, want each once in order %q", par, splits, want)
	}
	return out
}

func TestRescaleRoundtrip(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inline int
	}{{"files", -1}, {"inline", 1 << 20}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfs := &countingFS{FileSystem: storage.Local()}
			fss := testFileSystems(cfs)
			defer fss.Close()
			tr := writeCheckpoint(t, fss, dir, tc.inline)
			for _, par := range []int{4, 2, 6, 1} {
				checkRescaled(t, fss, tr, par)
			}
			if tc.inline > 0 {
				if ents, _ := os.ReadDir(dir); len(ents) != 0 {
					t.Fatalf("inline state wrote files: %v", ents)
				}
				return
			}
			ents, err := os.ReadDir(dir)
			if err != nil || len(ents) != 4 {
				t.Fatalf("want 4 state files, got %v, %v", ents, err)
			}
			var total int64
			for _, e := range ents {
				if storage.IsTempName(e.Name()) || !strings.HasPrefix(e.Name(), "v1-") {
					t.Fatalf("state file %q", e.Name())
				}
				info, _ := e.Info()
				total += info.Size()
			}
			// A subtask of 6 reads its part of the key groups, not whole files.
			cfs.read.Store(0)
			if _, err := Restore(context.Background(), fss, tr, 5, 6, maxPar); err != nil {
				t.Fatal(err)
			}
			if n := cfs.read.Load(); n <= 0 || n > total/3 {
				t.Fatalf("subtask 5 of 6 read %d bytes of %d", n, total)
			}
		})
	}
}

func TestRestoreCorruptOrMissingFileNamesIt(t *testing.T) {
	dir := t.TempDir()
	fss := testFileSystems(&countingFS{FileSystem: storage.Local()})
	defer fss.Close()
	tr := writeCheckpoint(t, fss, dir, -1)
	name := tr.Operators[0].File.Path // subtask 0's file
	full := filepath.Join(dir, name)
	data, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}

	// A flipped byte in a key group subtask 0 of 2 reads.
	kg := tr.Operators[0].KeyGroups[3].Region
	bad := slices.Clone(data)
	bad[kg.Offset+2] ^= 0xff
	if err := os.WriteFile(full, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Restore(context.Background(), fss, tr, 0, 2, maxPar)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("corrupt key group: %v", err)
	}
	// Subtask 1 of 2 does not read that key group.
	if _, err := Restore(context.Background(), fss, tr, 1, 2, maxPar); err != nil {
		t.Fatalf("subtask 1 of 2 reads only its key groups: %v", err)
	}

	// A truncated file.
	if err := os.WriteFile(full, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(context.Background(), fss, tr, 0, 1, maxPar); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), name) {
		t.Fatalf("truncated: %v", err)
	}

	// A file that is not a state file.
	if err := os.WriteFile(full, []byte("hello, this is not a state file at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(context.Background(), fss, tr, 0, 1, maxPar); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "magic") {
		t.Fatalf("bad magic: %v", err)
	}

	// A missing file.
	if err := os.Remove(full); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(context.Background(), fss, tr, 0, 1, maxPar); !errors.Is(err, storage.ErrNotFound) || !strings.Contains(err.Error(), name) {
		t.Fatalf("missing: %v", err)
	}

	// Another max parallelism cannot take the keyed state.
	if _, err := Restore(context.Background(), fss, tr, 0, 1, 64); err == nil || !strings.Contains(err.Error(), "max parallelism") {
		t.Fatalf("max parallelism changed: %v", err)
	}
}

func TestFailedWriteDeclinesAndLeavesNoFile(t *testing.T) {
	dir := t.TempDir()
	cfs := &countingFS{FileSystem: storage.Local(), failRename: fmt.Errorf("%w: injected", storage.ErrUnavailable)}
	fss := testFileSystems(cfs)
	defer fss.Close()
	rep := newReports()
	loc := "file://" + dir + "/chk-9"
	r := NewResponder(ResponderConfig{JobID: "job", Attempt: attempt(1), Parallelism: 4, MaxParallelism: maxPar,
		FileSystems: fss, Report: rep.report, InlineThreshold: -1, Log: zerolog.Nop()})
	defer r.Close()
	r.Acknowledge(runtime.CheckpointBarrier{ID: 9, Options: runtime.CheckpointOptions{TargetLocation: loc}}, snapshotOf(1, 4), runtime.CheckpointSyncMetrics{})
	d := rep.next(t).GetDecline()
	if d == nil || d.CheckpointId != 9 || d.Attempt.SubtaskIndex != 1 ||
		!strings.Contains(d.Reason.GetMessage(), loc+"/v1-1-2-") || !strings.Contains(d.Reason.GetMessage(), "injected") {
		t.Fatalf("decline %v", d)
	}
	ents, err := os.ReadDir(filepath.Join(dir, "chk-9"))
	if err != nil || len(ents) != 0 {
		t.Fatalf("a failed write left %v (%v)", ents, err)
	}
}

// blockingFS blocks every Create until its context ends.
type blockingFS struct {
	storage.FileSystem
	once    sync.Once
	entered chan struct{}
}

func (b *blockingFS) Create(ctx context.Context, p string) (io.WriteCloser, error) {
	b.once.Do(func() { close(b.entered) })
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestCloseStopsWritesAndDeclines(t *testing.T) {
	bfs := &blockingFS{FileSystem: storage.Local(), entered: make(chan struct{})}
	fss := NewFileSystems(storage.Options{})
	fss.open = func(ctx context.Context, uri string) (storage.FileSystem, string, error) {
		_, root, err := storage.Open(ctx, uri, storage.Options{})
		return bfs, root, err
	}
	defer fss.Close()
	rep := newReports()
	r := NewResponder(ResponderConfig{JobID: "job", Attempt: attempt(0), Parallelism: 4, MaxParallelism: maxPar,
		FileSystems: fss, Report: rep.report, InlineThreshold: -1, Log: zerolog.Nop()})
	r.Acknowledge(runtime.CheckpointBarrier{ID: 1, Options: runtime.CheckpointOptions{TargetLocation: "file://" + t.TempDir()}}, snapshotOf(0, 4), runtime.CheckpointSyncMetrics{})
	select {
	case <-bfs.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the write did not start")
	}
	r.Close() // returns only once the write goroutine ended
	if d := rep.next(t).GetDecline(); d == nil || d.CheckpointId != 1 || !strings.Contains(d.Reason.GetMessage(), "task ended") {
		t.Fatalf("want a decline, got %v", d)
	}
	r.Acknowledge(runtime.CheckpointBarrier{ID: 2}, snapshotOf(0, 4), runtime.CheckpointSyncMetrics{})
	if d := rep.next(t).GetDecline(); d == nil || d.CheckpointId != 2 {
		t.Fatalf("after Close: %v", d)
	}
}

func TestEmptySnapshotAcknowledgesWithoutFile(t *testing.T) {
	rep := newReports()
	r := NewResponder(ResponderConfig{JobID: "job", Attempt: attempt(0), Parallelism: 1, MaxParallelism: maxPar,
		FileSystems: NewFileSystems(storage.Options{}), Report: rep.report, Log: zerolog.Nop()})
	defer r.Close()
	r.Acknowledge(runtime.CheckpointBarrier{ID: 3}, &runtime.TaskSnapshot{}, runtime.CheckpointSyncMetrics{})
	if a := rep.next(t).GetAcknowledge(); a == nil || a.CheckpointId != 3 || len(a.Operators) != 0 {
		t.Fatalf("ack %v", a)
	}
	got, err := Restore(context.Background(), nil, nil, 0, 1, maxPar)
	if got != nil || err != nil {
		t.Fatalf("nil restore: %v %v", got, err)
	}
}

// streamedSnapshot is an operator whose keyed state "state:big" (size
// bytes per key group of groups) is streamed, reusing one buffer, and
// whose timers are synchronous in the same groups. failAt > 0 fails the
// stream at that group.
func streamedSnapshot(groups, size, failAt int) *runtime.TaskSnapshot {
	op := &runtime.OperatorSnapshot{OperatorID: "op-keyed"}
	for g := 0; g < groups; g += 2 {
		op.PutKeyed(g, "timers", "timers", []byte(fmt.Sprintf("timers-%d", g)))
	}
	op.StateTypes["state:big"] = "bytes"
	buf := make([]byte, size)
	op.KeyedStream = func(emit func(int, map[string][]byte) error) error {
		for g := 0; g < groups; g++ {
			if g == failAt {
				return fmt.Errorf("injected serializer failure")
			}
			for i := range buf {
				buf[i] = byte(g + i)
			}
			if err := emit(g, map[string][]byte{"state:big": buf}); err != nil {
				return err
			}
		}
		return nil
	}
	return &runtime.TaskSnapshot{Operators: []*runtime.OperatorSnapshot{op}}
}

// The asynchronous part of a snapshot is serialized by the Responder and
// merged with the synchronous sections, inline, in a small file and in a
// file streamed past the in-memory limit.
func TestStreamedKeyedStateRoundtrip(t *testing.T) {
	for _, c := range []struct {
		name         string
		size, inline int
	}{{"inline", 40, 0}, {"small-file", 40, -1}, {"streamed-file", 20 << 10, 0}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			fss := NewFileSystems(storage.Options{})
			defer fss.Close()
			rep := newReports()
			loc := "file://" + dir
			r := NewResponder(ResponderConfig{JobID: "job", Attempt: attempt(0), Parallelism: 1, MaxParallelism: maxPar,
				FileSystems: fss, Report: rep.report, InlineThreshold: c.inline, Log: zerolog.Nop()})
			defer r.Close()
			r.Acknowledge(runtime.CheckpointBarrier{ID: 2, Options: runtime.CheckpointOptions{TargetLocation: loc}},
				streamedSnapshot(maxPar, c.size, -1), runtime.CheckpointSyncMetrics{})
			ack := rep.next(t).GetAcknowledge()
			if ack == nil {
				t.Fatal("declined")
			}
			if inline := len(ack.Operators[0].File.GetInline()) > 0; inline != (c.name == "inline") {
				t.Fatalf("inline %v, want the opposite: %v", inline, ack.Operators[0].File)
			}
			tr, err := Restore(context.Background(), fss, &pb.TaskRestore{CheckpointId: 2, Location: loc, Operators: ack.Operators}, 0, 1, maxPar)
			if err != nil {
				t.Fatal(err)
			}
			or := tr.Operators["op-keyed"]
			if len(or.Keyed) != maxPar || or.StateTypes["state:big"] != "bytes" || or.StateTypes["timers"] != "timers" {
				t.Fatalf("restored %d key groups, types %v", len(or.Keyed), or.StateTypes)
			}
			for g := 0; g < maxPar; g++ {
				big := or.Keyed[g]["state:big"]
				if len(big) != c.size || big[0] != byte(g) || big[c.size-1] != byte(g+c.size-1) {
					t.Fatalf("key group %d: state of %d bytes", g, len(big))
				}
				if ts, want := string(or.Keyed[g]["timers"]), fmt.Sprintf("timers-%d", g); (g%2 == 0) != (ts == want) {
					t.Fatalf("key group %d: timers %q", g, ts)
				}
			}
		})
	}
}

// A failing serializer declines the checkpoint and leaves no file, also
// when it fails after the file was started.
func TestStreamFailureDeclinesAndLeavesNoFile(t *testing.T) {
	dir := t.TempDir()
	fss := NewFileSystems(storage.Options{})
	defer fss.Close()
	rep := newReports()
	loc := "file://" + dir + "/chk-3"
	r := NewResponder(ResponderConfig{JobID: "job", Attempt: attempt(0), Parallelism: 1, MaxParallelism: maxPar,
		FileSystems: fss, Report: rep.report, Log: zerolog.Nop()})
	defer r.Close()
	r.Acknowledge(runtime.CheckpointBarrier{ID: 3, Options: runtime.CheckpointOptions{TargetLocation: loc}},
		streamedSnapshot(maxPar, 20<<10, 100), runtime.CheckpointSyncMetrics{})
	d := rep.next(t).GetDecline()
	if d == nil || !strings.Contains(d.Reason.GetMessage(), "injected serializer failure") {
		t.Fatalf("want a decline naming the failure, got %v", d)
	}
	ents, err := os.ReadDir(filepath.Join(dir, "chk-3"))
	if err != nil || len(ents) != 0 {
		t.Fatalf("a failed write left %v (%v)", ents, err)
	}
}

// A corrupt region of a local file (read with positioned reads) fails the
// restore naming the file.
func TestRestoreCorruptRegionPositionedReads(t *testing.T) {
	dir := t.TempDir()
	fss := NewFileSystems(storage.Options{})
	defer fss.Close()
	rep := newReports()
	loc := "file://" + dir
	r := NewResponder(ResponderConfig{JobID: "job", Attempt: attempt(0), Parallelism: 1, MaxParallelism: maxPar,
		FileSystems: fss, Report: rep.report, InlineThreshold: -1, Log: zerolog.Nop()})
	defer r.Close()
	r.Acknowledge(runtime.CheckpointBarrier{ID: 4, Options: runtime.CheckpointOptions{TargetLocation: loc}},
		streamedSnapshot(maxPar, 100, -1), runtime.CheckpointSyncMetrics{})
	ack := rep.next(t).GetAcknowledge()
	if ack == nil {
		t.Fatal("declined")
	}
	h := ack.Operators[0]
	p := filepath.Join(dir, h.File.Path)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	data[h.KeyGroups[len(h.KeyGroups)/2].Region.Offset+2] ^= 0xff
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Restore(context.Background(), fss, &pb.TaskRestore{CheckpointId: 4, Location: loc, Operators: ack.Operators}, 0, 1, maxPar)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), h.File.Path) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("want a checksum error naming %s, got %v", h.File.Path, err)
	}
}

// An operator's Persist runs before the state is written and its failure
// declines the checkpoint without a file; one that succeeds is acknowledged.
func TestPersistRunsBeforeTheAcknowledgement(t *testing.T) {
	dir := t.TempDir()
	fss := NewFileSystems(storage.Options{})
	defer fss.Close()
	rep := newReports()
	r := NewResponder(ResponderConfig{JobID: "job", Attempt: attempt(0), Parallelism: 1, MaxParallelism: maxPar,
		FileSystems: fss, Report: rep.report, InlineThreshold: -1, Log: zerolog.Nop()})
	defer r.Close()
	for _, tc := range []struct {
		id  int64
		err error
	}{{4, errors.New("injected persist failure")}, {5, nil}} {
		loc := fmt.Sprintf("file://%s/chk-%d", dir, tc.id)
		snap := snapshotOf(0, 1)
		ran := 0
		snap.Operators[0].Persist = func() error { ran++; return tc.err }
		r.Acknowledge(runtime.CheckpointBarrier{ID: tc.id, Options: runtime.CheckpointOptions{TargetLocation: loc}}, snap, runtime.CheckpointSyncMetrics{})
		got := rep.next(t)
		if ran != 1 {
			t.Fatalf("checkpoint %d: Persist ran %d times, want once", tc.id, ran)
		}
		if tc.err != nil {
			if d := got.GetDecline(); d == nil || !strings.Contains(d.Reason.GetMessage(), "injected persist failure") {
				t.Fatalf("checkpoint %d: want a decline naming the persist failure, got %v", tc.id, got)
			}
			if ents, _ := os.ReadDir(filepath.Join(dir, fmt.Sprintf("chk-%d", tc.id))); len(ents) != 0 {
				t.Fatalf("a declined checkpoint left %v", ents)
			}
		} else if got.GetAcknowledge() == nil {
			t.Fatalf("checkpoint %d: want an acknowledgement, got %v", tc.id, got)
		}
	}
}
