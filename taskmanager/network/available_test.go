package network

import (
	"testing"
)

// TestPartitionAvailableAndOverdraft: Available is nil while the pool has
// a free buffer and a channel once it is exhausted, which closes when the
// consumer recycles one; a writer that waits for it may use up to
// OverdraftBuffers more buffers without blocking.
func TestPartitionAvailableAndOverdraft(t *testing.T) {
	cfg := Config{BufferSize: 128, BuffersPerChannel: 2, FloatingBuffersPerGate: 1, BuffersPerPartition: 3, FlushTimeout: FlushNever}
	env := newEnv(t, cfg)
	ctx := testCtx(t)
	p, err := env.CreateResultPartition(ctx, "avail", Pipelined, 1)
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Available(); c != nil {
		t.Fatal("a fresh partition is not available")
	}
	// One record per buffer: 100 bytes (104 framed) of 128.
	rec := make([]byte, 0, 100)
	i := 0
	for p.Available() == nil {
		if i > 3 {
			t.Fatalf("still available after %d buffers, pool of 3", i)
		}
		if err := p.Emit(0, record(rec, 0, i, 100)); err != nil {
			t.Fatal(err)
		}
		i++
	}
	if st := p.pool.Stats(); st.InUse != 3 {
		t.Fatalf("unavailable with %d buffers in use, want 3 (the pool)", st.InUse)
	}
	avail := p.Available()
	// Overdraft: these do not block although the pool is exhausted.
	for j := range OverdraftBuffers {
		if err := p.Emit(0, record(rec, 0, i+j, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if st := p.pool.Stats(); st.InUse <= 3 || st.InUse > 3+OverdraftBuffers {
		t.Fatalf("in use %d, want overdraft buffers in use (pool 3, overdraft %d)", st.InUse, OverdraftBuffers)
	}
	select {
	case <-avail:
		t.Fatal("available before a buffer came back")
	default:
	}
	g, err := env.CreateInputGate("avail-g", []InputChannelSpec{{Partition: "avail", Address: env.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	// Consume until the pool is below its bound again.
	for p.Available() != nil {
		boe, err := g.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if boe.Buffer != nil {
			boe.Buffer.Recycle()
		}
	}
	select {
	case <-avail:
	default:
		t.Fatal("the availability channel did not close when buffers came back")
	}
	// The time the writer was told to wait is back pressure, as a blocked
	// request is.
	if bp := p.pool.Stats().BackPressed; bp <= 0 {
		t.Fatalf("back-pressured time %v after waiting for availability, want > 0", bp)
	}
}
