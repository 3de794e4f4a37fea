package network

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func frame(typ uint8, id uint32, payload []byte) []byte {
	return append(appendFrameHeader(nil, typ, id, len(payload)), payload...)
}

func u32s(vs ...uint32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	return b
}

// TestHostileClient sends malformed input to a data server: each connection
// is closed, and the server keeps serving a well-behaved consumer.
func TestHostileClient(t *testing.T) {
	prod, cons := newEnv(t, Config{}), newEnv(t, Config{})
	ctx := testCtx(t)
	good := magic[:]
	cases := map[string][]byte{
		"garbage":          []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"wrong version":    {'G', 'O', 'F', 'L', 99},
		"oversized length": append(append([]byte{}, good...), appendFrameHeader(nil, msgPartitionRequest, 0, 1<<31-1)...),
		"unknown type":     append(append([]byte{}, good...), frame(77, 0, nil)...),
		"unknown receiver": append(append([]byte{}, good...), frame(msgAddCredit, 5, u32s(1))...),
		"short request":    append(append([]byte{}, good...), frame(msgPartitionRequest, 0, u32s(1))...),
		"reused receiver id": append(append(append([]byte{}, good...),
			frame(msgPartitionRequest, 3, append(u32s(0, 1), "nope"...))...),
			frame(msgPartitionRequest, 3, append(u32s(0, 1), "nope"...))...),
		"huge credit": append(append([]byte{}, good...), frame(msgPartitionRequest, 0, append(u32s(0, 1<<30), "x"...))...),
	}
	for name, input := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("tcp", prod.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.Write(input)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			// The server answers with its handshake, maybe an error
			// response, then closes.
			_, err = io.Copy(io.Discard, c)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("server did not close the connection")
			}
		})
	}
	// Still serving.
	p, _ := prod.CreateResultPartition(ctx, "ok", Pipelined, 1)
	p.Emit(0, []byte("fine"))
	p.Finish()
	g, err := cons.CreateInputGate("g", []InputChannelSpec{{Partition: "ok", Address: prod.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	got := ""
	drain(ctx, t, g, func(_ int, r []byte) { got = string(r) }, nil)
	if got != "fine" {
		t.Errorf("got %q", got)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, servers, _ := prod.ConnectionManager().ConnectionCounts()
		if servers <= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d server connections still open", servers)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fakeServer accepts one connection, reads the handshake and the first
// PartitionRequest and then plays script. hungUp is closed once the client
// closed the connection after the script (or the server gave up on it).
func fakeServer(t *testing.T, script func(c net.Conn, id uint32)) (addr string, hungUp <-chan struct{}) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	conns := make(chan net.Conn, 1)
	t.Cleanup(func() {
		ln.Close()
		select {
		case c := <-conns:
			c.Close()
		default:
		}
		<-done
	})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		conns <- c
		defer c.Close()
		r := bufio.NewReader(c)
		if readMagic(r, "client") != nil {
			return
		}
		h, err := readFrameHeader(r, 1<<16, "client")
		if err != nil || h.typ != msgPartitionRequest {
			return
		}
		r.Discard(h.length)
		script(c, h.id)
		c.SetReadDeadline(time.Now().Add(60 * time.Second))
		io.Copy(io.Discard, c)
	}()
	return ln.Addr().String(), done
}

func bufferResponse(id, seq, backlog uint32, data []byte) []byte {
	p := append(u32s(seq, backlog), 0)
	return frame(msgBufferResponse, id, append(p, data...))
}

// TestHostileServer: a producer that violates the protocol fails the
// consumer's channels with a clear error instead of crashing it.
func TestHostileServer(t *testing.T) {
	cfg := Config{PartitionRequestMaxBackoff: -1}
	rec := append(u32s(3), "abc"...)
	cases := map[string]struct {
		script func(c net.Conn, id uint32)
		want   string
		delay  bool // let the client reject the frames before consuming
	}{
		"wrong magic": {func(c net.Conn, id uint32) { c.Write([]byte("HELLO")) }, "bad magic", false},
		"oversized": {func(c net.Conn, id uint32) {
			c.Write(magic[:])
			c.Write(appendFrameHeader(nil, msgBufferResponse, id, 1<<30))
		}, "exceeds the maximum", false},
		"unknown receiver": {func(c net.Conn, id uint32) {
			c.Write(magic[:])
			c.Write(bufferResponse(id+100, 0, 0, rec))
		}, "unknown receiver", false},
		"out of order": {func(c net.Conn, id uint32) {
			c.Write(magic[:])
			c.Write(bufferResponse(id, 0, 0, rec))
			c.Write(bufferResponse(id, 2, 0, rec))
		}, "out of order", false},
		"no credit": {func(c net.Conn, id uint32) {
			c.Write(magic[:])
			for i := range 20 { // 2 exclusive + 8 floating buffers
				c.Write(bufferResponse(id, uint32(i), 0, rec))
			}
		}, "without credit", true},
		"unknown type": {func(c net.Conn, id uint32) {
			c.Write(magic[:])
			c.Write(frame(msgAddCredit, id, u32s(1)))
		}, "unexpected frame type", false},
		"bad record": {func(c net.Conn, id uint32) {
			c.Write(magic[:])
			c.Write(bufferResponse(id, 0, 0, u32s(1<<31)))
		}, "corrupt record stream", false},
		"garbage event": {func(c net.Conn, id uint32) {
			c.Write(magic[:])
			c.Write(frame(msgBufferResponse, id, append(u32s(0, 0), 1, 9, 9)))
		}, "malformed event", false},
		"remote error": {func(c net.Conn, id uint32) {
			c.Write(magic[:])
			c.Write(errorFrame(id, false, "disk on fire"))
		}, "disk on fire", false},
		"not found": {func(c net.Conn, id uint32) {
			c.Write(magic[:])
			c.Write(errorFrame(id, true, "whatever"))
		}, "partition not found: p", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cons := newEnv(t, cfg)
			addr, hungUp := fakeServer(t, tc.script)
			g, err := cons.CreateInputGate("g", []InputChannelSpec{{Partition: "p", Address: addr}})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			ctx := testCtx(t)
			if tc.delay {
				// The client closes the connection when it finds
				// the violation; consuming earlier would hand out
				// credit.
				select {
				case <-hungUp:
				case <-ctx.Done():
					t.Fatal("the client did not hang up")
				}
			}
			for {
				_, err = g.NextRecord(ctx)
				if err != nil {
					break
				}
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			} else {
				t.Log(err)
			}
		})
	}
}
