package stream

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gofl/gofl/stream/runtime"
)

// openTextSink opens WriteAsText's operator as a checkpointing subtask
// would, and returns it with its sink.
func openTextSink(t *testing.T, dir string) *textSinkSwitch[string] {
	t.Helper()
	env := NewEnvironment()
	op := FromElements(env, "").WriteAsText(dir).n.newOperator().(*textSinkSwitch[string])
	if err := op.Open(&runtime.Context{OperatorName: "Counts", Parallelism: 1, MaxParallelism: 128, Checkpointing: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { op.Close() })
	return op
}

func hiddenNames(t *testing.T, dir string) string {
	t.Helper()
	_, hidden := visible(t, dir)
	return strings.Join(hidden, " ")
}

// The text sink's snapshot leaves the durable part (close with fsync,
// rename to pending) to Persist, which the Responder runs off the task's
// goroutine; the checkpoint's commit then publishes the file.
func TestTextSinkPersistsOffTheTaskGoroutine(t *testing.T) {
	dir := t.TempDir()
	op := openTextSink(t, dir)
	for _, v := range []string{"a1", "a2"} {
		if err := op.ProcessElement(0, runtime.Record{Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	snap := &runtime.OperatorSnapshot{OperatorID: "counts"}
	if err := op.SnapshotState(1, snap); err != nil {
		t.Fatal(err)
	}
	if snap.Persist == nil {
		t.Fatal("the snapshot has no Persist: the sink synced on the task's goroutine")
	}
	if h := hiddenNames(t, dir); strings.Contains(h, "pending") || !strings.Contains(h, "inprogress") {
		t.Fatalf("before Persist: hidden files %q, want only the in-progress file", h)
	}
	ts := &runtime.TaskSnapshot{Operators: []*runtime.OperatorSnapshot{snap}}
	if err := ts.Persist(); err != nil {
		t.Fatal(err)
	}
	if h := hiddenNames(t, dir); h != ".part-0-1.pending" {
		t.Fatalf("after Persist: hidden files %q, want .part-0-1.pending", h)
	}
	if err := ts.Persist(); err != nil { // runs once
		t.Fatal(err)
	}
	if err := op.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	expectLines(t, dir, "a1", "a2")
}

// A persist that fails declines its checkpoint and every later one, and
// fails the task: the transaction it lost is in every later checkpoint.
func TestTextSinkPersistFailureFailsTheTask(t *testing.T) {
	dir := t.TempDir()
	op := openTextSink(t, dir)
	if err := op.ProcessElement(0, runtime.Record{Value: "a1"}); err != nil {
		t.Fatal(err)
	}
	s1 := &runtime.OperatorSnapshot{}
	if err := op.SnapshotState(1, s1); err != nil {
		t.Fatal(err)
	}
	if err := op.ProcessElement(0, runtime.Record{Value: "b1"}); err != nil {
		t.Fatal(err)
	}
	s2 := &runtime.OperatorSnapshot{}
	if err := op.SnapshotState(2, s2); err != nil {
		t.Fatal(err)
	}
	// The in-progress file of checkpoint 1 disappears before its persist.
	ents, _ := filepath.Glob(filepath.Join(dir, ".part-0-1.inprogress.*"))
	if len(ents) != 1 {
		t.Fatalf("in-progress files of checkpoint 1: %v", ents)
	}
	if err := os.Remove(ents[0]); err != nil {
		t.Fatal(err)
	}
	err1 := (&runtime.TaskSnapshot{Operators: []*runtime.OperatorSnapshot{s1}}).Persist()
	if err1 == nil || !strings.Contains(err1.Error(), `sink "Counts"`) {
		t.Fatalf("persist of checkpoint 1: %v, want an error naming the sink", err1)
	}
	if err := (&runtime.TaskSnapshot{Operators: []*runtime.OperatorSnapshot{s2}}).Persist(); err == nil {
		t.Fatal("checkpoint 2 persisted after checkpoint 1 failed")
	}
	if err := op.ProcessElement(0, runtime.Record{Value: "c1"}); err == nil {
		t.Fatal("the sink wrote on after a lost transaction")
	}
	if err := op.SnapshotState(3, &runtime.OperatorSnapshot{}); err == nil {
		t.Fatal("checkpoint 3 taken after a lost transaction")
	}
}

// A snapshot that is never written is released: its persist still runs,
// so its file is closed, and a later checkpoint commits it.
func TestTextSinkReleasedSnapshotStillPersists(t *testing.T) {
	dir := t.TempDir()
	op := openTextSink(t, dir)
	if err := op.ProcessElement(0, runtime.Record{Value: "a1"}); err != nil {
		t.Fatal(err)
	}
	s1 := &runtime.OperatorSnapshot{}
	if err := op.SnapshotState(1, s1); err != nil {
		t.Fatal(err)
	}
	(&runtime.TaskSnapshot{Operators: []*runtime.OperatorSnapshot{s1}}).Release()
	if err := op.ProcessElement(0, runtime.Record{Value: "b1"}); err != nil {
		t.Fatal(err)
	}
	s2 := &runtime.OperatorSnapshot{}
	if err := op.SnapshotState(2, s2); err != nil {
		t.Fatal(err)
	}
	if err := s2.Materialize(); err != nil {
		t.Fatal(err)
	}
	if err := op.NotifyCheckpointComplete(2); err != nil {
		t.Fatal(err)
	}
	expectLines(t, dir, "a1", "b1")
}
