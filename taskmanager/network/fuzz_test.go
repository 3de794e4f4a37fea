package network

import (
	"io"
	"net"
	"testing"
	"time"
)

// FuzzDecodeEvent: any bytes decode to an event or an error, and a decoded
// event encodes back to the same bytes.
func FuzzDecodeEvent(f *testing.F) {
	f.Add(EncodeEvent(EndOfPartition{}))
	f.Add(EncodeEvent(CheckpointBarrier{CheckpointID: 7, Timestamp: 9}))
	f.Add(EncodeEvent(CancelCheckpointMarker{CheckpointID: 3}))
	f.Add([]byte{byte(FirstCustomKind), 1, 2})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := DecodeEvent(b)
		if err != nil {
			return
		}
		if got := EncodeEvent(ev); string(got) != string(b) {
			t.Fatalf("DecodeEvent(%x) = %#v, which encodes to %x", b, ev, got)
		}
	})
}

// FuzzServerFrames feeds a data server a handshake and arbitrary frames:
// it must never crash, and must close or keep the connection without
// hanging the test (the read deadline bounds a well-formed idle stream).
func FuzzServerFrames(f *testing.F) {
	f.Add(frame(msgPartitionRequest, 0, append(u32s(0, 1), "nope"...)))
	f.Add(frame(msgAddCredit, 0, u32s(1)))
	f.Add(append(frame(msgPartitionRequest, 1, append(u32s(0, 2), "p"...)), frame(msgCancelPartitionRequest, 1, nil)...))
	f.Add(frame(msgCloseRequest, 0, nil))
	f.Add(appendFrameHeader(nil, msgPartitionRequest, 0, 1<<31-1))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	env := newEnv(f, Config{})
	f.Fuzz(func(t *testing.T, input []byte) {
		c, err := net.Dial("tcp", env.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = c.Write(append(append([]byte{}, magic[:]...), input...))
		_ = c.(*net.TCPConn).CloseWrite() // EOF: the server ends the connection at once
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, _ = io.Copy(io.Discard, c)
	})
}
