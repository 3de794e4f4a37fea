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
