package stream

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/stream/codec"
	"github.com/gofl/gofl/stream/runtime"
	"github.com/gofl/gofl/stream/source"
)

// memSplit is a partition of memSource: values From..To-1, Next the
// position.
type memSplit struct {
	ID       int
	Next, To int
}

func (s memSplit) SplitID() string { return fmt.Sprint(s.ID) }

// memSource has n partitions of size values each, pushed to reader
// id % p as Kafka's enumerator does.
type memSource struct{ n, size int }

func (m memSource) LocalEnumeration()               {}
func (m memSource) Boundedness() source.Boundedness { return source.Bounded }
func (m memSource) CreateEnumerator(ctx source.SplitEnumeratorContext[memSplit]) (source.SplitEnumerator[memSplit, []int], error) {
	return &memEnum{ctx: ctx, src: m}, nil
}
func (m memSource) RestoreEnumerator(ctx source.SplitEnumeratorContext[memSplit], done []int) (source.SplitEnumerator[memSplit, []int], error) {
	return &memEnum{ctx: ctx, src: m, assigned: done}, nil
}
func (m memSource) CreateReader(ctx source.ReaderContext) (source.SourceReader[int, memSplit], error) {
	return &memReader{}, nil
}

type memEnum struct {
	ctx      source.SplitEnumeratorContext[memSplit]
	src      memSource
	assigned []int
}

func (e *memEnum) Start() error                         { return nil }
func (e *memEnum) HandleSplitRequest(int, string)       {}
func (e *memEnum) AddSplitsBack([]memSplit, int)        {}
func (e *memEnum) HandleSourceEvent(int, []byte)        {}
func (e *memEnum) NotifyCheckpointComplete(int64) error { return nil }
func (e *memEnum) Close() error                         { return nil }
func (e *memEnum) SnapshotState(int64) ([]int, error)   { return slices.Clone(e.assigned), nil }
func (e *memEnum) AddReader(sub int) {
	p := e.ctx.CurrentParallelism()
	for id := sub; id < e.src.n; id += p {
		if !slices.Contains(e.assigned, id) {
			e.assigned = append(e.assigned, id)
			e.ctx.AssignSplits(map[int][]memSplit{sub: {{ID: id, Next: id * e.src.size, To: (id + 1) * e.src.size}}})
		}
	}
	e.ctx.SignalNoMoreSplits(sub)
}

type memReader struct {
	splits []memSplit
	noMore bool
}

func (r *memReader) Start() error                         { return nil }
func (r *memReader) AddSplits(s []memSplit)               { r.splits = append(r.splits, s...) }
func (r *memReader) NotifyNoMoreSplits()                  { r.noMore = true }
func (r *memReader) HandleSourceEvent([]byte)             {}
func (r *memReader) NotifyCheckpointComplete(int64) error { return nil }
func (r *memReader) Close() error                         { return nil }
func (r *memReader) SnapshotState(int64) ([]memSplit, error) {
	return slices.Clone(r.splits), nil
}
func (r *memReader) PollNext(out source.ReaderOutput[int]) (source.InputStatus, time.Time, error) {
	if len(r.splits) == 0 {
		if r.noMore {
			return source.EndOfInput, time.Time{}, nil
		}
		return source.NothingAvailable, time.Time{}, nil
	}
	sp := &r.splits[0]
	so := out.ForSplit(sp.SplitID())
	for i := 0; i < 10 && sp.Next < sp.To; i++ {
		so.Collect(sp.Next, int64(sp.Next))
		sp.Next++
	}
	if sp.Next == sp.To {
		out.ReleaseSplit(sp.SplitID())
		r.splits = r.splits[1:]
	}
	return source.MoreAvailable, time.Time{}, nil
}

