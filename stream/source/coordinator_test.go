package source

import (
	"errors"
	"slices"
	"sort"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type numSplit struct{ N int }

func (s numSplit) SplitID() string { return string(rune('a' + s.N)) }

// lazyEnum hands out one split per request, as a file enumerator does.
type lazyEnum struct {
	ctx       SplitEnumeratorContext[numSplit]
	remaining []numSplit
	added     []int
	completed int64
}

func (e *lazyEnum) Start() error { return nil }
func (e *lazyEnum) HandleSplitRequest(sub int, _ string) {
	if len(e.remaining) == 0 {
		e.ctx.SignalNoMoreSplits(sub)
		return
	}
	s := e.remaining[0]
	e.remaining = e.remaining[1:]
	e.ctx.AssignSplits(map[int][]numSplit{sub: {s}})
}
func (e *lazyEnum) AddSplitsBack(s []numSplit, _ int) { e.remaining = append(e.remaining, s...) }
func (e *lazyEnum) AddReader(sub int)                 { e.added = append(e.added, sub) }
func (e *lazyEnum) HandleSourceEvent(int, []byte)     {}
func (e *lazyEnum) SnapshotState(int64) ([]numSplit, error) {
	return slices.Clone(e.remaining), nil
}
func (e *lazyEnum) NotifyCheckpointComplete(id int64) error { e.completed = id; return nil }
func (e *lazyEnum) Close() error                            { return nil }

type lazySource struct {
	n    int
	last *lazyEnum
}

func (s *lazySource) Boundedness() Boundedness { return Bounded }
func (s *lazySource) CreateEnumerator(ctx SplitEnumeratorContext[numSplit]) (SplitEnumerator[numSplit, []numSplit], error) {
	e := &lazyEnum{ctx: ctx}
	for i := range s.n {
		e.remaining = append(e.remaining, numSplit{i})
	}
	s.last = e
	return e, nil
}
func (s *lazySource) RestoreEnumerator(ctx SplitEnumeratorContext[numSplit], cp []numSplit) (SplitEnumerator[numSplit, []numSplit], error) {
	s.last = &lazyEnum{ctx: ctx, remaining: cp}
	return s.last, nil
}
func (s *lazySource) CreateReader(ReaderContext) (SourceReader[int, numSplit], error) {
	return nil, errors.New("not used")
}

// recGateway records what each reader was sent.
type recGateway struct {
	got   map[int][]numSplit
	nomor map[int]bool
	kinds map[int][]EventKind
	t     *testing.T
	c     *Coordinator[int, numSplit, []numSplit]
}

func (g *recGateway) Send(sub int, ev Event) {
	g.kinds[sub] = append(g.kinds[sub], ev.Kind)
	switch ev.Kind {
	case AddSplits:
		s, err := DecodeSplits(g.c.SplitCodec(), ev.Splits)
		if err != nil {
			g.t.Fatal(err)
		}
		g.got[sub] = append(g.got[sub], s...)
	case NoMoreSplits:
		g.nomor[sub] = true
	}
}

// chanExec runs posted functions when the test drains it.
type chanExec chan func()

func (e chanExec) Post(fn func()) { e <- fn }

func newTestCoordinator(t *testing.T, n, par int) (*Coordinator[int, numSplit, []numSplit], *recGateway, *lazySource) {
	src := &lazySource{n: n}
	gw := &recGateway{got: map[int][]numSplit{}, nomor: map[int]bool{}, kinds: map[int][]EventKind{}, t: t}
	c, err := NewCoordinator[int](src, par, gw, make(chanExec, 16))
	if err != nil {
		t.Fatal(err)
	}
	gw.c = c
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, gw, src
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A fast reader that asks three times as often takes three times as many
// splits; every split is handed out exactly once.
func TestCoordinatorFastReaderTakesMore(t *testing.T) {
	c, gw, src := newTestCoordinator(t, 40, 2)
	must(t, c.HandleEventFromOperator(0, Event{Kind: ReaderRegistration, Host: "a"}))
	must(t, c.HandleEventFromOperator(1, Event{Kind: ReaderRegistration, Host: "b"}))
	if !slices.Equal(src.last.added, []int{0, 1}) {
		t.Fatalf("AddReader calls %v, want [0 1]", src.last.added)
	}
	for i := 0; len(gw.got[0])+len(gw.got[1]) < 40; i++ {
		must(t, c.HandleEventFromOperator(0, Event{Kind: SplitRequest}))
		if i%3 == 2 {
			must(t, c.HandleEventFromOperator(1, Event{Kind: SplitRequest}))
		}
	}
	must(t, c.HandleEventFromOperator(1, Event{Kind: SplitRequest}))
	if len(gw.got[0]) != 30 || len(gw.got[1]) != 10 || !gw.nomor[1] {
		t.Fatalf("fast reader got %d splits, slow %d (no-more %v); want 30, 10, true", len(gw.got[0]), len(gw.got[1]), gw.nomor[1])
	}
	var all []int
	for _, s := range append(gw.got[0], gw.got[1]...) {
		all = append(all, s.N)
	}
	sort.Ints(all)
	for i, n := range all {
		if n != i {
			t.Fatalf("splits handed out %v, want each of 0..39 once", all)
		}
	}
}

// A reader that fails gets back nothing it held at the checkpoint it
// restores (its state has those), and its splits assigned after that
// checkpoint go back to the pool, to be read exactly once by someone.
func TestCoordinatorResetReturnsUncheckpointedSplits(t *testing.T) {
	c, gw, src := newTestCoordinator(t, 5, 2)
	must(t, c.HandleEventFromOperator(0, Event{Kind: ReaderRegistration}))
	must(t, c.HandleEventFromOperator(1, Event{Kind: ReaderRegistration}))
	must(t, c.HandleEventFromOperator(0, Event{Kind: SplitRequest})) // split 0 to reader 0
	if _, err := c.CheckpointCoordinator(1); err != nil {
		t.Fatal(err)
	}
	must(t, c.HandleEventFromOperator(0, Event{Kind: SplitRequest})) // split 1, after checkpoint 1
	if _, err := c.CheckpointCoordinator(2); err != nil {
		t.Fatal(err)
	}
	must(t, c.HandleEventFromOperator(0, Event{Kind: SplitRequest})) // split 2, uncheckpointed
	c.SubtaskReset(0, 1)
	// Splits 1 and 2 are back; 3 and 4 were never assigned.
	got := slices.Clone(src.last.remaining)
	sort.Slice(got, func(i, j int) bool { return got[i].N < got[j].N })
	if want := []numSplit{{1}, {2}, {3}, {4}}; !slices.Equal(got, want) {
		t.Fatalf("pool after reset %v, want %v", got, want)
	}
	if _, ok := c.RegisteredReaders()[0]; ok {
		t.Fatal("reader 0 still registered after its reset")
	}
	// While 0 is away, reader 1 drains the pool.
	for range 5 {
		must(t, c.HandleEventFromOperator(1, Event{Kind: SplitRequest}))
	}
	if len(gw.got[1]) != 4 || !gw.nomor[1] {
		t.Fatalf("reader 1 got %v (no-more %v), want the 4 pooled splits", gw.got[1], gw.nomor[1])
	}
}

// Assignments to a reader that has not registered wait for it, and are
// part of the coordinator's checkpoint; a global reset restores the
// enumerator from it.
func TestCoordinatorPendingAssignmentsAndReset(t *testing.T) {
	c, gw, src := newTestCoordinator(t, 3, 2)
	c.AssignSplits(map[int][]numSplit{1: {{7}}})
	if len(gw.got[1]) != 0 {
		t.Fatal("split sent to an unregistered reader")
	}
	must(t, c.HandleEventFromOperator(0, Event{Kind: ReaderRegistration}))
	must(t, c.HandleEventFromOperator(0, Event{Kind: SplitRequest}))
	state, err := c.CheckpointCoordinator(3)
	must(t, err)
	c.NotifyCheckpointComplete(3)
	if src.last.completed != 3 {
		t.Fatalf("enumerator told of checkpoint %d, want 3", src.last.completed)
	}
	must(t, c.ResetToCheckpoint(3, state))
	if got := src.last.remaining; !slices.Equal(got, []numSplit{{1}, {2}}) {
		t.Fatalf("restored pool %v, want [{1} {2}]", got)
	}
	must(t, c.HandleEventFromOperator(1, Event{Kind: ReaderRegistration}))
	if !slices.Equal(gw.got[1], []numSplit{{7}}) {
		t.Fatalf("reader 1 got %v on registration, want the pending [{7}]", gw.got[1])
	}
	if err := c.HandleEventFromOperator(2, Event{Kind: SplitRequest}); !errors.Is(err, ErrUnknownReader) {
		t.Fatalf("event of subtask 2 of 2: %v, want ErrUnknownReader", err)
	}
}

// A push-style bounded enumerator (Kafka's) assigns every split and
// signals that no more follow before a reader registered: the reader gets
// its splits first and then the signal, not the signal alone (with which
// it would end and its splits' records be lost). Signals repeat only
// after a reader's reset.
func TestCoordinatorNoMoreSplitsWaitsForPendingSplits(t *testing.T) {
	c, gw, _ := newTestCoordinator(t, 0, 2)
	must(t, c.HandleEventFromOperator(0, Event{Kind: ReaderRegistration}))
	c.AssignSplits(map[int][]numSplit{0: {{0}}, 1: {{1}}})
	c.SignalNoMoreSplits(0)
	c.SignalNoMoreSplits(1)
	c.SignalNoMoreSplits(0) // a repeat is dropped
	if want := []EventKind{AddSplits, NoMoreSplits}; !slices.Equal(gw.kinds[0], want) {
		t.Fatalf("registered reader 0 was sent %v, want %v", gw.kinds[0], want)
	}
	if len(gw.kinds[1]) != 0 {
		t.Fatalf("unregistered reader 1 was sent %v", gw.kinds[1])
	}
	must(t, c.HandleEventFromOperator(1, Event{Kind: ReaderRegistration}))
	if want := []EventKind{AddSplits, NoMoreSplits}; !slices.Equal(gw.kinds[1], want) || !slices.Equal(gw.got[1], []numSplit{{1}}) {
		t.Fatalf("reader 1 was sent %v with splits %v on registration, want %v with [{1}]", gw.kinds[1], gw.got[1], want)
	}
	// After its reset the reader is told again when the enumerator says so.
	c.SubtaskReset(1, 0)
	c.AssignSplits(map[int][]numSplit{1: {{1}}})
	must(t, c.HandleEventFromOperator(1, Event{Kind: ReaderRegistration}))
	c.SignalNoMoreSplits(1)
	if want := []EventKind{AddSplits, NoMoreSplits, AddSplits, NoMoreSplits}; !slices.Equal(gw.kinds[1], want) {
		t.Fatalf("reader 1 was sent %v across its reset, want %v", gw.kinds[1], want)
	}
}

// Periodic async calls deliver their results through the executor, in
// order, and stop with Close.
func TestCoordinatorCallAsync(t *testing.T) {
	c, _, _ := newTestCoordinator(t, 0, 1)
	exec := c.exec.(chanExec)
	n := 0
	got := make(chan int, 10)
	c.CallAsync(func() (any, error) { n++; return n, nil }, func(v any, err error) { got <- v.(int) }, 0, time.Millisecond)
	for want := 1; want <= 3; want++ {
		select {
		case fn := <-exec:
			fn()
		case <-time.After(30 * time.Second):
			t.Fatal("no async result")
		}
		if v := <-got; v != want {
			t.Fatalf("result %d, want %d", v, want)
		}
	}
	must(t, c.Close())
	if err := c.HandleEventFromOperator(0, Event{Kind: SplitRequest}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
}
