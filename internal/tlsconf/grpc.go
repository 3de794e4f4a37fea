package tlsconf

import (
	"context"
	"crypto/tls"
	"net"

	"github.com/rs/zerolog"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// ServerCredentials are a gRPC server's transport credentials: mutual TLS
// with cfg, or plain text when cfg is nil. A refused handshake is logged
// on log (Warn, with the peer's address and why), since gRPC itself only
// closes the connection.
func ServerCredentials(cfg *tls.Config, log zerolog.Logger) credentials.TransportCredentials {
	if cfg == nil {
		return insecure.NewCredentials()
	}
	return &loggingCreds{TransportCredentials: credentials.NewTLS(cfg), log: log}
}

// ClientCredentials are a gRPC client's transport credentials: mutual TLS
// with cfg, or plain text when cfg is nil. A failed handshake's error says
// it was one (Explain).
func ClientCredentials(cfg *tls.Config) credentials.TransportCredentials {
	if cfg == nil {
		return insecure.NewCredentials()
	}
	return &loggingCreds{TransportCredentials: credentials.NewTLS(cfg), client: true}
}

type loggingCreds struct {
	credentials.TransportCredentials
	log    zerolog.Logger
	client bool
}

func (c *loggingCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		c.log.Warn().Str("peer", raw.RemoteAddr().String()).Err(err).
			Msg("internal TLS handshake refused: the peer has no certificate of this cluster's CA (security.ssl.internal.*)")
	}
	return conn, info, err
}

func (c *loggingCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		err = Explain(err, true)
	}
	return conn, info, err
}

func (c *loggingCreds) Clone() credentials.TransportCredentials {
	return &loggingCreds{TransportCredentials: c.TransportCredentials.Clone(), log: c.log, client: c.client}
}
