package network

import (
	"context"
	"encoding/binary"
	"io"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(producerEnv) != "" {
		os.Exit(runProducerProcess())
	}
	goleak.VerifyTestMain(m)
}

func testLogger(t testing.TB) zerolog.Logger {
	if testing.Verbose() {
		return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
	}
	return zerolog.Nop()
}

func newEnv(t testing.TB, cfg Config) *ShuffleEnvironment {
	t.Helper()
	if cfg.SpillDir == "" {
		cfg.SpillDir = t.TempDir()
	}
	e, err := NewShuffleEnvironment(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// record encodes (producer, sequence) plus padding.
func record(buf []byte, producer, seq int, size int) []byte {
	buf = buf[:0]
	buf = binary.BigEndian.AppendUint32(buf, uint32(producer))
	buf = binary.BigEndian.AppendUint64(buf, uint64(seq))
	for len(buf) < size {
		buf = append(buf, byte(len(buf)))
	}
	return buf
}

// drain reads a gate to EOF, returning records per channel and events.
func drain(ctx context.Context, t testing.TB, g *InputGate, onRec func(ch int, rec []byte), onEv func(ch int, ev Event)) {
	t.Helper()
	for {
		r, err := g.NextRecord(ctx)
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Error(err)
			return
		}
		if r.Event != nil {
			if onEv != nil {
				onEv(r.Channel, r.Event)
			}
			continue
		}
		onRec(r.Channel, r.Record)
	}
}

// waitUntil polls cond until it holds. The deadline only bounds a hang: it
// is generous so that a loaded machine does not fail the test.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// retrying reports whether an input channel was told its partition is not
// there (yet) and scheduled another request.
func retrying(c inputChannel) bool {
	switch c := c.(type) {
	case *localInputChannel:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.retries > 0
	case *remoteInputChannel:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.retries > 0
	}
	return false
}

// writerBlocked reports whether a writer of p waits for a buffer of its
// exhausted pool.
func writerBlocked(p *ResultPartition) bool {
	p.pool.mu.Lock()
	defer p.pool.mu.Unlock()
	return p.pool.waitCh != nil
}
