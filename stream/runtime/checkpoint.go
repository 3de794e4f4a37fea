package runtime

import (
	"fmt"
	"sort"
	"time"
)

// CheckpointType tells checkpoints and the kinds of savepoint apart.
type CheckpointType int

const (
	// Checkpoint is a periodic checkpoint.
	Checkpoint CheckpointType = iota
	// Savepoint is taken by hand; the job goes on.
	Savepoint
	// SavepointSuspend is stop-with-savepoint: after it completes the
	// sources stop without ending their input (no MaxWatermark, operators
	// are not finished) and the job ends FINISHED.
	SavepointSuspend
	// SavepointTerminate is stop-with-savepoint --drain: the sources end
	// their input (MaxWatermark, every operator finishes) before the
	// barrier.
	SavepointTerminate
)

// IsSavepoint reports whether t is any kind of savepoint.
func (t CheckpointType) IsSavepoint() bool { return t != Checkpoint }

// IsStop reports whether t stops the job once it completes.
func (t CheckpointType) IsStop() bool { return t == SavepointSuspend || t == SavepointTerminate }

func (t CheckpointType) String() string {
	switch t {
	case Checkpoint:
		return "CHECKPOINT"
	case Savepoint:
		return "SAVEPOINT"
	case SavepointSuspend:
		return "SAVEPOINT_SUSPEND"
	case SavepointTerminate:
		return "SAVEPOINT_TERMINATE"
	}
	return fmt.Sprintf("CheckpointType(%d)", int(t))
}

// CheckpointOptions travel with a barrier from the sources to every task.
type CheckpointOptions struct {
	Type CheckpointType
	// ExactlyOnce aligns barriers (execution.checkpointing.mode
	// EXACTLY_ONCE); otherwise records after a barrier are processed before
	// the checkpoint is taken (AT_LEAST_ONCE).
	ExactlyOnce bool
	// Unaligned lets barriers overtake in-flight data, which is then part
	// of the checkpoint; AlignedTimeout switches an aligned checkpoint to
	// unaligned after that long (0: from the start when Unaligned).
	Unaligned      bool
	AlignedTimeout time.Duration
	// TargetLocation is the checkpoint's or savepoint's directory URI.
	TargetLocation string
}

// CheckpointBarrier separates the records before checkpoint ID from the
// ones after it, on every channel (Flink's CheckpointBarrier).
type CheckpointBarrier struct {
	ID        int64
	Timestamp int64
	Options   CheckpointOptions
}

// ControlKind tells the kinds of CheckpointControl apart.
type ControlKind int

const (
	// TriggerCheckpoint starts a checkpoint at a task that has no running
	// input (a source, or a task whose inputs all ended, FLIP-147): it
	// snapshots and sends the barrier downstream.
	TriggerCheckpoint ControlKind = iota
	// NotifyCheckpointComplete commits: sinks publish what they staged
	// for the checkpoint.
	NotifyCheckpointComplete
	// NotifyCheckpointAborted drops what was staged for the checkpoint.
	NotifyCheckpointAborted
)

// CheckpointControl is a message from the JobMaster's CheckpointCoordinator
// to one task, delivered on the task's goroutine between records.
type CheckpointControl struct {
	Kind ControlKind
	// Barrier is set for TriggerCheckpoint.
	Barrier CheckpointBarrier
	// CheckpointID is set for the notifications.
	CheckpointID int64
}

// ListStateMode is how operator list state is redistributed on restore.
type ListStateMode int

const (
	// SplitList spreads all subtasks' elements evenly over the new subtasks.
	SplitList ListStateMode = iota + 1
	// UnionList gives every new subtask every element.
	UnionList
	// BroadcastList keeps one copy per subtask; a restore reads subtask 0's.
	BroadcastList
)

