package network

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// deadAddr returns a loopback address with nothing listening.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// eventually polls cond until it holds, failing after a generous deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// connErrorOf checks that err is a PartitionConnectionError for the
// partition, classified as missing partition data, and returns it. lost
// is the expected Lost, or nil for either.
func connErrorOf(t *testing.T, err error, id ResultPartitionID, remote string, lost *bool) *PartitionConnectionError {
	t.Helper()
	var pce *PartitionConnectionError
	if !errors.As(err, &pce) {
		t.Fatalf("got %v (%T), want a *PartitionConnectionError", err, err)
	}
	if pce.ID != id || pce.Remote != remote || lost != nil && pce.Lost != *lost {
		t.Errorf("got partition %q at %q lost=%v, want %q at %q (%v)", pce.ID, pce.Remote, pce.Lost, id, remote, err)
	}
	if !errors.Is(err, ErrPartitionNotFound) || !errors.Is(err, ErrPartitionConnection) {
		t.Errorf("errors.Is ErrPartitionNotFound/ErrPartitionConnection false for %v", err)
	}
	var pe PartitionException
	if !errors.As(err, &pe) || pe.ConsumedPartition().Partition != id {
		t.Errorf("PartitionException of %v names %v, want %q", err, pe, id)
	}
	return pce
}

var lost, notLost = true, false

func remoteChannel(g *InputGate, i int) *remoteInputChannel {
	return g.channels[i].(*remoteInputChannel)
}

func (ch *remoteInputChannel) failure() error {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.err
}

func (ch *remoteInputChannel) gotEndOfPartition() bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.eop
}

// TestConnectRefused: a producer address with nothing listening fails the
// gate with a PartitionConnectionError naming the channel's partition.
func TestConnectRefused(t *testing.T) {
	cons := newEnv(t, Config{})
	addr := deadAddr(t)
	g, err := cons.CreateInputGate("g", []InputChannelSpec{{Partition: "p0", Address: addr}, {Partition: "p1", Subpartition: 1, Address: addr}})
	if err == nil {
		g.Close()
		t.Fatal("gate created against a dead address")
	}
	var ce *ChannelError
	if !errors.As(err, &ce) || ce.Channel != 0 {
		t.Errorf("got %v, want a ChannelError of channel 0", err)
	}
	connErrorOf(t, err, "p0", addr, &notLost)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("%v does not wrap ECONNREFUSED", err)
	}
	want := fmt.Sprintf("cannot connect to producer of partition p0 at %s: connection refused", addr)
	if !strings.Contains(err.Error(), want) {
		t.Errorf("got %q, want it to contain %q", err, want)
	}
	if c, _, _ := cons.ConnectionManager().ConnectionCounts(); c != 0 {
		t.Errorf("%d client connections after a refused connect", c)
	}
}

