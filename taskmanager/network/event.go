package network

import (
	"encoding/binary"
	"fmt"
)

// EventKind identifies an in-band event. Kinds below 64 are the runtime's;
// CustomEvent carries any kind from 64 on, so new runtime events (end of
// data, cancel-checkpoint markers, ...) can be added without a wire change.
type EventKind uint8

const (
	KindEndOfPartition    EventKind = 1
	KindCheckpointBarrier EventKind = 2
	KindCancelCheckpoint  EventKind = 3
	// FirstCustomKind is the first kind a CustomEvent may use.
	FirstCustomKind EventKind = 64
)

// Event is an in-band event, ordered with the records of its subpartition.
type Event interface {
	Kind() EventKind
	appendPayload([]byte) []byte
}

// EndOfPartition is the last thing a subpartition delivers.
type EndOfPartition struct{}

// CheckpointBarrier separates the records of checkpoint CheckpointID from
// the ones after it.
type CheckpointBarrier struct {
	CheckpointID int64
	Timestamp    int64
}

// CancelCheckpointMarker tells consumers that a checkpoint was aborted.
type CancelCheckpointMarker struct{ CheckpointID int64 }

// CustomEvent is an event of a kind unknown to the data plane.
type CustomEvent struct {
	EventKind EventKind
	Payload   []byte
}

func (EndOfPartition) Kind() EventKind               { return KindEndOfPartition }
func (CheckpointBarrier) Kind() EventKind            { return KindCheckpointBarrier }
func (CancelCheckpointMarker) Kind() EventKind       { return KindCancelCheckpoint }
func (e CustomEvent) Kind() EventKind                { return e.EventKind }
func (EndOfPartition) appendPayload(b []byte) []byte { return b }
func (e CustomEvent) appendPayload(b []byte) []byte  { return append(b, e.Payload...) }
func (e CancelCheckpointMarker) appendPayload(b []byte) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(e.CheckpointID))
}
func (e CheckpointBarrier) appendPayload(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(e.CheckpointID))
	return binary.BigEndian.AppendUint64(b, uint64(e.Timestamp))
}

// EncodeEvent serializes an event: kind byte, then the payload.
func EncodeEvent(ev Event) []byte {
	return ev.appendPayload([]byte{byte(ev.Kind())})
}

// DecodeEvent parses what EncodeEvent produced.
func DecodeEvent(b []byte) (Event, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("network: empty event")
	}
	k, p := EventKind(b[0]), b[1:]
	switch {
	case k == KindEndOfPartition && len(p) == 0:
		return EndOfPartition{}, nil
	case k == KindCheckpointBarrier && len(p) == 16:
		return CheckpointBarrier{CheckpointID: int64(binary.BigEndian.Uint64(p)), Timestamp: int64(binary.BigEndian.Uint64(p[8:]))}, nil
	case k == KindCancelCheckpoint && len(p) == 8:
		return CancelCheckpointMarker{CheckpointID: int64(binary.BigEndian.Uint64(p))}, nil
	case k >= FirstCustomKind:
		return CustomEvent{EventKind: k, Payload: append([]byte(nil), p...)}, nil
	}
	return nil, fmt.Errorf("network: malformed event (kind %d, %d payload bytes)", k, len(p))
}