// OperatorSnapshot is one operator subtask's snapshot: keyed state as
// named sections per key group (so it can be redistributed by key-group
// range), and operator list states. What the task fills in is already
// serialized, except the keyed state of the hashmap backend, frozen and
// serialized later by KeyedStream, so the task goes on while it is
// written.
type OperatorSnapshot struct {
	OperatorID string
	// CheckpointID and Type are the checkpoint's, set by the task
	// (savepoints are always full snapshots).
	CheckpointID int64
	Type         CheckpointType
	// Keyed holds, per key group, the bytes of each keyed section (a state,
	// the timers, a window's contents) by section name.
	Keyed map[int]map[string][]byte
	// Lists holds the operator list states by name.
	Lists map[string]ListStateSnapshot
	// StateTypes names the type of each section and list state, checked
	// on restore.
	StateTypes map[string]string
	// Finished marks an operator that had finished its input (FLIP-147).
	Finished bool
	// SharedFiles are the files of an incremental keyed-state snapshot
	// (the "rocksdb" backend): the responder uploads those not Uploaded to
	// "<checkpoints dir>/<job-id>/shared/<Name>" and lists all of them in
	// the operator's handle.
	SharedFiles []SharedStateFile
	// KeyedStream is the asynchronous part of the keyed state (nil: Keyed
	// holds all of it), set by KeyedStateBackend.SnapshotAsync. The
	// Responder calls it at most once, on its own goroutine while the task
	// goes on; it emits the frozen sections one key group at a time, in
	// ascending group order, and an error from emit or its own fails the
	// snapshot (the checkpoint is declined). The sections' bytes are only
	// valid until emit returns. Sections of a group also in Keyed are
	// merged (emitted ones win).
	KeyedStream func(emit func(group int, sections map[string][]byte) error) error
	// ReleaseKeyed, when set, drops the frozen state of a KeyedStream that
	// will not be called (a declined or abandoned snapshot), so the task
	// stops copying on write. Idempotent; KeyedStream releases by itself.
	ReleaseKeyed func()
	// Persist, when set, is the rest of the operator's own snapshot work,
	// which may run off the task's goroutine: a transactional sink making
	// its pre-committed output durable. The writer of the snapshot calls
	// it (TaskSnapshot.Persist) before it acknowledges the checkpoint; an
	// error declines it. Release calls it when the snapshot is not
	// written. TaskSnapshot.Persist and Materialize run it at most once;
	// it may block.
	Persist func() error

	// keep holds what Keyed's bytes may alias (a restore whose sections
	// are carried over undecoded, see OperatorRestore.Keyed), so that it
	// outlives the snapshot's write.
	keep []any
}

// Materialize runs Persist and KeyedStream now, copying the sections into
// Keyed, and clears both, so that snap is whole and complete (for writers
// of the synchronous form and tests).
func (s *OperatorSnapshot) Materialize() error {
	if persist := s.Persist; persist != nil {
		s.Persist = nil
		if err := persist(); err != nil {
			if s.ReleaseKeyed != nil {
				s.ReleaseKeyed()
			}
			return err
		}
	}
	stream := s.KeyedStream
	if stream == nil {
		return nil
	}
	s.KeyedStream, s.ReleaseKeyed = nil, nil
	return stream(func(group int, sections map[string][]byte) error {
		for section, data := range sections {
			s.PutKeyed(group, section, s.StateTypes[section], append([]byte(nil), data...))
		}
		return nil
	})
}

// Release drops the frozen state of every operator's KeyedStream that
// will not run (see OperatorSnapshot.ReleaseKeyed), and runs the Persists
// not run yet, whose errors no one waits for. Idempotent.
func (s *TaskSnapshot) Release() {
	if s == nil {
		return
	}
	for _, op := range s.Operators {
		if op != nil && op.ReleaseKeyed != nil {
			op.ReleaseKeyed()
		}
	}
	_ = s.Persist()
}

// Persist runs every operator's Persist not run yet, in chain order, and
// returns the first error; later operators' still run. Not safe for
// concurrent use: the snapshot's writer calls it.
func (s *TaskSnapshot) Persist() error {
	if s == nil {
		return nil
	}
	var first error
	for _, op := range s.Operators {
		if op != nil && op.Persist != nil {
			persist := op.Persist
			op.Persist = nil
			if err := persist(); err != nil && first == nil {
				first = fmt.Errorf("operator %s: %w", op.OperatorID, err)
			}
		}
	}
	return first
}

// ListStateSnapshot is one operator list state.
type ListStateSnapshot struct {
	Mode     ListStateMode
	Elements [][]byte
}

// PutKeyed adds the bytes of section in key group group. A section is
// written once per key group per snapshot.
func (s *OperatorSnapshot) PutKeyed(group int, section, typeName string, data []byte) {
	if s.Keyed == nil {
		s.Keyed = map[int]map[string][]byte{}
	}
	g := s.Keyed[group]
	if g == nil {
		g = map[string][]byte{}
		s.Keyed[group] = g
	}
	g[section] = data
	s.setType(section, typeName)
}

// PutList adds an operator list state.
func (s *OperatorSnapshot) PutList(name string, mode ListStateMode, typeName string, elements [][]byte) {
	if s.Lists == nil {
		s.Lists = map[string]ListStateSnapshot{}
	}
	s.Lists[name] = ListStateSnapshot{Mode: mode, Elements: elements}
	s.setType(name, typeName)
}

func (s *OperatorSnapshot) setType(name, typeName string) {
	if s.StateTypes == nil {
		s.StateTypes = map[string]string{}
	}
	s.StateTypes[name] = typeName
}

// TaskSnapshot is the synchronous snapshot of every stateful operator of a
// chain, in chain order.
type TaskSnapshot struct {
	Operators []*OperatorSnapshot
	// InFlight is the in-flight data of an unaligned checkpoint.
	InFlight []InFlightData
}

