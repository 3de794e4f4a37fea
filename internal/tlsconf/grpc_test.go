package tlsconf

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/gofl/gofl/internal/clustertest"
)

type lockedBuffer = clustertest.SyncBuffer

// TestGRPCRefusalsAreLogged: a TLS gRPC server refuses a plain client and
// a client of another CA; the server logs each refusal, the clients log
// why, and the cluster's own client gets through.
func TestGRPCRefusalsAreLogged(t *testing.T) {
	m, other := gen(t), gen(t)
	cfg, _ := m.Config()
	otherCfg, _ := other.Config()
	var srvLog, cliLog lockedBuffer
	srv := grpc.NewServer(grpc.Creds(ServerCredentials(cfg, zerolog.New(&srvLog))))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	call := func(creds grpc.DialOption) error {
		conn, err := grpc.NewClient(ln.Addr().String(), creds)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	if err := call(grpc.WithTransportCredentials(ClientCredentialsLog(nil, zerolog.New(&cliLog)))); err == nil {
		t.Fatal("a plain client got through")
	}
	if err := call(grpc.WithTransportCredentials(ClientCredentialsLog(otherCfg, zerolog.New(&cliLog)))); err == nil {
		t.Fatal("a client of another CA got through")
	}
	if err := call(grpc.WithTransportCredentials(ClientCredentials(cfg))); err != nil {
		t.Fatalf("the cluster's client: %v", err)
	}
	for _, want := range []string{"it may require internal TLS, which is off here", "TLS handshake failure on an internal link"} {
		if !strings.Contains(cliLog.String(), want) {
			t.Errorf("client log lacks %q:\n%s", want, cliLog.String())
		}
	}
	if n := strings.Count(srvLog.String(), "internal TLS handshake refused"); n < 2 {
		t.Errorf("server logged %d refusals:\n%s", n, srvLog.String())
	}
}
