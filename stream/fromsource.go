package stream

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/gofl/gofl/stream/codec"
	"github.com/gofl/gofl/stream/runtime"
	"github.com/gofl/gofl/stream/source"
)

// SourceWatermarks tells FromSource how to derive watermarks from the
// records' timestamps, per split (Flink's SourceWatermarks
// forBoundedOutOfOrderness(...).withIdleness(...)).
type SourceWatermarks struct {
	// NoWatermarks emits none (processing-time jobs).
	NoWatermarks bool
	// MaxOutOfOrderness is how late a record may be: a split's watermark
	// is its highest timestamp minus this, minus 1 ms.
	MaxOutOfOrderness time.Duration
	// Idleness, when positive, leaves out of the reader's watermark a
	// split that emitted nothing for that long, so a quiet split does not
	// hold back the others.
	Idleness time.Duration
}

// LocallyEnumerable is implemented by sources whose enumerator assigns
// every split by push to a reader that depends only on the split and the
// parallelism (Kafka's partition owner). Until the JobMaster hosts the
// coordinators, FromSource runs such an enumerator in every subtask over
// all p readers and keeps only its own subtask's assignments, which gives
// the same assignment as one central enumerator. Pull-based enumerators
// (lazy file splits) need the JobMaster's coordinator.
type LocallyEnumerable interface {
	LocalEnumeration()
}

// EnumeratorStateMerger is implemented by a LocallyEnumerable source that
// rebuilds its enumerator's state on restore from every old copy of it and
// every reader's restored splits (all subtasks'). Each copy only knows
// which splits its own reader really received, so after a rescale one old
// copy is not enough (Kafka: the assigned partitions are those some
// reader had).
type EnumeratorStateMerger[S source.Split, E any] interface {
	MergeEnumeratorStates(states []E, splits []S) E
}

// FromSource adds a source built on the Source API (package source).
//
// The enumerator of a source.CoordinatedSource runs once per job in the
// JobMaster's operator coordinator (in the local executor, in its
// stand-in); other sources must be LocallyEnumerable.
func FromSource[T any, S source.Split, E any](env *Environment, src source.Source[T, S, E], wm SourceWatermarks, name string) DataStream[T] {
	var coordName string
	var coordConfig []byte
	if cs, ok := src.(source.CoordinatedSource); ok {
		var err error
		if coordName, coordConfig, err = cs.Coordinator(); err != nil {
			env.fail(fmt.Errorf("FromSource %q: %w", name, err))
		} else if _, ok := source.LookupCoordinator(coordName); !ok {
			env.fail(fmt.Errorf("FromSource %q: coordinator %q is not registered (source.RegisterSource)", name, coordName))
		}
	} else if _, ok := src.(LocallyEnumerable); !ok {
		env.fail(fmt.Errorf("FromSource %q: %T neither has a registered coordinator (source.CoordinatedSource) nor assigns splits "+
			"deterministically by push (LocallyEnumerable)", name, src))
	}
	sc, err := codec.For[S]()
	if err != nil {
		env.fail(fmt.Errorf("FromSource %q: split type %s cannot be serialized: %w", name, reflect.TypeFor[S](), err))
	}
	s := addSource[T](env, "source-api", name, src.Boundedness() == source.Bounded, func() runtime.Source {
		return &apiSource[T, S, E]{src: src, wm: wm, splitCodec: sc, coordinated: coordName != "", wake: make(chan struct{}, 1)}
	})
	s.n.coordinator, s.n.coordinatorConfig = coordName, coordConfig
	return s
}

const (
	apiReaderState = "source-reader-splits"
	apiEnumState   = "source-enumerator"
)

// ownedSplit is one element of the reader's UNION list state: every
// subtask sees all splits after a restore and takes those of old subtasks
// whose index modulo the new parallelism is its own.
type ownedSplit struct {
	Owner int
	Split []byte
}

var ownedSplitCodec = codec.MustFor[ownedSplit]()

