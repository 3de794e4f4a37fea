package stream

import (
	"cmp"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gofl/gofl/stream/source"
)

// syncEnumContext runs CallAsync at once and records assignments.
type syncEnumContext struct {
	assigned map[int][]FileSplit
	noMore   map[int]bool
}

func (c *syncEnumContext) CurrentParallelism() int                      { return 2 }
func (c *syncEnumContext) RegisteredReaders() map[int]source.ReaderInfo { return nil }
func (c *syncEnumContext) AssignSplits(a map[int][]FileSplit) {
	for sub, sps := range a {
		c.assigned[sub] = append(c.assigned[sub], sps...)
	}
}
func (c *syncEnumContext) SignalNoMoreSplits(sub int)          { c.noMore[sub] = true }
func (c *syncEnumContext) SendEventToSourceReader(int, []byte) {}
func (c *syncEnumContext) CallAsync(call func() (any, error), handler func(any, error), _, _ time.Duration) {
	handler(call())
}

// The file enumerator's progress counts a split finished when its reader
// reports it (not when it asks for the next: a reader asks as soon as it
// starts a split), reaches Total once every split was reported, and
// forgets splits handed back after a reader failed.
func TestFileEnumeratorProgress(t *testing.T) {
	dir := t.TempDir()
	writeLines(t, dir, "a.txt", 0, 400)
	src := &TextFileSource{Path: dir, SplitSize: 1024}
	ctx := &syncEnumContext{assigned: map[int][]FileSplit{}, noMore: map[int]bool{}}
	en, err := src.CreateEnumerator(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pr := en.(source.ProgressReporter)
	if _, ok := pr.Progress(); ok {
		t.Fatal("progress reported before the listing")
	}
	if err := en.Start(); err != nil {
		t.Fatal(err)
	}
	p, ok := pr.Progress()
	if !ok || p.Total < 3 || p.Done != 0 || p.BytesTotal <= 0 {
		t.Fatalf("after the listing: %+v %v; want Total >= 3 (a few splits), Done 0", p, ok)
	}
	finished := func(sub int, sp FileSplit) { en.HandleSourceEvent(sub, []byte(finishedEvent+sp.SplitID())) }
	en.HandleSplitRequest(0, "")
	en.HandleSplitRequest(1, "")
	en.HandleSplitRequest(0, "") // reader 0 prefetches its second split
	if p, _ := pr.Progress(); p.Done != 0 {
		t.Fatalf("splits being read counted finished: %+v", p)
	}
	finished(0, ctx.assigned[0][0])
	finished(0, FileSplit{Path: "elsewhere", Start: 7}) // not handed out: ignored
	p, _ = pr.Progress()
	if p.Done != 1 || p.BytesDone != splitBytes(ctx.assigned[0][0]) {
		t.Fatalf("after one finished split: %+v", p)
	}
	// Reader 1 fails: its split (never finished) and reader 0's two
	// (after the last checkpoint) come back; none counts.
	en.AddSplitsBack(ctx.assigned[1], 1)
	en.AddSplitsBack(ctx.assigned[0], 0)
	if p, _ := pr.Progress(); p.Done != 0 || p.BytesDone != 0 {
		t.Fatalf("splits handed back still counted: %+v", p)
	}
	for len(ctx.noMore) < 2 {
		en.HandleSplitRequest(0, "")
		en.HandleSplitRequest(1, "")
	}
	if p, _ := pr.Progress(); p.Done == p.Total {
		t.Fatalf("all done before the readers reported their splits: %+v", p)
	}
	for sub, sps := range ctx.assigned {
		for _, sp := range sps {
			finished(sub, sp)
		}
	}
	p, _ = pr.Progress()
	if p.Done != p.Total || p.BytesDone != p.BytesTotal {
		t.Fatalf("at the end: %+v, want all done", p)
	}
}

// Readers that prefetch their next split report every split they finish,
// the last ones too: a complete read ends at Done == Total.
func TestFileReadersReportEverySplit(t *testing.T) {
	dir := t.TempDir()
	writeLines(t, dir, "a.txt", 0, 2000)
	w := newFileWorld(t, &TextFileSource{Path: dir, SplitSize: 1024}, 3, nil, nil)
	defer w.close()
	checkLines(t, w.readAll(t, -1), 2000)
	p, ok := w.en.(source.ProgressReporter).Progress()
	if !ok || p.Total < 10 || p.Done != p.Total || p.BytesDone != p.BytesTotal {
		t.Fatalf("progress after reading everything: %+v %v; want Done == Total (>= 10 splits)", p, ok)
	}
}

// The enumerator cuts the last splits into shrinking pieces (tailPiece):
// what it hands out still covers every byte once, the pieces near the end
// are well below the split size (but not below minTailPiece), and a job
// over such pieces reads every line once, the lines the cuts fall into
// too.
func TestFileEnumeratorCutsTheTail(t *testing.T) {
	dir := t.TempDir()
	writeLines(t, dir, "a.txt", 0, 400_000) // ~5 MB
	const splitSize = 4 << 20
	src := &TextFileSource{Path: dir, SplitSize: splitSize}
	ctx := &syncEnumContext{assigned: map[int][]FileSplit{}, noMore: map[int]bool{}}
	en, err := src.CreateEnumerator(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := en.Start(); err != nil {
		t.Fatal(err)
	}
	var order []FileSplit
	for sub := 0; len(ctx.noMore) < 2; sub = 1 - sub {
		n := len(ctx.assigned[sub])
		en.HandleSplitRequest(sub, "")
		if len(ctx.assigned[sub]) > n {
			order = append(order, ctx.assigned[sub][n])
		}
	}
	st, err := os.Stat(filepath.Join(dir, "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	byStart := slices.Clone(order)
	slices.SortFunc(byStart, func(a, b FileSplit) int { return cmp.Compare(a.Start, b.Start) })
	next := int64(0)
	for _, sp := range byStart {
		if sp.Start != next || sp.End <= sp.Start {
			t.Fatalf("split [%d, %d) after %d: the splits do not tile the file", sp.Start, sp.End, next)
		}
		if splitBytes(sp) < minTailPiece {
			t.Errorf("split [%d, %d) is below minTailPiece", sp.Start, sp.End)
		}
		next = sp.End
	}
	if next != st.Size() {
		t.Fatalf("the splits end at %d, the file at %d", next, st.Size())
	}
	last := order[len(order)-2:]
	for _, sp := range last {
		if splitBytes(sp) > splitSize/2 {
			t.Errorf("one of the last two splits handed out has %d bytes; want at most half a split (%d)", splitBytes(sp), splitSize/2)
		}
	}
	if len(order) <= int(st.Size()/splitSize)+1 {
		t.Errorf("%d splits handed out for %d listed: nothing was cut", len(order), st.Size()/splitSize+1)
	}

	env := NewEnvironment(WithParallelism(2))
	FromSource[string](env, &TextFileSource{Path: dir, SplitSize: splitSize}, SourceWatermarks{NoWatermarks: true}, "files").Collect().Uid("out")
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := CollectedValues[string](env, "out")
	if err != nil {
		t.Fatal(err)
	}
	checkLines(t, got, 400_000)
}