// OperatorRestore is the state one operator subtask starts from: its key
// groups only (those of its key-group range), and its list states already
// redistributed for the new parallelism.
type OperatorRestore struct {
	// Keyed holds per key group the sections by name. The "state:"
	// sections may alias a mapped state file that stays mapped while this
	// OperatorRestore is reachable: only the keyed state backend keeps
	// them, and it keeps the OperatorRestore with them. Other sections are
	// the reader's to keep.
	Keyed map[int]map[string][]byte
	// Lists holds each list state's elements for this subtask.
	Lists map[string][][]byte
	// StateTypes names the type each section and list was written with.
	StateTypes map[string]string
	Finished   bool
	// SharedFiles are the shared files of the handles this restore reads
	// keyed state from (every old subtask whose key groups overlap this
	// subtask's range), downloaded: LocalPath is set.
	SharedFiles []SharedStateFile
}

// KeyedSection calls fn for section in every restored key group, in key
// group order.
func (r *OperatorRestore) KeyedSection(section string, fn func(group int, data []byte) error) error {
	if r == nil {
		return nil
	}
	groups := make([]int, 0, len(r.Keyed))
	for g := range r.Keyed {
		groups = append(groups, g)
	}
	sort.Ints(groups)
	for _, g := range groups {
		if b, ok := r.Keyed[g][section]; ok {
			if err := fn(g, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// CheckType fails with ErrIncompatibleState when name was written with
// another type than typeName. A state absent from the snapshot passes.
func (r *OperatorRestore) CheckType(name, typeName string) error {
	if r == nil {
		return nil
	}
	if old, ok := r.StateTypes[name]; ok && old != typeName {
		return fmt.Errorf("%w: state %q was written as %s and is now declared as %s", ErrIncompatibleState, name, old, typeName)
	}
	return nil
}

// ErrIncompatibleState is a restore of a state under a different type.
var ErrIncompatibleState = fmt.Errorf("runtime: incompatible state type")

// TaskRestore is what a restored task starts from, by operator ID.
type TaskRestore struct {
	CheckpointID int64
	Operators    map[string]*OperatorRestore
	// InFlight is the in-flight data of an unaligned checkpoint this
	// subtask took: input channel state is replayed before the gates are
	// read, output data emitted before anything else.
	InFlight []InFlightData
}

// CheckpointSyncMetrics are what the task measured of a checkpoint.
type CheckpointSyncMetrics struct {
	SyncDuration      time.Duration
	AlignmentDuration time.Duration
	// PersistedInFlightBytes counts in-flight data of an unaligned
	// checkpoint.
	PersistedInFlightBytes int64
	Unaligned              bool
}

// CheckpointResponder takes a task's snapshots to checkpoint storage and
// reports to the JobMaster (Flink's TaskStateManager with its
// CheckpointResponder). The runner implements it per task.
type CheckpointResponder interface {
	// Acknowledge is called on the task's goroutine, at most once per
	// checkpoint, with the synchronous snapshot. It must not block on I/O:
	// it writes the state asynchronously, running the operators'
	// KeyedStreams off the task's goroutine (or releasing them with
	// TaskSnapshot.Release when it does not write), and then acknowledges
	// the checkpoint to the JobMaster (or declines it when the write or a
	// KeyedStream fails). The task never touches snap again.
	Acknowledge(barrier CheckpointBarrier, snap *TaskSnapshot, m CheckpointSyncMetrics)
	// Decline reports that the task cannot take checkpoint id. Non-blocking.
	Decline(id int64, cause error)
}

// EndOfDataNotifier is an optional part of a CheckpointResponder. The
// task calls NotifyEndOfData once, on its goroutine, when it ended its
// data and waits for a final checkpoint (FLIP-147), so the coordinator can
// trigger that checkpoint as soon as every task has, instead of at the
// next interval. Non-blocking.
type EndOfDataNotifier interface {
	NotifyEndOfData()
}

// CheckpointedOperator is an Operator or Source with state to checkpoint.
// SnapshotState is called on the task's goroutine between records, after
// the barrier of the checkpoint was received on every input (aligned) and
// before it is sent on; it serializes the operator's state into snap.
// Restored state is in Context.Restore before Open.
type CheckpointedOperator interface {
	SnapshotState(checkpointID int64, snap *OperatorSnapshot) error
}

// CheckpointListener is an operator (or source) told of checkpoint
// outcomes on the task's goroutine: transactional sinks commit what they
// staged for a completed checkpoint, and may drop it for an aborted one.
// A notification may be lost (a later one subsumes it), so a complete
// notification commits everything staged up to id.
type CheckpointListener interface {
	NotifyCheckpointComplete(checkpointID int64) error
	NotifyCheckpointAborted(checkpointID int64) error
}

// KeyGroupRange is the key groups [Start, End] that subtask index of
// parallelism owns out of maxParallelism, the inverse of OperatorIndex (as
// Flink's KeyGroupRangeAssignment).
func KeyGroupRange(index, parallelism, maxParallelism int) (start, end int) {
	start = (index*maxParallelism + parallelism - 1) / parallelism
	end = ((index+1)*maxParallelism+parallelism-1)/parallelism - 1
	return start, end
}