// Every partition is read by exactly one of the subtasks, each value once.
func TestFromSourceReadsEverySplitOnce(t *testing.T) {
	env := NewEnvironment(WithParallelism(3))
	FromSource[int](env, memSource{n: 7, size: 100}, SourceWatermarks{}, "mem").Collect().Uid("out")
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := CollectedValues[int](env, "out")
	if err != nil {
		t.Fatal(err)
	}
	checkEachOnce(t, got, 700)
}

// checkEachOnce fails unless got holds each of 0..n-1 exactly once.
func checkEachOnce(t *testing.T, got []int, n int) {
	t.Helper()
	sort.Ints(got)
	if len(got) != n {
		t.Fatalf("read %d values, want %d", len(got), n)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("value %d is %d: lost or read twice", i, v)
		}
	}
}

type wmRecorder struct {
	wms []int64
	n   int
}

func (w *wmRecorder) Collect(runtime.Record) { w.n++ }
func (w *wmRecorder) EmitWatermark(wm int64) { w.wms = append(w.wms, wm) }

// The watermark is the minimum over the splits; a split idle for the
// idleness timeout stops holding it back.
func TestReaderOutputPerSplitWatermarksAndIdleness(t *testing.T) {
	now := time.Unix(1000, 0)
	rec := &wmRecorder{}
	o := readerOutput[int]{out: rec, wm: SourceWatermarks{MaxOutOfOrderness: 10 * time.Millisecond, Idleness: time.Second},
		now: func() time.Time { return now }, splits: map[string]*splitWatermark{}, last: runtime.MinWatermark}
	a, b := o.ForSplit("a"), o.ForSplit("b")
	a.Collect(1, 100)
	o.emitWatermark()
	if len(rec.wms) != 0 {
		t.Fatalf("watermark %v while split b has emitted nothing", rec.wms)
	}
	b.Collect(2, 50)
	o.emitWatermark()
	a.Collect(3, 500)
	o.emitWatermark()
	if want := []int64{39}; !slices.Equal(rec.wms, want) {
		t.Fatalf("watermarks %v, want %v (min of the splits, minus 10ms, minus 1)", rec.wms, want)
	}
	now = now.Add(time.Second) // b goes idle; a too, unless it emits
	a.Collect(4, 600)
	o.emitWatermark()
	if want := []int64{39, 589}; !slices.Equal(rec.wms, want) {
		t.Fatalf("watermarks %v, want %v once b is idle", rec.wms, want)
	}
	o.ReleaseSplit("a")
	b.Collect(5, 700) // b is active again
	o.emitWatermark()
	if want := []int64{39, 589, 689}; !slices.Equal(rec.wms, want) {
		t.Fatalf("watermarks %v, want %v", rec.wms, want)
	}
}

// Split positions survive a checkpoint and a restore at another
// parallelism: every value is read exactly once across both runs.
func TestFromSourceRestoresSplitsAtOtherParallelism(t *testing.T) {
	for _, pp := range [][2]int{{3, 2}, {2, 3}} {
		t.Run(fmt.Sprintf("%d-to-%d", pp[0], pp[1]), func(t *testing.T) {
			newSrc := func() runtime.Source {
				return &apiSource[int, memSplit, []int]{src: memSource{n: 7, size: 100}, splitCodec: codec.MustFor[memSplit](), wake: make(chan struct{}, 1)}
			}
			first, snaps := runSources(t, newSrc, pp[0], nil, 12, true)
			if len(first) == 0 || len(first) >= 700 {
				t.Fatalf("the first run read %d of 700 values; want it to stop midway", len(first))
			}
			second, _ := runSources(t, newSrc, pp[1], redistribute(snaps, pp[1], 128), -1, false)
			var got []int
			for _, v := range append(first, second...) {
				got = append(got, v.(int))
			}
			checkEachOnce(t, got, 700)
		})
	}
}

