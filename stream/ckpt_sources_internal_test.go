package stream

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/gofl/gofl/stream/runtime"
)

type sliceOutput struct{ vals []any }

func (o *sliceOutput) Collect(r runtime.Record) { o.vals = append(o.vals, r.Value) }
func (o *sliceOutput) EmitWatermark(int64)      {}

// runSources opens par subtasks of a source (restored when restores is not
// nil), polls each at most polls times (all the way with polls < 0), and
// snapshots them when snapshot is set.
func runSources(t *testing.T, newSrc func() runtime.Source, par int, restores []*runtime.OperatorRestore, polls int, snapshot bool) ([]any, []*runtime.OperatorSnapshot) {
	t.Helper()
	out := &sliceOutput{}
	var snaps []*runtime.OperatorSnapshot
	for i := 0; i < par; i++ {
		ctx := &runtime.Context{OperatorName: "src", SubtaskIndex: i, Parallelism: par, MaxParallelism: 128, Checkpointing: true}
		if restores != nil {
			ctx.Restore = restores[i]
		}
		src := newSrc()
		if err := src.Open(ctx); err != nil {
			t.Fatal(err)
		}
		for n := 0; polls < 0 || n < polls; n++ {
			st, _, err := src.Poll(out)
			if err != nil {
				t.Fatal(err)
			}
			if st == runtime.EndOfInput {
				break
			}
			if polls < 0 && n > 100000 {
				t.Fatal("source does not end")
			}
		}
		if snapshot {
			snap := &runtime.OperatorSnapshot{}
			if err := src.(runtime.CheckpointedOperator).SnapshotState(1, snap); err != nil {
				t.Fatal(err)
			}
			snaps = append(snaps, snap)
		}
		if err := src.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out.vals, snaps
}

func sortedStrings(vs []any) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmt.Sprint(v)
	}
	sort.Strings(out)
	return out
}

// checkSourceRestore reads part of a bounded source at p1, restores at p2
// and reads the rest: exactly the records of an uninterrupted run.
func checkSourceRestore(t *testing.T, newSrc func() runtime.Source, p1, p2 int) {
	t.Helper()
	want, _ := runSources(t, newSrc, 1, nil, -1, false)
	first, snaps := runSources(t, newSrc, p1, nil, 1, true)
	second, _ := runSources(t, newSrc, p2, redistribute(snaps, p2, 128), -1, false)
	if len(first) == 0 || len(second) == 0 {
		t.Fatalf("the checkpoint is not in the middle: %d then %d records", len(first), len(second))
	}
	got := sortedStrings(append(first, second...))
	if w := sortedStrings(want); strings.Join(got, ",") != strings.Join(w, ",") {
		t.Fatalf("p%d -> p%d: got %d records, want %d (duplicates or gaps)", p1, p2, len(got), len(w))
	}
}

var sourceRescales = [][2]int{{1, 1}, {4, 2}, {4, 6}, {2, 1}}

func TestCheckpointCollectionSource(t *testing.T) {
	env := NewEnvironment()
	items := make([]int, 3000)
	for i := range items {
		items[i] = i
	}
	src := FromCollection(env, items).n.newSource
	for _, p := range sourceRescales {
		checkSourceRestore(t, src, p[0], p[1])
	}
	// At parallelism 1 the order is kept across a restore.
	first, snaps := runSources(t, src, 1, nil, 2, true)
	second, _ := runSources(t, src, 1, redistribute(snaps, 1, 128), -1, false)
	for i, v := range append(first, second...) {
		if v != i {
			t.Fatalf("record %d is %v", i, v)
		}
	}
}

func TestCheckpointBoundedGenerator(t *testing.T) {
	env := NewEnvironment()
	src := Generate(env, 5000, func(i int64) int64 { return i }).n.newSource
	for _, p := range sourceRescales {
		checkSourceRestore(t, src, p[0], p[1])
	}
}

// An unbounded generator resumes every index sequence exactly: per
// original subtask the indexes emitted are a gapless prefix of its
// sequence, with no duplicates.
func TestCheckpointUnboundedGenerator(t *testing.T) {
	env := NewEnvironment()
	src := Generate(env, -1, func(i int64) int64 { return i }).n.newSource
	for _, p := range sourceRescales {
		p1, p2 := p[0], p[1]
		first, snaps := runSources(t, src, p1, nil, 3, true)
		second, snaps2 := runSources(t, src, p2, redistribute(snaps, p2, 128), 5, true)
		third, _ := runSources(t, src, p1, redistribute(snaps2, p1, 128), 2, false)
		seen := map[int64]bool{}
		count := make([]int64, p1)
		for _, v := range append(append(first, second...), third...) {
			i := v.(int64)
			if seen[i] {
				t.Fatalf("p%d -> p%d: index %d emitted twice", p1, p2, i)
			}
			seen[i] = true
			count[i%int64(p1)]++
		}
		for r := int64(0); r < int64(p1); r++ {
			for j := int64(0); j < count[r]; j++ {
				if !seen[r+j*int64(p1)] {
					t.Fatalf("p%d -> p%d: index %d missing", p1, p2, r+j*int64(p1))
				}
			}
		}
		if len(seen) < (3*p1+2*p1)*pollBatch {
			t.Fatalf("only %d records", len(seen))
		}
	}
}

// TextFile's checkpoint is its enumerator's pool and each reader's
// splits (the current one from its next line): a restore at another
// parallelism reads exactly the lines an uninterrupted run reads.
func TestCheckpointTextFileSource(t *testing.T) {
	dir := t.TempDir()
	for f := 0; f < 2; f++ {
		var b strings.Builder
		for i := 0; i < 1500; i++ {
			fmt.Fprintf(&b, "f%d line %d %s\n", f, i, strings.Repeat("x", i%13))
		}
		b.WriteString("no newline at the end")
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("in-%d.txt", f)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src := &TextFileSource{Path: dir, SplitSize: 8 << 10, untimed: true}
	want := newFileWorld(t, src, 1, nil, nil).readAll(t, -1)
	if len(want) != 3002 {
		t.Fatalf("an uninterrupted run read %d lines, want 3002", len(want))
	}
	for _, p := range sourceRescales {
		p1, p2 := p[0], p[1]
		w := newFileWorld(t, src, p1, nil, nil)
		first := w.readAll(t, 2) // the first poll asks for a split
		enumState, readerStates := w.snapshot(t)
		w.close()
		second := newFileWorld(t, src, p2, &enumState, readerStates).readAll(t, -1)
		if len(first) == 0 || len(second) == 0 {
			t.Fatalf("the checkpoint is not in the middle: %d then %d lines", len(first), len(second))
		}
		got := slices.Sorted(slices.Values(append(first, second...)))
		if w := slices.Sorted(slices.Values(want)); !slices.Equal(got, w) {
			t.Fatalf("p%d -> p%d: got %d lines, want %d (duplicates or gaps)", p1, p2, len(got), len(w))
		}
	}
}
