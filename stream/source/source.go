// Package source is gofl's Source API in the shape of Flink's FLIP-27: a
// SplitEnumerator discovers the units of work (splits: Kafka partitions,
// file ranges) and assigns them; a SourceReader in each source subtask
// reads the splits it was given and emits records with timestamps.
//
// The enumerator runs inside a Coordinator (Flink's SourceCoordinator), a
// single-threaded state machine: every enumerator method and every
// callback it registers runs on the coordinator's goroutine (the JobMaster's
// event loop, or a task's goroutine in local enumeration), so an enumerator
// needs no locks. The reader runs on its source task's goroutine.
//
// Splits and enumerator checkpoints are plain Go values serialized with
// stream/codec, so they must be codec-serializable types.
package source

import (
	"context"
	"errors"
	"math"
	"time"
)

// Errors of the package.
var (
	// ErrClosed is returned by a Coordinator used after Close.
	ErrClosed = errors.New("source: coordinator closed")
	// ErrUnknownReader is returned when an event names a subtask outside
	// the source's parallelism.
	ErrUnknownReader = errors.New("source: unknown reader subtask")
)

// Split is one unit of work of a source. SplitID is stable and unique
// within the source (a Kafka "topic-partition", a file range "path:start").
type Split interface {
	SplitID() string
}

// Boundedness tells whether a source ends.
type Boundedness int

const (
	// Bounded sources end once every split was read and the enumerator
	// signalled no more splits to every reader.
	Bounded Boundedness = iota
	// ContinuousUnbounded sources run until cancelled.
	ContinuousUnbounded
)

// Source creates the two halves of a source. S is its split type, E the
// enumerator's checkpoint type. Its methods are called once per
// enumerator or reader instance, from the goroutine that will drive it;
// they must not block on I/O (connect in Start).
type Source[T any, S Split, E any] interface {
	Boundedness() Boundedness
	// CreateEnumerator creates the enumerator of a fresh start.
	CreateEnumerator(ctx SplitEnumeratorContext[S]) (SplitEnumerator[S, E], error)
	// RestoreEnumerator creates the enumerator from the checkpoint it
	// returned from SnapshotState. Splits that readers held at that
	// checkpoint come back with the readers' state, not through here.
	RestoreEnumerator(ctx SplitEnumeratorContext[S], checkpoint E) (SplitEnumerator[S, E], error)
	// CreateReader creates the reader of one source subtask.
	CreateReader(ctx ReaderContext) (SourceReader[T, S], error)
}

// ReaderInfo describes a registered reader.
type ReaderInfo struct {
	Subtask int
	// Host is where the reader runs (for locality); may be empty.
	Host string
}

// SplitEnumerator discovers splits and assigns them to readers. All methods
// are called on the coordinator's goroutine, never concurrently; none may
// block (use SplitEnumeratorContext.CallAsync for I/O).
type SplitEnumerator[S Split, E any] interface {
	// Start is called once, before any other method: start discovery
	// (e.g. a periodic CallAsync).
	Start() error
	// HandleSplitRequest is called when reader subtask asks for a split
	// (ReaderContext.SendSplitRequest). The enumerator may answer with
	// AssignSplit now, later, or with SignalNoMoreSplits.
	HandleSplitRequest(subtask int, host string)
	// AddSplitsBack returns splits assigned to subtask after the last
	// completed checkpoint, when that reader failed: they must be
	// assigned again (to it once it is back, or to another reader).
	AddSplitsBack(splits []S, subtask int)
	// AddReader is called when reader subtask registered: at start and
	// after its failover. Push-style enumerators assign to it here.
	AddReader(subtask int)
	// HandleSourceEvent receives a custom event a reader sent.
	HandleSourceEvent(subtask int, event []byte)
	// SnapshotState returns the enumerator's state for a checkpoint:
	// what it must remember across a restore, e.g. splits not yet
	// assigned and what it has already discovered.
	SnapshotState(checkpointID int64) (E, error)
	// NotifyCheckpointComplete tells that checkpoint id completed.
	// Idempotent; a notification may be lost and subsumed by a later one.
	NotifyCheckpointComplete(checkpointID int64) error
	// Close releases resources; called once, last.
	Close() error
}

// Progress is how far a bounded source is through its input: Done of
// Total splits (Total 0: not known yet) and, where the splits have sizes,
// the bytes of those splits.
type Progress struct {
	Done, Total           int64
	BytesDone, BytesTotal int64
}

// ProgressReporter is implemented by the enumerators of bounded sources
// that can say how far their readers are (the JobMaster reports it per
// vertex in REST, `gofl run` draws it as a progress bar). Progress is
// called on the coordinator's goroutine, like the enumerator's other
// methods, must not block, and has no side effects; ok false: nothing to
// report (yet).
type ProgressReporter interface {
	Progress() (p Progress, ok bool)
}