// A source's reader hands its values to a chained FlatMap or Map as they
// are (typedInput), with their timestamps, and a failure of the function
// is the operator's, as with records.
func TestFromSourceHandsValuesToTheChainedOperator(t *testing.T) {
	type stamped struct{ V, Ts int64 }
	env := NewEnvironment(WithParallelism(2))
	src := FromSource[int](env, memSource{n: 4, size: 50}, SourceWatermarks{}, "mem")
	doubled := FlatMap(src, func(v int, out Collector[int]) error { out.Collect(v); out.Collect(v); return nil })
	Process(doubled, func(ctx *ProcessContext, v int, out Collector[stamped]) error {
		ts, ok := ctx.Timestamp()
		if !ok {
			return fmt.Errorf("%d has no timestamp", v)
		}
		out.Collect(stamped{int64(v), ts})
		return nil
	}).Collect().Uid("out")
	Map(FromSource[int](env, memSource{n: 1, size: 10}, SourceWatermarks{}, "mem2"), func(v int) int { return -v }).Collect().Uid("negated")
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := CollectedValues[stamped](env, "out")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, s := range got {
		if s.Ts != s.V {
			t.Fatalf("%d has timestamp %d, want its value", s.V, s.Ts)
		}
		seen[s.V]++
	}
	for v := int64(0); v < 200; v++ {
		if seen[v] != 2 {
			t.Fatalf("%d collected %d times, want 2", v, seen[v])
		}
	}
	neg, err := CollectedValues[int](env, "negated")
	if err != nil {
		t.Fatal(err)
	}
	if sort.Ints(neg); len(neg) != 10 || neg[0] != -9 || neg[9] != 0 {
		t.Fatalf("Map collected %v, want -9..0", neg)
	}

	env = NewEnvironment(WithParallelism(1))
	FlatMap(FromSource[int](env, memSource{n: 1, size: 50}, SourceWatermarks{}, "mem"), func(v int, out Collector[int]) error {
		if v == 20 {
			return fmt.Errorf("no %d", v)
		}
		return nil
	}).Name("Picky").Collect()
	_, err = env.Execute(context.Background())
	var oe *runtime.OperatorError
	if !errors.As(err, &oe) || oe.Operator != "Picky" || !strings.Contains(err.Error(), "no 20") {
		t.Fatalf("error %v, want the failure of %q", err, "Picky")
	}
}

// recordingGateway is an operator's gateway to a coordinator that
// records what the operator sends and answers nothing.
type recordingGateway struct{ sent []source.EventKind }

func (g *recordingGateway) SendEventToCoordinator(payload []byte) {
	ev, _, err := source.EventCodec.Decode(payload)
	if err != nil {
		panic(err)
	}
	g.sent = append(g.sent, ev.Kind)
}

func (g *recordingGateway) ReceiveEvents() ([][]byte, error) { return nil, nil }

// A reader that finds nothing asks its coordinator for a split in the
// same Poll, not the next one: the task then waits (pollAgain, or until
// the answer wakes it), and a request still queued would wait with it.
func TestReaderAsksForASplitBeforeTheTaskWaits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(path, []byte("a b\nc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &apiSource[string, FileSplit, fileEnumState]{src: &TextFileSource{Path: path}, splitCodec: codec.MustFor[FileSplit](),
		coordinated: true, wake: make(chan struct{}, 1)}
	gw := &recordingGateway{}
	if err := s.Open(&runtime.Context{OperatorName: "src", Parallelism: 1, MaxParallelism: 128, OperatorEvents: gw, Output: &collectOutput{}}); err != nil {
		t.Fatal(err)
	}
	st, _, err := s.Poll(&collectOutput{})
	if err != nil || st != runtime.NothingAvailable {
		t.Fatalf("Poll = %v, %v; want NothingAvailable", st, err)
	}
	if want := []source.EventKind{source.ReaderRegistration, source.SplitRequest}; !slices.Equal(gw.sent, want) {
		t.Fatalf("sent %v before the wait, want %v", gw.sent, want)
	}
}
