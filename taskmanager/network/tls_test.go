package network

import (
	"bytes"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/internal/tlsconf"
)

func clusterTLS(t *testing.T) *tls.Config {
	t.Helper()
	m, err := tlsconf.Generate("c", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := m.Config()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestTLSDataPlane: runners of one cluster exchange records over mutual
// TLS; a runner with another cluster's certificate cannot connect, and
// the error says it was the TLS handshake.
func TestTLSDataPlane(t *testing.T) {
	cluster := clusterTLS(t)
	prod := newEnv(t, Config{TLS: cluster})
	cons := newEnv(t, Config{TLS: cluster})
	ctx := testCtx(t)
	rp, err := prod.CreateResultPartition(ctx, "p0", Pipelined, 1)
	if err != nil {
		t.Fatal(err)
	}
	g, err := cons.CreateInputGate("g", []InputChannelSpec{{Partition: "p0", Address: prod.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	go func() {
		for i := range 100 {
			if err := rp.Emit(0, record(nil, 0, i, 64)); err != nil {
				t.Error(err)
				return
			}
		}
		if err := rp.Finish(); err != nil {
			t.Error(err)
		}
	}()
	n := 0
	drain(ctx, t, g, func(_ int, rec []byte) {
		if !bytes.Equal(rec, record(nil, 0, n, 64)) {
			t.Errorf("record %d corrupted", n)
		}
		n++
	}, nil)
	if n != 100 {
		t.Fatalf("got %d records over TLS, want 100", n)
	}

	intruder := newEnv(t, Config{TLS: clusterTLS(t)})
	g2, err := intruder.CreateInputGate("g2", []InputChannelSpec{{Partition: "p0", Address: prod.Addr()}})
	if err == nil {
		g2.Close()
		t.Fatal("a runner with another cluster's certificate connected")
	}
	if !strings.Contains(err.Error(), "TLS handshake failure") || !strings.Contains(err.Error(), "security.ssl.internal") {
		t.Fatalf("the error does not say why: %v", err)
	}
}
