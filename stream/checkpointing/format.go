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
// reader seeks to the key groups it owns and never reads the rest. Key
// groups with identical bytes may share one region.
// Operator IDs, state names, modes and types live in the handles, not in
// the file.
package checkpointing

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
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

// encoder streams the blobs of operators to w, computing each blob's
// checksum on the fly, so a state file is written in one pass without a
// copy of its bytes in memory.
type encoder struct {
	w       io.Writer
	off     int64
	err     error
	crc     uint32
	start   int64
	scratch []byte
}

func newEncoder(w io.Writer) *encoder {
	e := &encoder{w: w}
	e.put(appendHeader(nil), false)
	return e
}

// put writes p, adding it to the current blob's checksum when sum.
func (e *encoder) put(p []byte, sum bool) {
	if e.err != nil || len(p) == 0 {
		return
	}
	if sum {
		e.crc = crc32.Update(e.crc, castagnoli, p)
	}
	n, err := e.w.Write(p)
	e.off += int64(n)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	e.err = err
}

func (e *encoder) begin() { e.start, e.crc = e.off, 0 }

// end closes the blob begun last with its checksum and returns its region.
func (e *encoder) end() *pb.StateFileRegion {
	var c [crcLen]byte
	binary.BigEndian.PutUint32(c[:], e.crc)
	e.put(c[:], false)
	return &pb.StateFileRegion{Offset: e.start, Length: e.off - e.start}
}

// blob writes body and its checksum and returns its region.
func (e *encoder) blob(body []byte) *pb.StateFileRegion {
	e.begin()
	e.put(body, true)
	return e.end()
}

// operator writes one operator's state and returns its handle, without
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
	// Small key groups with the same bytes (an incremental LSM snapshot's
	// manifest is in every key group) share one region.
	same := map[string]*pb.StateFileRegion{}
	next := 0 // of groups, the first not written yet
	syncUpTo := func(end int) {
		for ; next < len(groups) && groups[next] < end; next++ {
			if sections := op.Keyed[groups[next]]; len(sections) > 0 {
				h.KeyGroups = append(h.KeyGroups, &pb.KeyGroupRegion{KeyGroup: int32(groups[next]), Region: e.sectionsOnce(same, sections)})
			}
		}
	}
	if op.KeyedStream != nil {
		last := -1
		merged := map[string][]byte{}
		err := op.KeyedStream(func(g int, sections map[string][]byte) error {
			if g <= last {
				return fmt.Errorf("checkpointing: operator %s: keyed state streamed key group %d after %d", op.OperatorID, g, last)
			}
			last = g
			syncUpTo(g)
			if next < len(groups) && groups[next] == g {
				clear(merged)
				for n, d := range op.Keyed[g] {
					merged[n] = d
				}
				for n, d := range sections {
					merged[n] = d
				}
				sections = merged
				next++
			}
			if len(sections) > 0 {
				h.KeyGroups = append(h.KeyGroups, &pb.KeyGroupRegion{KeyGroup: int32(g), Region: e.sections(sections)})
			}
			return e.err
		})
		if err != nil && e.err == nil {
			e.err = err
		}
	}
	syncUpTo(math.MaxInt)
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

// sameLimit bounds the key groups sectionsOnce compares: larger ones are
// written as they are.
const sameLimit = 64 << 10

// sectionsOnce is sections, sharing the region of an earlier key group
// with the same small sections (kept in same).
func (e *encoder) sectionsOnce(same map[string]*pb.StateFileRegion, sections map[string][]byte) *pb.StateFileRegion {
	size := 0
	for n, d := range sections {
		size += len(n) + len(d)
	}
	if size > sameLimit {
		return e.sections(sections)
	}
	names := make([]string, 0, len(sections))
	for n := range sections {
		names = append(names, n)
	}
	sort.Strings(names)
	var key []byte
	for _, n := range names {
		key = binary.AppendUvarint(key, uint64(len(n)))
		key = append(key, n...)
		key = binary.AppendUvarint(key, uint64(len(sections[n])))
		key = append(key, sections[n]...)
	}
	if r := same[string(key)]; r != nil {
		return &pb.StateFileRegion{Offset: r.Offset, Length: r.Length}
	}
	r := e.sections(sections)
	same[string(key)] = r
	return &pb.StateFileRegion{Offset: r.Offset, Length: r.Length}
}

// sections writes one key group's blob: the section count, then per
// section (sorted by name) its name and data, each length-prefixed. The
// data is written as it is, never copied into a body first.
func (e *encoder) sections(sections map[string][]byte) *pb.StateFileRegion {
	names := make([]string, 0, len(sections))
	for n := range sections {
		names = append(names, n)
	}
	sort.Strings(names)
	e.begin()
	b := binary.AppendUvarint(e.scratch[:0], uint64(len(names)))
	for _, n := range names {
		b = binary.AppendUvarint(b, uint64(len(n)))
		b = append(b, n...)
		d := sections[n]
		b = binary.AppendUvarint(b, uint64(len(d)))
		if len(d) < 4<<10 { // small data: one write with its prefix
			b = append(b, d...)
			continue
		}
		e.put(b, true)
		e.put(d, true)
		b = b[:0]
	}
	e.put(b, true)
	e.scratch = b[:0]
	return e.end()
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
// handle: it carries the finished flag and the state types. It fails when
// a KeyedStream does.
func Encode(snap *runtime.TaskSnapshot, subtask, parallelism, maxParallelism int) ([]byte, []*pb.OperatorSubtaskStateHandle, error) {
	var buf bytes.Buffer
	buf.Grow(encodedSize(snap))
	hs, _, err := EncodeTo(&buf, snap, subtask, parallelism, maxParallelism)
	return buf.Bytes(), hs, err
}

// EncodeTo streams a task's snapshot as one state file to w and returns
// one handle per operator (see Encode) and the number of bytes written.
// It runs the operators' KeyedStreams (the asynchronous part of their
// snapshots) as it goes, and fails when one of them or w does.
func EncodeTo(w io.Writer, snap *runtime.TaskSnapshot, subtask, parallelism, maxParallelism int) ([]*pb.OperatorSubtaskStateHandle, int64, error) {
	e := newEncoder(w)
	var hs []*pb.OperatorSubtaskStateHandle
	for _, op := range snap.Operators {
		if op == nil {
			continue
		}
		hs = append(hs, e.operator(op, subtask, parallelism, maxParallelism))
		if e.err != nil {
			return nil, e.off, e.err
		}
	}
	encodeInFlight(e, snap, hs)
	return hs, e.off, e.err
}

// encodedSize is the size of the state file of snap, or a little more.
func encodedSize(snap *runtime.TaskSnapshot) int {
	n := headerLen
	for _, op := range snap.Operators {
		if op == nil {
			continue
		}
		for _, sections := range op.Keyed {
			n += crcLen + binary.MaxVarintLen64
			for name, d := range sections {
				n += 2*binary.MaxVarintLen64 + len(name) + len(d)
			}
		}
		for _, l := range op.Lists {
			for _, el := range l.Elements {
				n += crcLen + len(el)
			}
		}
	}
	for _, d := range snap.InFlight {
		n += crcLen + len(d.Data)
	}
	return n
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