// TestConnectRefusedOnRetry: a producer that answered "not found" and then
// died fails the retrying channel as unreachable, not as a plain error.
func TestConnectRefusedOnRetry(t *testing.T) {
	cons := newEnv(t, Config{PartitionRequestInitialBackoff: time.Millisecond, PartitionRequestMaxBackoff: time.Second})
	prod := newEnv(t, Config{})
	addr := prod.Addr()
	g, err := cons.CreateInputGate("g", []InputChannelSpec{{Partition: "later", Address: addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ch := remoteChannel(g, 0)
	eventually(t, "the not-found answer", func() bool {
		ch.mu.Lock()
		defer ch.mu.Unlock()
		return ch.retries > 0
	})
	prod.Close()
	_, err = g.NextRecord(testCtx(t))
	// A retry in flight when the producer closed sees the connection
	// break; later ones are refused.
	pce := connErrorOf(t, err, "later", addr, nil)
	if r := connReason(pce.Err); !pce.Lost && r != "connection refused" {
		t.Errorf("reason %q, want connection refused", r)
	}
}

// TestConnectionLostMidStream: the producer's runner goes away while the
// channels of two gates, multiplexed on one connection, still expect data:
// each fails with its own partition, except the one that already received
// EndOfPartition, which ends cleanly.
func TestConnectionLostMidStream(t *testing.T) {
	ctx := testCtx(t)
	prod, cons := newEnv(t, Config{}), newEnv(t, Config{})
	addr := prod.Addr()
	ids := []ResultPartitionID{"a0", "a1", "b0", "b1"}
	for _, id := range ids {
		p, err := prod.CreateResultPartition(ctx, id, Pipelined, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Emit(0, []byte(id)); err != nil {
			t.Fatal(err)
		}
		if id != "a0" {
			p.Flush()
		} else if err := p.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	ga, err := cons.CreateInputGate("a", []InputChannelSpec{{Partition: "a0", Address: addr}, {Partition: "a1", Address: addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer ga.Close()
	gb, err := cons.CreateInputGate("b", []InputChannelSpec{{Partition: "b0", Address: addr}, {Partition: "b1", Address: addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer gb.Close()
	// Data flows on every channel of gate b.
	seen := map[string]bool{}
	for len(seen) < 2 {
		r, err := gb.NextRecord(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r.Event == nil {
			seen[string(r.Record)] = true
		}
	}
	eventually(t, "a0's EndOfPartition", remoteChannel(ga, 0).gotEndOfPartition)
	if c, _, dials := cons.ConnectionManager().ConnectionCounts(); c != 1 || dials != 1 {
		t.Fatalf("%d client connections, %d dials; want one shared connection", c, dials)
	}

	prod.Close() // the producer's runner exits: its server connections close

	for _, g := range []*InputGate{ga, gb} {
		for i := range g.NumChannels() {
			if g == ga && i == 0 {
				continue
			}
			ch := remoteChannel(g, i)
			eventually(t, fmt.Sprintf("the failure of %s", ch.spec.Partition), func() bool { return ch.failure() != nil })
			connErrorOf(t, ch.failure(), ch.spec.Partition, addr, &lost)
		}
	}
	if err := remoteChannel(ga, 0).failure(); err != nil {
		t.Errorf("a0 received EndOfPartition, yet failed with %v", err)
	}
	// Through the gate: gate b fails naming one of its own partitions.
	for {
		_, err = gb.NextRecord(ctx)
		if err != nil {
			break
		}
	}
	var ce *ChannelError
	if !errors.As(err, &ce) {
		t.Fatalf("gate b: got %v, want a ChannelError", err)
	}
	pce := connErrorOf(t, err, ce.Spec.Partition, addr, &lost)
	if pce.ID != "b0" && pce.ID != "b1" {
		t.Errorf("gate b failed for %s", pce.ID)
	}
	if want := fmt.Sprintf("lost connection to producer of partition %s at %s: ", pce.ID, addr); !strings.Contains(err.Error(), want) {
		t.Errorf("got %q, want it to contain %q", err, want)
	}
}

// TestProducerProcessKilled: the producer is another process that dies
// while the consumer reads; the consumer fails as missing partition data.
func TestProducerProcessKilled(t *testing.T) {
	cmd, addr, stdin := startProducerCmd(t, 1<<30, 100)
	defer stdin.Close()
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	cons := newEnv(t, Config{})
	g, err := cons.CreateInputGate("g", []InputChannelSpec{{Partition: "bench", Address: addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx := testCtx(t)
	for range 1000 {
		if _, err := g.NextRecord(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed = true
	for err == nil {
		_, err = g.NextRecord(ctx)
	}
	if err == io.EOF {
		t.Fatal("a killed producer's partition ended cleanly")
	}
	pce := connErrorOf(t, err, "bench", addr, &lost)
	t.Logf("%v (reason %q)", err, connReason(pce.Err))
}

// TestConnectionResetAndHandshakeFailures: a reset mid-stream, a peer that
// closes before the handshake, and one that never answers it.
func TestConnectionResetAndHandshakeFailures(t *testing.T) {
	rec := append(u32s(3), "abc"...)
	t.Run("reset mid-stream", func(t *testing.T) {
		reset := make(chan struct{})
		addr, _ := fakeServer(t, func(c net.Conn, id uint32) {
			c.Write(magic[:])
			c.Write(bufferResponse(id, 0, 0, rec))
			<-reset
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
		})
		cons := newEnv(t, Config{FlushTimeout: FlushNever})
		g, err := cons.CreateInputGate("g", []InputChannelSpec{{Partition: "p", Address: addr}})
		if err != nil {
			close(reset)
			t.Fatal(err)
		}
		defer g.Close()
		ctx := testCtx(t)
		r, err := g.NextRecord(ctx)
		close(reset)
		if err != nil || string(r.Record) != "abc" {
			t.Fatalf("got %q %v", r.Record, err)
		}
		for err == nil {
			_, err = g.NextRecord(ctx)
		}
		pce := connErrorOf(t, err, "p", addr, &lost)
		if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
			t.Errorf("got %v, want a reset", err)
		}
		t.Log(pce)
	})
	t.Run("closed before handshake", func(t *testing.T) {
		addr, _ := fakeServer(t, func(c net.Conn, id uint32) { c.Close() })
		cons := newEnv(t, Config{})
		g, err := cons.CreateInputGate("g", []InputChannelSpec{{Partition: "p", Address: addr}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		_, err = g.NextRecord(testCtx(t))
		connErrorOf(t, err, "p", addr, &notLost)
		if want := "cannot connect to producer of partition p at " + addr + ": connection closed by peer"; !strings.Contains(err.Error(), want) {
			t.Errorf("got %q, want it to contain %q", err, want)
		}
	})
	t.Run("no handshake", func(t *testing.T) {
		addr, _ := fakeServer(t, func(c net.Conn, id uint32) {})
		cons := newEnv(t, Config{ConnectTimeout: 300 * time.Millisecond})
		g, err := cons.CreateInputGate("g", []InputChannelSpec{{Partition: "p", Address: addr}})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		_, err = g.NextRecord(testCtx(t))
		connErrorOf(t, err, "p", addr, &notLost)
		if want := "cannot connect to producer of partition p at " + addr + ": i/o timeout"; !strings.Contains(err.Error(), want) {
			t.Errorf("got %q, want it to contain %q", err, want)
		}
	})
}

// TestCleanEndThenProducerGone: channels that received EndOfPartition
// deliver every record and io.EOF even though the producer's runner closed
// the connection before the consumer read them.
func TestCleanEndThenProducerGone(t *testing.T) {
	ctx := testCtx(t)
	prod, cons := newEnv(t, Config{}), newEnv(t, Config{})
	addr := prod.Addr()
	for _, id := range []ResultPartitionID{"c0", "c1"} {
		p, err := prod.CreateResultPartition(ctx, id, Pipelined, 1)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if err := p.Emit(0, fmt.Appendf(nil, "%s-%d", id, i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	g, err := cons.CreateInputGate("g", []InputChannelSpec{{Partition: "c0", Address: addr}, {Partition: "c1", Address: addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for i := range 2 {
		eventually(t, "EndOfPartition", remoteChannel(g, i).gotEndOfPartition)
	}
	prod.Close()
	eventually(t, "the connection to close", func() bool {
		c, _, _ := cons.ConnectionManager().ConnectionCounts()
		return c == 0
	})
	got := 0
	drain(ctx, t, g, func(int, []byte) { got++ }, nil)
	if got != 6 {
		t.Errorf("got %d records, want 6", got)
	}
}

// TestConnectionManagerCloseIsNotMissingData: this runner shutting down is
// not the producer's fault.
func TestConnectionManagerCloseIsNotMissingData(t *testing.T) {
	ctx := testCtx(t)
	prod := newEnv(t, Config{})
	cons, err := NewShuffleEnvironment(Config{SpillDir: t.TempDir()}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := cons.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	if _, err := prod.CreateResultPartition(ctx, "x", Pipelined, 1); err != nil {
		t.Fatal(err)
	}
	g, err := cons.CreateInputGate("g", []InputChannelSpec{{Partition: "x", Address: prod.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	cons.Close()
	ch := remoteChannel(g, 0)
	eventually(t, "the channel to fail", func() bool { return ch.failure() != nil })
	if err := ch.failure(); errors.Is(err, ErrPartitionNotFound) || !errors.Is(err, errManagerClosed) {
		t.Errorf("got %v, want the manager-closed error, not missing data", err)
	}
}
