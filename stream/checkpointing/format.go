// Package checkpointing is the runner's side of checkpoints (Flink's
// TaskStateManager with its CheckpointStreamFactory): a Responder writes a
// task's snapshots to checkpoint storage as one state file per task attempt
// per checkpoint and reports them to the JobMaster, and Restore reads the
// part of a checkpoint a (possibly rescaled) subtask needs.
//
// # State files
//
// A state file is a header (the magic "GOFLSTAT" and a big-endian uint32
// format version) followed, operator by operator, by blobs:
//
//   - one per key group, holding every keyed section of that group: a
//     uvarint section count, then per section (sorted by name) a uvarint
//     name length, the name, a uvarint data length and the data;
//   - one per list-state element, holding its bytes.
//
// Every blob ends with the CRC-32C of its body (4 bytes, big endian). The
// handles (pb.OperatorSubtaskStateHandle) carry each blob's region, so a
// reader seeks to the key groups it owns and never reads the rest.
// Operator IDs, state names, modes and types live in the handles, not in
// the file.
package checkpointing

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"

	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/stream/runtime"
)

const (
	magic = "GOFLSTAT"
	// FormatVersion is the state file format this package writes; readers
	// refuse newer ones.
	FormatVersion = 1
	headerLen     = len(magic) + 4
	crcLen        = 4
)

// ErrCorrupt is wrapped by failures to parse a state file or handle.
var ErrCorrupt = errors.New("checkpointing: corrupt state")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func appendHeader(b []byte) []byte {
	b = append(b, magic...)
	return binary.BigEndian.AppendUint32(b, FormatVersion)
}

func checkHeader(h []byte) error {
	if len(h) < headerLen || string(h[:len(magic)]) != magic {
		return fmt.Errorf("%w: not a state file (bad magic)", ErrCorrupt)
	}
	if v := binary.BigEndian.Uint32(h[len(magic):]); v == 0 || v > FormatVersion {
		return fmt.Errorf("%w: state file format version %d, this reader knows up to %d", ErrCorrupt, v, FormatVersion)
	}
	return nil
}

// encoder appends the blobs of operators to one buffer.
type encoder struct{ buf bytes.Buffer }

func newEncoder() *encoder {
	e := &encoder{}
	e.buf.Write(appendHeader(nil))
	return e
}

// blob appends body and its checksum and returns its region.
func (e *encoder) blob(body []byte) *pb.StateFileRegion {
	off := int64(e.buf.Len())
	e.buf.Write(body)
	var c [crcLen]byte
	binary.BigEndian.PutUint32(c[:], crc32.Checksum(body, castagnoli))
	e.buf.Write(c[:])
	return &pb.StateFileRegion{Offset: off, Length: int64(len(body) + crcLen)}
}

// operator appends one operator's state and returns its handle, without
// the file (the caller sets it).
func (e *encoder) operator(op *runtime.OperatorSnapshot, subtask, parallelism, maxParallelism int) *pb.OperatorSubtaskStateHandle {
	h := &pb.OperatorSubtaskStateHandle{
		OperatorId: op.OperatorID, SubtaskIndex: int32(subtask), Parallelism: int32(parallelism),
		MaxParallelism: int32(maxParallelism), Finished: op.Finished,
	}
	if len(op.StateTypes) > 0 {
		h.StateTypes = make(map[string]string, len(op.StateTypes))
		for k, v := range op.StateTypes {
			h.StateTypes[k] = v
		}
	}
	groups := make([]int, 0, len(op.Keyed))
	for g := range op.Keyed {
		groups = append(groups, g)
	}
	sort.Ints(groups)
	var body []byte
	for _, g := range groups {
		sections := op.Keyed[g]
		if len(sections) == 0 {
			continue
		}
		body = encodeSections(body[:0], sections)
		h.KeyGroups = append(h.KeyGroups, &pb.KeyGroupRegion{KeyGroup: int32(g), Region: e.blob(body)})
	}
	names := make([]string, 0, len(op.Lists))
	for n := range op.Lists {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		l := op.Lists[n]
		lh := &pb.OperatorListStateHandle{Name: n, Mode: modeToProto(l.Mode)}
		for _, el := range l.Elements {
			lh.Elements = append(lh.Elements, e.blob(el))
		}
		h.ListStates = append(h.ListStates, lh)
	}
	return h
}

func encodeSections(b []byte, sections map[string][]byte) []byte {
	names := make([]string, 0, len(sections))
	for n := range sections {
		names = append(names, n)
	}
	sort.Strings(names)
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, n := range names {
		b = binary.AppendUvarint(b, uint64(len(n)))
		b = append(b, n...)
		d := sections[n]
		b = binary.AppendUvarint(b, uint64(len(d)))
		b = append(b, d...)
	}
	return b
}

// checkBlob verifies a blob's checksum and returns its body.
func checkBlob(b []byte) ([]byte, error) {
	if len(b) < crcLen {
		return nil, fmt.Errorf("%w: a region of %d bytes is shorter than its checksum", ErrCorrupt, len(b))
	}
	body, sum := b[:len(b)-crcLen], binary.BigEndian.Uint32(b[len(b)-crcLen:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	return body, nil
}

func decodeSections(body []byte) (map[string][]byte, error) {
	n, k := binary.Uvarint(body)
	if k <= 0 || n > uint64(len(body)) {
		return nil, fmt.Errorf("%w: bad section count", ErrCorrupt)
	}
	body = body[k:]
	out := make(map[string][]byte, n)
	next := func() ([]byte, error) {
		l, k := binary.Uvarint(body)
		if k <= 0 || l > uint64(len(body)-k) {
			return nil, fmt.Errorf("%w: bad section length", ErrCorrupt)
		}
		v := body[k : k+int(l)]
		body = body[k+int(l):]
		return v, nil
	}
	for range n {
		name, err := next()
		if err != nil {
			return nil, err
		}
		data, err := next()
		if err != nil {
			return nil, err
		}
		out[string(name)] = data
	}
	if len(body) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes after the sections", ErrCorrupt, len(body))
	}
	return out, nil
}

func modeToProto(m runtime.ListStateMode) pb.OperatorStateMode {
	switch m {
	case runtime.UnionList:
		return pb.OperatorStateMode_OPERATOR_STATE_MODE_UNION
	case runtime.BroadcastList:
		return pb.OperatorStateMode_OPERATOR_STATE_MODE_BROADCAST
	}
	return pb.OperatorStateMode_OPERATOR_STATE_MODE_SPLIT
}

// Encode serializes a task's snapshot as one state file and returns its
// bytes with one handle per operator (regions into those bytes, no File
// set). An operator with neither keyed nor list state still gets a
// handle: it carries the finished flag and the state types.
func Encode(snap *runtime.TaskSnapshot, subtask, parallelism, maxParallelism int) ([]byte, []*pb.OperatorSubtaskStateHandle) {
	e := newEncoder()
	var hs []*pb.OperatorSubtaskStateHandle
	for _, op := range snap.Operators {
		if op == nil {
			continue
		}
		hs = append(hs, e.operator(op, subtask, parallelism, maxParallelism))
	}
	encodeInFlight(e, snap, hs)
	return e.buf.Bytes(), hs
}

// hasData reports whether a handle refers to any bytes of its file.
func hasData(h *pb.OperatorSubtaskStateHandle) bool {
	if len(h.KeyGroups) > 0 || len(h.InFlight) > 0 {
		return true
	}
	for _, l := range h.ListStates {
		if len(l.Elements) > 0 {
			return true
		}
	}
	return false
}
