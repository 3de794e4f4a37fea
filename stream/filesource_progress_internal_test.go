package stream

import (
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
