package tlsconf

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"

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

// ClientCredentialsLog is ClientCredentials that also logs on log (Warn)
// why a connection failed: a refused handshake with cfg, or, with cfg nil,
// a peer that hung up before answering (as a peer requiring TLS does),
// the latter once. For processes whose calls are retried quietly (a
// TaskManager registering), so the reason reaches their log.
func ClientCredentialsLog(cfg *tls.Config, log zerolog.Logger) credentials.TransportCredentials {
	if cfg == nil {
		return &plainCreds{TransportCredentials: insecure.NewCredentials(), log: log, warned: &atomic.Bool{}}
	}
	return &loggingCreds{TransportCredentials: credentials.NewTLS(cfg), client: true, log: log, logClient: true}
}

type loggingCreds struct {
	credentials.TransportCredentials
	log       zerolog.Logger
	client    bool
	logClient bool
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
		if c.logClient {
			c.log.Warn().Str("peer", authority).Err(err).Msg("internal TLS handshake failed")
		}
	}
	return conn, info, err
}

func (c *loggingCreds) Clone() credentials.TransportCredentials {
	return &loggingCreds{TransportCredentials: c.TransportCredentials.Clone(), log: c.log, client: c.client, logClient: c.logClient}
}

// plainCreds watch a plain-text connection's first read: a peer that
// closes it (or sends a TLS alert) before any byte of HTTP/2 is likely
// one that requires TLS.
type plainCreds struct {
	credentials.TransportCredentials
	log    zerolog.Logger
	warned *atomic.Bool
}

func (c *plainCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		return conn, info, err
	}
	return &sniffConn{Conn: conn, creds: c, peer: authority}, info, nil
}

func (c *plainCreds) Clone() credentials.TransportCredentials {
	return &plainCreds{TransportCredentials: c.TransportCredentials.Clone(), log: c.log, warned: c.warned}
}

type sniffConn struct {
	net.Conn
	creds *plainCreds
	peer  string
	seen  atomic.Bool // a first read happened
}

func (s *sniffConn) Read(b []byte) (int, error) {
	n, err := s.Conn.Read(b)
	if s.seen.CompareAndSwap(false, true) {
		hungUp := n == 0 && err != nil && !errors.Is(err, net.ErrClosed)
		alert := n > 0 && b[0] == 0x15 // a TLS alert record
		if (hungUp || alert) && s.creds.warned.CompareAndSwap(false, true) {
			s.creds.log.Warn().Str("peer", s.peer).AnErr("read", err).
				Msg("the peer closed the connection before answering: it may require internal TLS, which is off here (security.ssl.internal.enabled)")
		}
	}
	return n, err
}