// apiSource runs a SourceReader and, in local enumeration, its own copy
// of the coordinator, all on the task's goroutine: async enumerator calls
// post their results to a queue the task drains in Poll.
type apiSource[T any, S source.Split, E any] struct {
	src        source.Source[T, S, E]
	wm         SourceWatermarks
	splitCodec codec.Codec[S]

	// coordinated: the enumerator runs in the JobMaster, reached through
	// remote; else coord is this subtask's copy (local enumeration).
	coordinated bool
	remote      runtime.OperatorEventGateway

	ctx    *runtime.Context
	coord  *source.Coordinator[T, S, E]
	reader source.SourceReader[T, S]
	out    readerOutput[T]

	mu     sync.Mutex
	posted []func()
	// wake receives when a callback was posted (Wakeup).
	wake chan struct{}
	// toReader and toCoord are events between the two halves, delivered
	// in order on the task's goroutine.
	toReader []source.Event
	toCoord  []source.Event
}

// Post implements source.Executor.
func (s *apiSource[T, S, E]) Post(fn func()) {
	s.mu.Lock()
	s.posted = append(s.posted, fn)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Wakeup implements runtime.WakingSource: the coordinator's events (from
// the JobMaster, or the local enumerator's posted results) end the task's
// wait after NothingAvailable, so a reader starts on its first split as
// soon as it arrives, not at the next poll.
func (s *apiSource[T, S, E]) Wakeup() <-chan struct{} {
	if a, ok := s.remote.(interface{ Arrivals() <-chan struct{} }); ok {
		return a.Arrivals()
	}
	return s.wake
}

// Send implements source.Gateway: events for other subtasks are theirs to
// derive, so they are dropped.
func (s *apiSource[T, S, E]) Send(subtask int, ev source.Event) {
	if subtask == s.ctx.SubtaskIndex {
		s.toReader = append(s.toReader, ev)
	}
}

func (s *apiSource[T, S, E]) Open(ctx *runtime.Context) error {
	s.ctx = ctx
	s.out = newReaderOutput[T](ctx.Output, s.wm)
	if s.coordinated {
		return s.openCoordinated(ctx)
	}
	coord, err := source.NewCoordinator(s.src, ctx.Parallelism, s, s)
	if err != nil {
		return err
	}
	s.coord = coord
	var restored []S
	if r := ctx.Restore; r != nil {
		if restored, err = s.restore(r); err != nil {
			return fmt.Errorf("source %q: restoring: %w", ctx.OperatorName, err)
		}
	}
	s.reader, err = s.src.CreateReader(readerContext{s})
	if err != nil {
		return fmt.Errorf("source %q: creating the reader: %w", ctx.OperatorName, err)
	}
	if len(restored) > 0 {
		s.reader.AddSplits(restored)
	}
	if err := s.coord.Start(); err != nil {
		return err
	}
	for i := 0; i < ctx.Parallelism; i++ {
		if i != ctx.SubtaskIndex {
			if err := s.coord.HandleEventFromOperator(i, source.Event{Kind: source.ReaderRegistration}); err != nil {
				return err
			}
		}
	}
	if err := s.reader.Start(); err != nil {
		return err
	}
	s.toCoord = append(s.toCoord, source.Event{Kind: source.ReaderRegistration})
	return s.pump()
}

func (s *apiSource[T, S, E]) restore(r *runtime.OperatorRestore) ([]S, error) {
	var mine, every []S
	for _, b := range r.Lists[apiReaderState] {
		o, _, err := ownedSplitCodec.Decode(b)
		if err != nil {
			return nil, err
		}
		sp, err := source.DecodeSplits(s.splitCodec, [][]byte{o.Split})
		if err != nil {
			return nil, err
		}
		every = append(every, sp...)
		if o.Owner%s.ctx.Parallelism == s.ctx.SubtaskIndex {
			mine = append(mine, sp...)
		}
	}
	// Every subtask stored its copy of the enumerator: merge them when the
	// source can, else take the one of the old subtask this one continues
	// (or the first).
	var state []byte
	var all [][]byte
	for _, b := range r.Lists[apiEnumState] {
		o, _, err := ownedSplitCodec.Decode(b)
		if err != nil {
			return nil, err
		}
		all = append(all, o.Split)
		if state == nil || o.Owner == s.ctx.SubtaskIndex {
			state = o.Split
		}
	}
	if m, ok := s.src.(EnumeratorStateMerger[S, E]); ok && len(all) > 0 {
		merged, err := s.coord.MergeStates(all, func(es []E) E { return m.MergeEnumeratorStates(es, every) })
		if err != nil {
			return nil, err
		}
		state = merged
	}
	if state != nil {
		if err := s.coord.ResetToCheckpoint(0, state); err != nil {
			return nil, err
		}
	}
	return mine, nil
}

// openCoordinated opens a reader whose enumerator runs in the JobMaster:
// it restores its own splits (old subtask j's go to j mod p) and
// registers with the coordinator.
func (s *apiSource[T, S, E]) openCoordinated(ctx *runtime.Context) error {
	if ctx.OperatorEvents == nil {
		return fmt.Errorf("source %q: its enumerator runs in the JobMaster, but this executor has no operator coordinators", ctx.OperatorName)
	}
	s.remote = ctx.OperatorEvents
	var restored []S
	if r := ctx.Restore; r != nil {
		for _, b := range r.Lists[apiReaderState] {
			o, _, err := ownedSplitCodec.Decode(b)
			if err != nil {
				return fmt.Errorf("source %q: restoring: %w", ctx.OperatorName, err)
			}
			if o.Owner%ctx.Parallelism != ctx.SubtaskIndex {
				continue
			}
			sp, err := source.DecodeSplits(s.splitCodec, [][]byte{o.Split})
			if err != nil {
				return fmt.Errorf("source %q: restoring: %w", ctx.OperatorName, err)
			}
			restored = append(restored, sp...)
		}
	}
	var err error
	s.reader, err = s.src.CreateReader(readerContext{s})
	if err != nil {
		return fmt.Errorf("source %q: creating the reader: %w", ctx.OperatorName, err)
	}
	if len(restored) > 0 {
		s.reader.AddSplits(restored)
	}
	// Registration first: the coordinator keeps assignments for a reader
	// until it registered.
	s.toCoord = append(s.toCoord, source.Event{Kind: source.ReaderRegistration})
	if err := s.reader.Start(); err != nil {
		return err
	}
	return s.pump()
}

// pumpRemote sends the reader's events to the JobMaster's coordinator and
// hands the coordinator's events to the reader.
func (s *apiSource[T, S, E]) pumpRemote() error {
	for _, ev := range s.toCoord {
		s.remote.SendEventToCoordinator(source.EventCodec.Append(nil, ev))
	}
	s.toCoord = s.toCoord[:0]
	in, err := s.remote.ReceiveEvents()
	if err != nil {
		return fmt.Errorf("source %q: %w", s.ctx.OperatorName, err)
	}
	for _, b := range in {
		ev, _, err := source.EventCodec.Decode(b)
		if err != nil {
			return fmt.Errorf("source %q: decoding an operator event: %w", s.ctx.OperatorName, err)
		}
		s.toReader = append(s.toReader, ev)
	}
	return s.deliverToReader()
}

// pump runs posted callbacks and delivers queued events until none are
// left.
func (s *apiSource[T, S, E]) pump() error {
	if s.remote != nil {
		return s.pumpRemote()
	}
	for {
		s.mu.Lock()
		posted := s.posted
		s.posted = nil
		s.mu.Unlock()
		if len(posted) == 0 && len(s.toReader) == 0 && len(s.toCoord) == 0 {
			return nil
		}
		for _, fn := range posted {
			fn()
		}
		for len(s.toCoord) > 0 {
			ev := s.toCoord[0]
			s.toCoord = s.toCoord[1:]
			if err := s.coord.HandleEventFromOperator(s.ctx.SubtaskIndex, ev); err != nil {
				return err
			}
		}
		if err := s.deliverToReader(); err != nil {
			return err
		}
	}
}

// deliverToReader hands the queued coordinator events to the reader.
func (s *apiSource[T, S, E]) deliverToReader() error {
	for len(s.toReader) > 0 {
		ev := s.toReader[0]
		s.toReader = s.toReader[1:]
		switch ev.Kind {
		case source.AddSplits:
			splits, err := source.DecodeSplits(s.splitCodec, ev.Splits)
			if err != nil {
				return err
			}
			s.reader.AddSplits(splits)
		case source.NoMoreSplits:
			s.reader.NotifyNoMoreSplits()
		case source.CustomEvent:
			s.reader.HandleSourceEvent(ev.Payload)
		}
	}
	return nil
}

// pollAgain bounds the wait of NothingAvailable: the coordinator's events
// wake the task (Wakeup), but a reader may wait for data of its own that
// nothing signals.
const pollAgain = 20 * time.Millisecond

func (s *apiSource[T, S, E]) Poll(out runtime.Output) (runtime.PollStatus, time.Time, error) {
	if err := s.pump(); err != nil {
		return 0, time.Time{}, err
	}
	s.out.out = out
	st, at, err := s.reader.PollNext(&s.out)
	if err != nil {
		return 0, time.Time{}, err
	}
	s.out.emitWatermark()
	switch st {
	case source.MoreAvailable:
		return runtime.MoreAvailable, time.Time{}, nil
	case source.EndOfInput:
		// The reader's last events (e.g. that it finished its last split)
		// still go out: there is no next Poll.
		if err := s.pump(); err != nil {
			return 0, time.Time{}, err
		}
		return runtime.EndOfInput, time.Time{}, nil
	}
	// What the reader asked for while it found nothing (its next split)
	// goes out now, not at the next Poll.
	if err := s.pump(); err != nil {
		return 0, time.Time{}, err
	}
	if limit := time.Now().Add(pollAgain); at.IsZero() || at.After(limit) {
		at = limit
	}
	return runtime.NothingAvailable, at, nil
}

// SnapshotState stores the reader's splits and the enumerator.
func (s *apiSource[T, S, E]) SnapshotState(id int64, snap *runtime.OperatorSnapshot) error {
	// Splits that arrived before the trigger belong to this checkpoint:
	// the coordinator counted them in before it triggered.
	if err := s.pump(); err != nil {
		return err
	}
	splits, err := s.reader.SnapshotState(id)
	if err != nil {
		return err
	}
	els := make([][]byte, len(splits))
	for i, sp := range splits {
		els[i] = ownedSplitCodec.Append(nil, ownedSplit{Owner: s.ctx.SubtaskIndex, Split: s.splitCodec.Append(nil, sp)})
	}
	snap.PutList(apiReaderState, runtime.UnionList, "SourceSplits<"+reflect.TypeFor[S]().String()+">", els)
	if s.coord == nil {
		return nil // the JobMaster checkpoints the enumerator
	}
	es, err := s.coord.CheckpointCoordinator(id)
	if err != nil {
		return err
	}
	snap.PutList(apiEnumState, runtime.UnionList, "SourceEnumerator<"+reflect.TypeFor[E]().String()+">",
		[][]byte{ownedSplitCodec.Append(nil, ownedSplit{Owner: s.ctx.SubtaskIndex, Split: es})})
	return nil
}

// NotifyCheckpointComplete tells the enumerator, then the reader.
func (s *apiSource[T, S, E]) NotifyCheckpointComplete(id int64) error {
	if s.coord != nil {
		s.coord.NotifyCheckpointComplete(id)
	}
	return s.reader.NotifyCheckpointComplete(id)
}

// NotifyCheckpointAborted does nothing.
func (s *apiSource[T, S, E]) NotifyCheckpointAborted(int64) error { return nil }

func (s *apiSource[T, S, E]) Close() error {
	var err error
	if s.reader != nil {
		err = s.reader.Close()
	}
	if s.coord != nil {
		err = errors.Join(err, s.coord.Close())
	}
	return err
}

// readerContext is the reader's ReaderContext: its events queue for the
// coordinator, delivered at the next Poll.
type readerContext struct{ s sourceHost }

type sourceHost interface {
	subtask() (int, int)
	queue(ev source.Event)
}

func (s *apiSource[T, S, E]) subtask() (int, int)   { return s.ctx.SubtaskIndex, s.ctx.Parallelism }
func (s *apiSource[T, S, E]) queue(ev source.Event) { s.toCoord = append(s.toCoord, ev) }
func (c readerContext) SubtaskIndex() int           { i, _ := c.s.subtask(); return i }
func (c readerContext) Parallelism() int            { _, p := c.s.subtask(); return p }
func (c readerContext) Host() string                { return "" }
func (c readerContext) SendSplitRequest()           { c.s.queue(source.Event{Kind: source.SplitRequest}) }
func (c readerContext) SendSourceEvent(event []byte) {
	c.s.queue(source.Event{Kind: source.CustomEvent, Payload: event})
}

// splitWatermark is one split's watermark generator.
type splitWatermark struct {
	maxTs    int64
	seen     bool
	lastEmit time.Time
}

// readerOutput derives per-split watermarks and emits their minimum over
// the active splits when it rises.
type readerOutput[T any] struct {
	out    runtime.Output
	wm     SourceWatermarks
	now    func() time.Time
	splits map[string]*splitWatermark
	// reader is the reader-wide generator for records outside splits.
	reader splitWatermark
	last   int64
	// box boxes the values, many per allocation (a source emits every
	// record of the job: one allocation each would show).
	box boxer[T]
	// next is the chained operator out is when it takes T values (typed
	// is it as one): values go to it without a record or boxing.
	next  *runtime.ChainedOperator
	typed typedInput[T]
}

func newReaderOutput[T any](out runtime.Output, wm SourceWatermarks) readerOutput[T] {
	o := readerOutput[T]{out: out, wm: wm, now: time.Now, splits: map[string]*splitWatermark{}, last: runtime.MinWatermark}
	if next := runtime.ChainedOperatorOf(out); next != nil {
		if typed, ok := next.Operator.(typedInput[T]); ok {
			o.next, o.typed = next, typed
		}
	}
	return o
}

func (o *readerOutput[T]) Collect(v T, ts int64) { o.collect(&o.reader, v, ts) }

func (o *readerOutput[T]) collect(g *splitWatermark, v T, ts int64) {
	timed := ts != source.NoTimestamp
	switch {
	case o.typed != nil:
		d, rts := o.next, ts
		if !timed {
			rts = 0 // a record's, without a timestamp
		}
		prev := *d.Running
		*d.Running = d.Self
		if err := o.typed.processValue(v, rts, timed); err != nil {
			d.Fail(err)
		}
		*d.Running = prev
	case !timed:
		o.out.Collect(runtime.Record{Value: o.box.of(v)})
	default:
		o.out.Collect(runtime.Record{Value: o.box.of(v), Timestamp: ts, HasTimestamp: true})
	}
	if !timed {
		return
	}
	if !g.seen || ts > g.maxTs {
		g.maxTs, g.seen = ts, true
	}
	if o.wm.Idleness > 0 { // the clock only matters for idleness
		g.lastEmit = o.now()
	}
}

func (o *readerOutput[T]) ForSplit(id string) source.SplitOutput[T] {
	g := o.splits[id]
	if g == nil {
		g = &splitWatermark{lastEmit: o.now()}
		o.splits[id] = g
	}
	return splitOutput[T]{o: o, g: g}
}

func (o *readerOutput[T]) ReleaseSplit(id string) { delete(o.splits, id) }

type splitOutput[T any] struct {
	o *readerOutput[T]
	g *splitWatermark
}

func (s splitOutput[T]) Collect(v T, ts int64) { s.o.collect(s.g, v, ts) }

// emitWatermark emits min over active generators of maxTs - bound - 1. A
// split that never emitted holds the watermark back until it goes idle.
func (o *readerOutput[T]) emitWatermark() {
	if o.wm.NoWatermarks {
		return
	}
	now := o.now()
	bound := o.wm.MaxOutOfOrderness.Milliseconds()
	wm, any := int64(runtime.MaxWatermark), false
	consider := func(g *splitWatermark) {
		if o.wm.Idleness > 0 && now.Sub(g.lastEmit) >= o.wm.Idleness {
			return
		}
		any = true
		if !g.seen {
			wm = runtime.MinWatermark
			return
		}
		if w := g.maxTs - bound - 1; w < wm {
			wm = w
		}
	}
	for _, g := range o.splits {
		consider(g)
	}
	if o.reader.seen {
		consider(&o.reader)
	}
	if any && wm > o.last {
		o.last = wm
		o.out.EmitWatermark(wm)
	}
}
