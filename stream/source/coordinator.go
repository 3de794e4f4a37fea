package source

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/gofl/gofl/stream/codec"
)

// EventKind tells what an Event carries.
type EventKind int

const (
	// ReaderRegistration (reader → coordinator): the reader started
	// (Host set); the enumerator's AddReader runs.
	ReaderRegistration EventKind = iota + 1
	// SplitRequest (reader → coordinator): HandleSplitRequest.
	SplitRequest
	// CustomEvent (either way): Payload is a source event.
	CustomEvent
	// AddSplits (coordinator → reader): Splits are encoded splits.
	AddSplits
	// NoMoreSplits (coordinator → reader).
	NoMoreSplits
)

// Event is a message between a Coordinator and its readers (Flink's
// OperatorEvent). It is codec-serializable so that it can cross the
// JobMaster↔TaskManager link.
type Event struct {
	Kind    EventKind
	Host    string
	Splits  [][]byte
	Payload []byte
}

// EventCodec serializes Events for the wire.
var EventCodec = codec.MustFor[Event]()

// Gateway delivers a coordinator's events to reader subtasks. Send must not
// block; the link keeps the events of one subtask in order and retries them
// until the reader's task has them (or the attempt is gone).
type Gateway interface {
	Send(subtask int, ev Event)
}

// Executor runs fn on the coordinator's goroutine (the JobMaster's event
// loop). Post must not block and may be called from any goroutine.
type Executor interface {
	Post(fn func())
}

// OperatorCoordinator is the JobMaster's handle of a source's coordinator
// (Flink's OperatorCoordinator). Every method is called on the
// coordinator's goroutine (see Executor), never concurrently.
type OperatorCoordinator interface {
	// Start creates (or, after ResetToCheckpoint, restores) the enumerator
	// and starts it. Called once.
	Start() error
	// HandleEventFromOperator receives an event of reader subtask.
	HandleEventFromOperator(subtask int, ev Event) error
	// SubtaskReset tells that reader subtask failed and restarts from
	// checkpoint restoredCheckpointID (0: from scratch): the splits
	// assigned to it after that checkpoint go back to the enumerator,
	// and the reader is unregistered until it registers again.
	SubtaskReset(subtask int, restoredCheckpointID int64)
	// CheckpointCoordinator snapshots the enumerator and the assignments
	// not yet delivered for checkpoint id, before the sources are
	// triggered.
	CheckpointCoordinator(checkpointID int64) ([]byte, error)
	// NotifyCheckpointComplete tells that checkpoint id completed.
	NotifyCheckpointComplete(checkpointID int64)
	// ResetToCheckpoint replaces the coordinator's state with a
	// checkpoint's (global failover, or a restore before Start); nil
	// state restarts from scratch.
	ResetToCheckpoint(checkpointID int64, state []byte) error
	// Close stops the enumerator and its async calls; idempotent.
	Close() error
}