// HostPreferrer is implemented by a Source that knows on which hosts its
// data lives (HDFS block replicas), and by the Coordinator of any source
// (nil for one that does not). The JobMaster asks once, when it builds
// the job and before it schedules it, and prefers slots on those hosts for
// the source's subtasks (Flink's input split locations through the
// locality slot selection). It may block on I/O until ctx ends; the
// result weighs each host by the bytes it holds; nil or an error: no
// preference (locality is an optimization).
type HostPreferrer interface {
	PreferredHosts(ctx context.Context) (map[string]int64, error)
}

// SplitEnumeratorContext is the enumerator's view of the coordinator. Its
// methods may only be called on the coordinator's goroutine (from an
// enumerator method or a CallAsync handler); none blocks.
type SplitEnumeratorContext[S Split] interface {
	// CurrentParallelism is the source's parallelism (readers 0..p-1).
	CurrentParallelism() int
	// RegisteredReaders returns the readers registered now, by subtask.
	RegisteredReaders() map[int]ReaderInfo
	// AssignSplits hands splits to registered readers; assignments to a
	// reader that is not registered are kept for it until it registers.
	AssignSplits(assignment map[int][]S)
	// SignalNoMoreSplits tells reader subtask no split will follow: a
	// bounded reader ends once it finished what it has. A reader not
	// registered gets it after the splits assigned to it before; after a
	// reader's reset the enumerator must signal it again (AddReader).
	// Idempotent.
	SignalNoMoreSplits(subtask int)
	// SendEventToSourceReader sends a custom event to a reader.
	SendEventToSourceReader(subtask int, event []byte)
	// CallAsync runs call off the coordinator's goroutine, then handler
	// on it with call's result. With period > 0 it repeats every period
	// (after initialDelay) until the coordinator closes. Handlers of one
	// CallAsync run in order; a call does not start before the handler of
	// the previous one ran.
	CallAsync(call func() (any, error), handler func(any, error), initialDelay, period time.Duration)
}

// InputStatus is a reader's answer to PollNext.
type InputStatus int

const (
	// MoreAvailable asks for another PollNext right away.
	MoreAvailable InputStatus = iota
	// NothingAvailable asks to poll again at the returned time at the
	// latest (earlier when splits or events arrive).
	NothingAvailable
	// EndOfInput ends the reader: it has no split and was told no more
	// splits will come.
	EndOfInput
)

// NoTimestamp, as a record's timestamp, emits the record without one
// (Flink's TimestampAssigner.NO_TIMESTAMP): it advances no watermark.
const NoTimestamp int64 = math.MinInt64

// ReaderOutput receives a reader's records.
type ReaderOutput[T any] interface {
	// Collect emits a record without a split of its own (its timestamp,
	// unless NoTimestamp, advances the reader-wide watermark).
	Collect(value T, timestamp int64)
	// ForSplit returns the output of one split: its records advance that
	// split's watermark only, and the reader's watermark is the minimum
	// over the active splits, so a slow split holds back only itself, and
	// a split idle for the strategy's idleness timeout holds back nothing.
	ForSplit(splitID string) SplitOutput[T]
	// ReleaseSplit drops a finished split's watermark.
	ReleaseSplit(splitID string)
}

// SplitOutput receives the records of one split.
type SplitOutput[T any] interface {
	Collect(value T, timestamp int64)
}

// ReaderContext is the reader's view of its subtask. Its methods are
// called on the task's goroutine and do not block.
type ReaderContext interface {
	SubtaskIndex() int
	Parallelism() int
	// Host is where the reader runs.
	Host() string
	// SendSplitRequest asks the enumerator for a split
	// (SplitEnumerator.HandleSplitRequest). Events to the enumerator are
	// delivered in order, and retried until the coordinator has them.
	SendSplitRequest()
	// SendSourceEvent sends a custom event to the enumerator.
	SendSourceEvent(event []byte)
}

// SourceReader reads the splits assigned to one source subtask. All
// methods are called on the task's goroutine, never concurrently.
type SourceReader[T any, S Split] interface {
	// Start is called once, after the restored splits (if any) were
	// added with AddSplits: connect, and ask for splits if pull-based.
	Start() error
	// PollNext emits available records to out without blocking long.
	// With NothingAvailable the returned time is the latest to poll
	// again.
	PollNext(out ReaderOutput[T]) (InputStatus, time.Time, error)
	// AddSplits adds splits to read: assigned by the enumerator or
	// restored from a checkpoint.
	AddSplits(splits []S)
	// NotifyNoMoreSplits tells the reader no split will be assigned any
	// more: a bounded reader returns EndOfInput once it finished its
	// splits.
	NotifyNoMoreSplits()
	// HandleSourceEvent receives a custom event from the enumerator.
	HandleSourceEvent(event []byte)
	// SnapshotState returns the unfinished splits with their current
	// positions (e.g. the next offset), so that a restore resumes each
	// exactly.
	SnapshotState(checkpointID int64) ([]S, error)
	// NotifyCheckpointComplete tells that checkpoint id completed (Kafka
	// commits offsets here, for monitoring). Idempotent.
	NotifyCheckpointComplete(checkpointID int64) error
	// Close releases resources; called once, last, also after a failure.
	Close() error
}
