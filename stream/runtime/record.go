package runtime

import "math"

// Watermark bounds. A watermark of MaxWatermark means "no more records will
// ever arrive": every event-time timer fires.
const (
	MinWatermark int64 = math.MinInt64
	MaxWatermark int64 = math.MaxInt64
)

// Record is one stream element with its optional event timestamp
// (milliseconds since the epoch, as in Flink). Values are shared between
// chained operators and must be treated as immutable.
type Record struct {
	Value        any
	Timestamp    int64
	HasTimestamp bool
}

// EventKind tells the kinds of in-band events apart.
type EventKind uint8

const (
	// EventRecord carries a Record.
	EventRecord EventKind = iota
	// EventWatermark carries a watermark: the producer promises no record
	// with a timestamp at or below it follows on this channel.
	EventWatermark
	// EventEndOfPartition is the last event of a channel.
	EventEndOfPartition
	// EventBarrier carries a CheckpointBarrier (Event.Barrier).
	EventBarrier
	// EventCancelBarrier tells that checkpoint Event.Barrier.ID was
	// aborted upstream (Flink's CancelCheckpointMarker): stop aligning it.
	EventCancelBarrier
	// EventEndOfData ends the records of a channel while barriers may
	// still follow (FLIP-147): the task finishes its operators once every
	// channel ended its data, then waits for a final checkpoint before
	// EventEndOfPartition. Event.Drain is false for stop-with-savepoint
	// without --drain: operators are not finished then.
	EventEndOfData
	// EventBarrierPosition marks where priority barrier Event.Barrier.ID
	// was in its channel: the events of the channel delivered between the
	// priority barrier and this marker were overtaken by it (unaligned
	// checkpoints) and are its input channel state.
	EventBarrierPosition
)

// Event is what flows through an exchange: records and control events in
// one ordered stream per channel.
type Event struct {
	Kind      EventKind
	Record    Record
	Watermark int64
	Barrier   CheckpointBarrier
	Drain     bool
	// Priority, on an EventBarrier: the barrier overtakes the data queued
	// before it (an unaligned checkpoint). A writer sends it ahead of its
	// queued data (PriorityWriter); a gate delivers it ahead of its queued
	// batches (PriorityInputGate) and marks its place with
	// EventBarrierPosition.
	Priority bool
}

// ChannelBatch is a run of events from one input channel, in order. The
// receiver owns Events.
type ChannelBatch struct {
	Channel int
	Events  []Event
}
