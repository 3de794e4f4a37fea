package network

import (
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// TestPriorityEventOvertakes: with the consumer not reading, a remote and a
// local channel hold records at both ends (the remote receiver without
// credit left). A priority event overtakes the producer's queued buffers
// (returned as in-flight data, still delivered after it) and, at the
// consumer, the buffers received but not read: NextRecord returns it
// first, then the overtaken records up to its position marker, then the
// rest, every record exactly once and in order.
func TestPriorityEventOvertakes(t *testing.T) {
	cfg := Config{BufferSize: 256, BuffersPerChannel: 2, FloatingBuffersPerGate: 1, BuffersPerPartition: 12, FlushTimeout: FlushNever}
	prod, cons := newEnv(t, cfg), newEnv(t, cfg)
	ctx := testCtx(t)
	for _, tc := range []struct {
		name string
		env  *ShuffleEnvironment
	}{{"remote", prod}, {"local", cons}} {
		t.Run(tc.name, func(t *testing.T) {
			pid := ResultPartitionID("prio-" + tc.name)
			p, err := tc.env.CreateResultPartition(ctx, pid, Pipelined, 1)
			if err != nil {
				t.Fatal(err)
			}
			g, err := cons.CreateInputGate("g-"+tc.name, []InputChannelSpec{{Partition: pid, Address: tc.env.Addr()}})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			// 10 records of 60 bytes (64 framed) fill 4 per buffer: 8
			// buffers, less than the pool, so Emit never blocks.
			const n, size = 32, 60
			rec := make([]byte, 0, size)
			for i := range n {
				if err := p.Emit(0, record(rec, 0, i, size)); err != nil {
					t.Fatal(err)
				}
			}
			p.Flush()
			if tc.name == "remote" {
				// The receiver holds its credit's worth; the rest waits at
				// the producer for credit that does not come.
				rc := g.channels[0].(*remoteInputChannel)
				waitUntil(t, "the receiver used its credit", func() bool {
					rc.mu.Lock()
					defer rc.mu.Unlock()
					return len(rc.received)-rc.head >= cfg.BuffersPerChannel && len(rc.free) == 0
				})
			}
			queued := p.Metrics().QueuedBuffers
			if queued == 0 {
				t.Fatal("nothing queued at the producer")
			}
			over, err := p.EmitPriorityEvent(0, CustomEvent{EventKind: FirstCustomKind + 7, Payload: []byte("barrier")})
			if err != nil {
				t.Fatal(err)
			}
			var overSeq []int
			for _, b := range over {
				if b.IsEvent {
					t.Fatalf("overtook an event")
				}
				for d := b.Data; len(d) > 0; {
					l := int(binary.BigEndian.Uint32(d))
					overSeq = append(overSeq, int(binary.BigEndian.Uint64(d[8:])))
					d = d[4+l:]
				}
			}
			if len(overSeq) == 0 || overSeq[len(overSeq)-1] != n-1 {
				t.Fatalf("overtaken records %v, want a tail of 0..%d", overSeq, n-1)
			}
			if err := p.Finish(); err != nil {
				t.Fatal(err)
			}
			// It needs no credit to arrive.
			waitUntil(t, "the priority event arrived", func() bool { return g.prioCount.Load() > 0 })
			// The event comes first, then what the consumer held, the
			// position, then what the producer held.
			var seqs []int
			prioAt, posAt := -1, -1
			drainAll(t, g, func(r RecordOrEvent) {
				switch {
				case r.Event != nil && r.Priority:
					prioAt = len(seqs)
				case r.Event != nil && r.Position:
					posAt = len(seqs)
				case r.Event == nil:
					seqs = append(seqs, int(binary.BigEndian.Uint64(r.Record[4:])))
				}
			})
			if prioAt != 0 {
				t.Fatalf("priority event delivered after %d records, want first", prioAt)
			}
			if posAt != n-len(overSeq) {
				t.Fatalf("position after %d records, want %d (the %d overtaken at the producer follow it)", posAt, n-len(overSeq), len(overSeq))
			}
			if tc.name == "remote" && posAt < 4 {
				t.Fatalf("the receiver's %d records were not overtaken (position after %d)", 4*cfg.BuffersPerChannel, posAt)
			}
			for i, s := range seqs {
				if s != i {
					t.Fatalf("records %v, want 0..%d in order", seqs, n-1)
				}
			}
			if len(seqs) != n {
				t.Fatalf("%d records, want %d", len(seqs), n)
			}
		})
	}
}

func drainAll(t *testing.T, g *InputGate, f func(RecordOrEvent)) {
	t.Helper()
	ctx := testCtx(t)
	for {
		r, err := g.NextRecord(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return
			}
			t.Fatal(err)
		}
		f(r)
	}
}