// Coordinator runs a Source's SplitEnumerator (Flink's SourceCoordinator):
// it registers readers, forwards their requests, delivers assignments
// through the Gateway and tracks which splits were assigned after which
// checkpoint, so that a failed reader's uncheckpointed splits go back to the
// enumerator.
type Coordinator[T any, S Split, E any] struct {
	src         Source[T, S, E]
	parallelism int
	gw          Gateway
	exec        Executor
	splitCodec  codec.Codec[S]
	stateCodec  codec.Codec[coordinatorState[E]]

	enum    SplitEnumerator[S, E]
	readers map[int]ReaderInfo
	// pending holds assignments to readers not registered now.
	pending map[int][]S
	// noMore holds the readers the enumerator told that no split follows,
	// since their last registration or reset: a reader not registered
	// gets the signal when it registers, after its pending splits (else
	// it would end before them, and their records would be lost); a
	// registered one gets it once.
	noMore map[int]bool
	// uncheckpointed holds, per subtask, the splits assigned since the
	// last CheckpointCoordinator; byCheckpoint those assigned before
	// checkpoint id (and after the previous one), until id completes.
	uncheckpointed map[int][]S
	byCheckpoint   map[int64]map[int][]S
	restored       *coordinatorState[E]
	started        bool
	closed         bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// coordinatorState is what a coordinator checkpoints.
type coordinatorState[E any] struct {
	Enumerator E
	// Pending are encoded assignments to readers that had not registered.
	Pending map[int][][]byte
}

// NewCoordinator returns the coordinator of src at parallelism, sending
// through gw and running callbacks through exec.
// PreferredHosts implements HostPreferrer: the source's, when it has
// any.
func (c *Coordinator[T, S, E]) PreferredHosts(ctx context.Context) (map[string]int64, error) {
	if hp, ok := c.src.(HostPreferrer); ok {
		return hp.PreferredHosts(ctx)
	}
	return nil, nil
}

func NewCoordinator[T any, S Split, E any](src Source[T, S, E], parallelism int, gw Gateway, exec Executor) (*Coordinator[T, S, E], error) {
	sc, err := codec.For[S]()
	if err != nil {
		return nil, fmt.Errorf("source: split type cannot be serialized: %w", err)
	}
	ec, err := codec.For[coordinatorState[E]]()
	if err != nil {
		return nil, fmt.Errorf("source: enumerator checkpoint type cannot be serialized: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Coordinator[T, S, E]{
		src: src, parallelism: parallelism, gw: gw, exec: exec, splitCodec: sc, stateCodec: ec,
		readers: map[int]ReaderInfo{}, pending: map[int][]S{}, noMore: map[int]bool{},
		uncheckpointed: map[int][]S{}, byCheckpoint: map[int64]map[int][]S{},
		ctx: ctx, cancel: cancel,
	}, nil
}

// SplitCodec is the codec of the source's splits.
func (c *Coordinator[T, S, E]) SplitCodec() codec.Codec[S] { return c.splitCodec }

// Start implements OperatorCoordinator.
func (c *Coordinator[T, S, E]) Start() error {
	if c.closed {
		return ErrClosed
	}
	if c.started {
		return nil
	}
	var err error
	if c.restored != nil {
		c.enum, err = c.src.RestoreEnumerator(c, c.restored.Enumerator)
		if err == nil {
			for sub, els := range c.restored.Pending {
				splits, derr := c.decodeSplits(els)
				if derr != nil {
					return derr
				}
				c.pending[sub] = append(c.pending[sub], splits...)
			}
		}
	} else {
		c.enum, err = c.src.CreateEnumerator(c)
	}
	if err != nil {
		return fmt.Errorf("source: creating the split enumerator: %w", err)
	}
	c.started = true
	return c.enum.Start()
}

// HandleEventFromOperator implements OperatorCoordinator.
func (c *Coordinator[T, S, E]) HandleEventFromOperator(subtask int, ev Event) error {
	if c.closed {
		return ErrClosed
	}
	if subtask < 0 || subtask >= c.parallelism {
		return fmt.Errorf("%w: %d of %d", ErrUnknownReader, subtask, c.parallelism)
	}
	switch ev.Kind {
	case ReaderRegistration:
		c.readers[subtask] = ReaderInfo{Subtask: subtask, Host: ev.Host}
		if p := c.pending[subtask]; len(p) > 0 {
			delete(c.pending, subtask)
			c.deliver(subtask, p)
		}
		if c.noMore[subtask] {
			c.gw.Send(subtask, Event{Kind: NoMoreSplits})
		}
		c.enum.AddReader(subtask)
	case SplitRequest:
		c.enum.HandleSplitRequest(subtask, ev.Host)
	case CustomEvent:
		c.enum.HandleSourceEvent(subtask, ev.Payload)
	default:
		return fmt.Errorf("source: unexpected event kind %d from reader %d", ev.Kind, subtask)
	}
	return nil
}

// SubtaskReset implements OperatorCoordinator.
func (c *Coordinator[T, S, E]) SubtaskReset(subtask int, restoredCheckpointID int64) {
	if c.closed || c.enum == nil {
		return
	}
	delete(c.readers, subtask)
	// The enumerator decides again (AddSplitsBack, AddReader) whether
	// the restarted reader gets more.
	delete(c.noMore, subtask)
	var back []S
	ids := make([]int64, 0, len(c.byCheckpoint))
	for id := range c.byCheckpoint {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		if id > restoredCheckpointID {
			back = append(back, c.byCheckpoint[id][subtask]...)
			delete(c.byCheckpoint[id], subtask)
		}
	}
	back = append(back, c.uncheckpointed[subtask]...)
	delete(c.uncheckpointed, subtask)
	back = append(back, c.pending[subtask]...)
	delete(c.pending, subtask)
	if len(back) > 0 {
		c.enum.AddSplitsBack(back, subtask)
	}
}

// CheckpointCoordinator implements OperatorCoordinator.
func (c *Coordinator[T, S, E]) CheckpointCoordinator(checkpointID int64) ([]byte, error) {
	if c.closed {
		return nil, ErrClosed
	}
	e, err := c.enum.SnapshotState(checkpointID)
	if err != nil {
		return nil, fmt.Errorf("source: snapshotting the split enumerator: %w", err)
	}
	st := coordinatorState[E]{Enumerator: e, Pending: map[int][][]byte{}}
	for sub, splits := range c.pending {
		st.Pending[sub] = c.encodeSplits(splits)
	}
	if len(c.uncheckpointed) > 0 {
		c.byCheckpoint[checkpointID] = c.uncheckpointed
		c.uncheckpointed = map[int][]S{}
	}
	return c.stateCodec.Append(nil, st), nil
}

// NotifyCheckpointComplete implements OperatorCoordinator.
func (c *Coordinator[T, S, E]) NotifyCheckpointComplete(checkpointID int64) {
	if c.closed || c.enum == nil {
		return
	}
	for id := range c.byCheckpoint {
		if id <= checkpointID {
			delete(c.byCheckpoint, id)
		}
	}
	_ = c.enum.NotifyCheckpointComplete(checkpointID)
}

// ResetToCheckpoint implements OperatorCoordinator. After Start it closes
// the enumerator and starts a restored one.
func (c *Coordinator[T, S, E]) ResetToCheckpoint(_ int64, state []byte) error {
	if c.closed {
		return ErrClosed
	}
	c.restored = nil
	if state != nil {
		st, n, err := c.stateCodec.Decode(state)
		if err == nil && n != len(state) {
			err = fmt.Errorf("%w: trailing bytes", codec.ErrCorrupt)
		}
		if err != nil {
			return fmt.Errorf("source: restoring the coordinator: %w", err)
		}
		c.restored = &st
	}
	if !c.started {
		return nil
	}
	c.cancel()
	c.wg.Wait()
	err := c.enum.Close()
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.readers, c.pending, c.noMore = map[int]ReaderInfo{}, map[int][]S{}, map[int]bool{}
	c.uncheckpointed, c.byCheckpoint = map[int][]S{}, map[int64]map[int][]S{}
	c.started = false
	if err != nil {
		return fmt.Errorf("source: closing the split enumerator: %w", err)
	}
	return c.Start()
}

// Progress is the enumerator's progress when it is a ProgressReporter
// and started. Called on the coordinator's goroutine; it does not block.
func (c *Coordinator[T, S, E]) Progress() (Progress, bool) {
	if pr, ok := c.enum.(ProgressReporter); ok && c.started && !c.closed {
		return pr.Progress()
	}
	return Progress{}, false
}

// Close implements OperatorCoordinator.
func (c *Coordinator[T, S, E]) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	c.cancel()
	c.wg.Wait()
	if c.enum != nil {
		return c.enum.Close()
	}
	return nil
}

// CurrentParallelism implements SplitEnumeratorContext.
func (c *Coordinator[T, S, E]) CurrentParallelism() int { return c.parallelism }

// RegisteredReaders implements SplitEnumeratorContext.
func (c *Coordinator[T, S, E]) RegisteredReaders() map[int]ReaderInfo {
	out := make(map[int]ReaderInfo, len(c.readers))
	for k, v := range c.readers {
		out[k] = v
	}
	return out
}

// AssignSplits implements SplitEnumeratorContext.
func (c *Coordinator[T, S, E]) AssignSplits(assignment map[int][]S) {
	for sub, splits := range assignment {
		if len(splits) == 0 || sub < 0 || sub >= c.parallelism {
			continue
		}
		if _, ok := c.readers[sub]; !ok {
			c.pending[sub] = append(c.pending[sub], splits...)
			continue
		}
		c.deliver(sub, splits)
	}
}

func (c *Coordinator[T, S, E]) deliver(sub int, splits []S) {
	c.uncheckpointed[sub] = append(c.uncheckpointed[sub], splits...)
	c.gw.Send(sub, Event{Kind: AddSplits, Splits: c.encodeSplits(splits)})
}

// SignalNoMoreSplits implements SplitEnumeratorContext. A reader that has
// not registered gets it when it registers, after the splits assigned to
// it meanwhile; a repeated signal is dropped.
func (c *Coordinator[T, S, E]) SignalNoMoreSplits(subtask int) {
	if subtask < 0 || subtask >= c.parallelism || c.noMore[subtask] {
		return
	}
	c.noMore[subtask] = true
	if _, ok := c.readers[subtask]; ok {
		c.gw.Send(subtask, Event{Kind: NoMoreSplits})
	}
}

// SendEventToSourceReader implements SplitEnumeratorContext.
func (c *Coordinator[T, S, E]) SendEventToSourceReader(subtask int, event []byte) {
	c.gw.Send(subtask, Event{Kind: CustomEvent, Payload: event})
}

// CallAsync implements SplitEnumeratorContext: one goroutine per call,
// owned by the coordinator and stopped by Close or ResetToCheckpoint.
func (c *Coordinator[T, S, E]) CallAsync(call func() (any, error), handler func(any, error), initialDelay, period time.Duration) {
	ctx := c.ctx
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		delay := initialDelay
		for {
			if delay > 0 {
				t := time.NewTimer(delay)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
			if ctx.Err() != nil {
				return
			}
			v, err := call()
			done := make(chan struct{})
			c.exec.Post(func() {
				defer close(done)
				if ctx.Err() == nil {
					handler(v, err)
				}
			})
			if period <= 0 {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-done:
			}
			delay = period
		}
	}()
}

func (c *Coordinator[T, S, E]) encodeSplits(splits []S) [][]byte {
	out := make([][]byte, len(splits))
	for i, s := range splits {
		out[i] = c.splitCodec.Append(nil, s)
	}
	return out
}

func (c *Coordinator[T, S, E]) decodeSplits(els [][]byte) ([]S, error) {
	return DecodeSplits(c.splitCodec, els)
}

// DecodeSplits decodes the splits of an AddSplits event or a snapshot.
func DecodeSplits[S any](sc codec.Codec[S], els [][]byte) ([]S, error) {
	out := make([]S, 0, len(els))
	for _, b := range els {
		s, n, err := sc.Decode(b)
		if err == nil && n != len(b) {
			err = fmt.Errorf("%w: trailing bytes", codec.ErrCorrupt)
		}
		if err != nil {
			return nil, fmt.Errorf("source: decoding a split: %w", err)
		}
		out = append(out, s)
	}
	return out, nil
}

// MergeStates merges coordinator checkpoints into one: the enumerator
// states through merge, the pending assignments together. Used where
// several copies of an enumerator were checkpointed (local enumeration).
func (c *Coordinator[T, S, E]) MergeStates(states [][]byte, merge func([]E) E) ([]byte, error) {
	es := make([]E, 0, len(states))
	out := coordinatorState[E]{Pending: map[int][][]byte{}}
	for _, b := range states {
		st, n, err := c.stateCodec.Decode(b)
		if err == nil && n != len(b) {
			err = fmt.Errorf("%w: trailing bytes", codec.ErrCorrupt)
		}
		if err != nil {
			return nil, fmt.Errorf("source: merging coordinator states: %w", err)
		}
		es = append(es, st.Enumerator)
		for sub, els := range st.Pending {
			out.Pending[sub] = append(out.Pending[sub], els...)
		}
	}
	out.Enumerator = merge(es)
	return c.stateCodec.Append(nil, out), nil
}
