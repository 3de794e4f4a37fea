package stream

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofl/gofl/stream/runtime"
	"github.com/gofl/gofl/stream/source"
)

// writeLines writes n numbered lines of varying length into dir/name.
func writeLines(t *testing.T, dir, name string, from, n int) {
	t.Helper()
	var b strings.Builder
	for i := from; i < from+n; i++ {
		fmt.Fprintf(&b, "%d%s\n", i, strings.Repeat("x", i%17))
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkLines fails unless got holds each line number 0..n-1 exactly once.
func checkLines(t *testing.T, got []string, n int) {
	t.Helper()
	nums := make([]int, 0, len(got))
	for _, l := range got {
		v, err := strconv.Atoi(strings.TrimRight(l, "x"))
		if err != nil || l != fmt.Sprintf("%d%s", v, strings.Repeat("x", v%17)) {
			t.Fatalf("line %q is not one of the input's", l)
		}
		nums = append(nums, v)
	}
	sort.Ints(nums)
	if len(nums) != n {
		t.Fatalf("read %d lines, want %d", len(nums), n)
	}
	for i, v := range nums {
		if v != i {
			t.Fatalf("line %d is %d: lost or read twice", i, v)
		}
	}
}

// The enumerator runs once for the job (the local executor's stand-in for
// the JobMaster) and hands splits out on request: every line of a
// directory is read exactly once, lines crossing split boundaries too, and
// a reader slowed down to 2 ms a line reads far fewer lines than the fast
// one, which took the splits it did not get to.
func TestTextFileSourceFastReadersTakeMoreSplits(t *testing.T) {
	dir := t.TempDir()
	writeLines(t, dir, "a.txt", 0, 3000)
	writeLines(t, dir, "b.txt", 3000, 3000)
	writeLines(t, dir, "_skipped", 6000, 10)
	var lines [2]atomic.Int64
	src := &TextFileSource{Path: dir, SplitSize: 1 << 10, pace: func(sub int) {
		lines[sub].Add(1)
		if sub == 0 {
			time.Sleep(2 * time.Millisecond)
		}
	}}
	env := NewEnvironment(WithParallelism(2))
	FromSource[string](env, src, SourceWatermarks{NoWatermarks: true}, "files").Collect().Uid("out")
	g, err := env.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if op := g.Graph.Vertices[0].Operators[0]; op.Coordinator != textFileCoordinator || len(op.CoordinatorConfig) == 0 {
		t.Fatalf("the source names coordinator %q with config %q", op.Coordinator, op.CoordinatorConfig)
	}
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := CollectedValues[string](env, "out")
	if err != nil {
		t.Fatal(err)
	}
	checkLines(t, got, 6000)
	slow, fast := lines[0].Load(), lines[1].Load()
	t.Logf("slow reader: %d lines, fast reader: %d lines", slow, fast)
	if fast < 4*slow {
		t.Errorf("the fast reader read %d lines, the slow one %d: want the fast one to take most splits", fast, slow)
	}
}

// A reader restored from a checkpoint resumes its split at the recorded
// line start (Exact), and a split that starts inside a line skips it.
func TestFileSplitBoundaries(t *testing.T) {
	dir := t.TempDir()
	writeLines(t, dir, "a.txt", 0, 500)
	splits, err := listFileSplits(context.Background(), filepath.Join(dir, "a.txt"), 100)
	if err != nil {
		t.Fatal(err)
	}
	src := &TextFileSource{Path: dir}
	var got []string
	for _, sp := range splits {
		r := &fileReader{src: src, ctx: nopReaderContext{}, queue: []FileSplit{sp}, noMore: true}
		if err := r.Start(); err != nil {
			t.Fatal(err)
		}
		out := &lineOutput{}
		for {
			st, _, err := r.PollNext(out)
			if err != nil {
				t.Fatal(err)
			}
			if st != source.MoreAvailable {
				break
			}
		}
		_ = r.Close()
		got = append(got, out.lines...)
	}
	checkLines(t, got, 500)
}

type lineOutput struct{ lines []string }

// nopReaderContext drops the reader's events.
type nopReaderContext struct{}

func (nopReaderContext) SubtaskIndex() int      { return 0 }
func (nopReaderContext) Parallelism() int       { return 1 }
func (nopReaderContext) Host() string           { return "" }
func (nopReaderContext) SendSplitRequest()      {}
func (nopReaderContext) SendSourceEvent([]byte) {}

// fileWorld runs a TextFileSource's enumerator and p readers by hand, on
// the test's goroutine: the readers' events reach the enumerator at once,
// and its assignments the readers.
type fileWorld struct {
	en      source.SplitEnumerator[FileSplit, fileEnumState]
	readers []*fileReader
	ended   []bool
}

type fileWorldReader struct {
	w   *fileWorld
	sub int
}

func (c fileWorldReader) SubtaskIndex() int { return c.sub }
func (c fileWorldReader) Parallelism() int  { return len(c.w.readers) }
func (c fileWorldReader) Host() string      { return "" }
func (c fileWorldReader) SendSplitRequest() { c.w.en.HandleSplitRequest(c.sub, "") }
func (c fileWorldReader) SendSourceEvent(ev []byte) {
	c.w.en.HandleSourceEvent(c.sub, ev)
}

func (w *fileWorld) CurrentParallelism() int                      { return len(w.readers) }
func (w *fileWorld) RegisteredReaders() map[int]source.ReaderInfo { return nil }
func (w *fileWorld) AssignSplits(a map[int][]FileSplit) {
	for sub, sps := range a {
		w.readers[sub].AddSplits(sps)
	}
}
func (w *fileWorld) SignalNoMoreSplits(sub int)                 { w.readers[sub].NotifyNoMoreSplits() }
func (w *fileWorld) SendEventToSourceReader(sub int, ev []byte) { w.readers[sub].HandleSourceEvent(ev) }
func (w *fileWorld) CallAsync(call func() (any, error), handler func(any, error), _, _ time.Duration) {
	handler(call())
}

// newFileWorld starts the enumerator (restored from enum when not nil)
// and p readers; restored holds old reader j's splits at index j, given
// to reader j mod p.
func newFileWorld(t *testing.T, src *TextFileSource, p int, enum *fileEnumState, restored [][]FileSplit) *fileWorld {
	t.Helper()
	w := &fileWorld{readers: make([]*fileReader, p), ended: make([]bool, p)}
	var err error
	if enum != nil {
		w.en, err = src.RestoreEnumerator(w, *enum)
	} else {
		w.en, err = src.CreateEnumerator(w)
	}
	if err != nil {
		t.Fatal(err)
	}
	for i := range w.readers {
		r, err := src.CreateReader(fileWorldReader{w, i})
		if err != nil {
			t.Fatal(err)
		}
		w.readers[i] = r.(*fileReader)
	}
	for j, sps := range restored {
		w.readers[j%p].AddSplits(sps)
	}
	if err := w.en.Start(); err != nil {
		t.Fatal(err)
	}
	for _, r := range w.readers {
		if err := r.Start(); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// readAll polls each reader up to polls times (until the end, polls < 0)
// and returns the lines read.
func (w *fileWorld) readAll(t *testing.T, polls int) []string {
	t.Helper()
	out := &lineOutput{}
	for i, r := range w.readers {
		for n := 0; !w.ended[i] && (polls < 0 || n < polls); n++ {
			st, _, err := r.PollNext(out)
			if err != nil {
				t.Fatal(err)
			}
			w.ended[i] = st == source.EndOfInput
			if n > 100000 {
				t.Fatal("reader does not end")
			}
		}
	}
	return out.lines
}

func (w *fileWorld) snapshot(t *testing.T) (fileEnumState, [][]FileSplit) {
	t.Helper()
	st, err := w.en.SnapshotState(1)
	if err != nil {
		t.Fatal(err)
	}
	var readers [][]FileSplit
	for _, r := range w.readers {
		sps, err := r.SnapshotState(1)
		if err != nil {
			t.Fatal(err)
		}
		readers = append(readers, sps)
	}
	return st, readers
}

func (w *fileWorld) close() {
	for _, r := range w.readers {
		_ = r.Close()
	}
	_ = w.en.Close()
}

func (o *lineOutput) Collect(v string, _ int64)                  { o.lines = append(o.lines, v) }
func (o *lineOutput) ForSplit(string) source.SplitOutput[string] { return o }
func (o *lineOutput) ReleaseSplit(string)                        {}

// A path that cannot be listed fails the job (every reader that asks gets
// the error), instead of finishing it with no lines.
func TestTextFileSourceListingFailureFailsTheJob(t *testing.T) {
	env := NewEnvironment(WithParallelism(2))
	FromSource[string](env, &TextFileSource{Path: filepath.Join(t.TempDir(), "missing")}, SourceWatermarks{NoWatermarks: true}, "files").Collect()
	_, err := env.Execute(context.Background())
	if err == nil || !strings.Contains(err.Error(), "listing the files") {
		t.Fatalf("Execute: %v; want the listing's failure", err)
	}
}

// A reader is given a split with a replica on its host when there is one
// (LocatableInputSplitAssigner), else one without a preferred host.
func TestLocalSplitPrefersTheReadersHost(t *testing.T) {
	pool := []FileSplit{
		{Path: "a", Hosts: []string{"127.0.0.2", "127.0.0.3"}},
		{Path: "b"},
		{Path: "c", Hosts: []string{"127.0.0.4"}},
	}
	for _, c := range []struct {
		host string
		want string
	}{{"127.0.0.4", "c"}, {"127.0.0.3", "a"}, {"127.0.0.9", "b"}, {"", "b"}} {
		if got := pool[localSplit(pool, c.host)].Path; got != c.want {
			t.Errorf("reader on %q got split %s; want %s", c.host, got, c.want)
		}
	}
	if got := localSplit(pool[2:], "127.0.0.9"); got != 0 {
		t.Errorf("only remote splits: index %d; want the first", got)
	}
}

type recordsOutput struct{ recs []runtime.Record }

func (o *recordsOutput) Collect(r runtime.Record) { o.recs = append(o.recs, r) }
func (o *recordsOutput) EmitWatermark(int64)      {}

// TextFile is the Source API's file source: its operator names the file
// coordinator (the JobMaster's enumerator), and its records, emitted with
// source.NoTimestamp, carry no timestamp and hold no watermark back.
func TestTextFileIsTheFileSource(t *testing.T) {
	dir := t.TempDir()
	writeLines(t, dir, "a.txt", 0, 10)
	env := NewEnvironment()
	TextFile(env, dir).Collect()
	g, err := env.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if op := g.Graph.Vertices[0].Operators[0]; op.Coordinator != textFileCoordinator {
		t.Fatalf("TextFile's operator names coordinator %q, want %q", op.Coordinator, textFileCoordinator)
	}
	rec := &recordsOutput{}
	o := readerOutput[string]{out: rec, now: time.Now, splits: map[string]*splitWatermark{}, last: runtime.MinWatermark}
	o.Collect("line", source.NoTimestamp)
	if len(rec.recs) != 1 || rec.recs[0].HasTimestamp || rec.recs[0].Value != "line" || o.reader.seen {
		t.Fatalf("emitted %+v (reader watermark seen: %v); want one record without timestamp", rec.recs, o.reader.seen)
	}
}
