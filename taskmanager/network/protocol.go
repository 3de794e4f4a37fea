package network

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// Wire protocol (one TCP connection per client runner → server runner):
//
//	connection start, both directions: "GOFL" + version (1 byte)
//	frame: type u8 | receiver id u32 | payload length u32 | payload
//
// Client → server:
//
//	PartitionRequest       subpartition u32 | initial credit u32 | partition id bytes
//	AddCredit              credit u32
//	CancelPartitionRequest (empty)
//	CloseRequest           (empty, receiver id 0)
//
// Server → client:
//
//	BufferResponse  sequence number u32 | backlog u32 | flags u8 (1 = event,
//	                2 = priority event: sent without credit, it overtook the
//	                buffers queued before it) | data
//	ErrorResponse   flags u8 (1 = partition not found) | message; receiver id
//	                fatalReceiverID fails the whole connection
//
// Integers are big endian. Lengths are bounded by Config.MaxFrameSize;
// receiver ids are allocated by the client in increasing order, so an id
// above the highest one announced is a protocol violation.
const (
	protocolVersion = 1

	msgPartitionRequest       = 1
	msgAddCredit              = 2
	msgCancelPartitionRequest = 3
	msgCloseRequest           = 4
	msgBufferResponse         = 5
	msgErrorResponse          = 6

	frameHeaderSize          = 9
	bufferResponseHeaderSize = 9
	fatalReceiverID          = ^uint32(0)

	flagEvent             = 1
	flagPriority          = 2
	flagPartitionNotFound = 1

	// maxPendingPriority bounds the priority events a remote channel holds
	// before the consumer took them (they need no credit).
	maxPendingPriority = 64

	maxCredit = 1 << 20
)

var magic = [5]byte{'G', 'O', 'F', 'L', protocolVersion}

// ProtocolError is a peer's violation of the wire protocol; the connection
// is closed.
type ProtocolError struct {
	Peer string
	Msg  string
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("network: protocol violation by %s: %s", e.Peer, e.Msg)
}

func readMagic(r io.Reader, peer string) error {
	var m [5]byte
	if _, err := io.ReadFull(r, m[:]); err != nil {
		return fmt.Errorf("network: reading handshake from %s: %w", peer, err)
	}
	if m[0] != 'G' || m[1] != 'O' || m[2] != 'F' || m[3] != 'L' {
		return &ProtocolError{peer, fmt.Sprintf("bad magic %q", m[:4])}
	}
	if m[4] != protocolVersion {
		return &ProtocolError{peer, fmt.Sprintf("unsupported protocol version %d (want %d)", m[4], protocolVersion)}
	}
	return nil
}

type frameHeader struct {
	typ    uint8
	id     uint32
	length int
}

func readFrameHeader(r *bufio.Reader, maxFrame int, peer string) (frameHeader, error) {
	var h [frameHeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return frameHeader{}, err
	}
	fh := frameHeader{typ: h[0], id: binary.BigEndian.Uint32(h[1:]), length: int(binary.BigEndian.Uint32(h[5:]))}
	if fh.length < 0 || fh.length > maxFrame {
		return fh, &ProtocolError{peer, fmt.Sprintf("frame of %d bytes exceeds the maximum %d", fh.length, maxFrame)}
	}
	return fh, nil
}

func appendFrameHeader(b []byte, typ uint8, id uint32, length int) []byte {
	b = append(b, typ)
	b = binary.BigEndian.AppendUint32(b, id)
	return binary.BigEndian.AppendUint32(b, uint32(length))
}
