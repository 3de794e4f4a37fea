package tlsconf

import (
	"context"
	"crypto/tls"
	"fmt"

	"github.com/gofl/gofl/conf"
)

var restSet = set{conf.SSLRestKeystore, conf.SSLRestKeystorePassword, conf.SSLRestKeyPassword,
	conf.SSLRestTruststore, conf.SSLRestTruststorePassword, conf.SSLRestCert, conf.SSLRestKey, conf.SSLRestCA}

// RESTServer is the REST server's TLS configuration, or nil when
// security.ssl.rest.enabled is off. With
// security.ssl.rest.authentication-enabled it requires client certificates
// chaining to the REST truststore (or CA).
func RESTServer(ctx context.Context, c *conf.Configuration, read ReadFunc) (*tls.Config, error) {
	if !conf.SSLRestEnabled.Get(c) {
		return nil, nil
	}
	auth := conf.SSLRestAuthenticationEnabled.Get(c)
	m, err := load(ctx, c, read, restSet, true, auth)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: REST TLS (security.ssl.rest.enabled): %w", err)
	}
	cert, err := tls.X509KeyPair(m.Cert, m.Key)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: REST TLS: certificate and key: %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if auth {
		p, err := m.pool()
		if err != nil {
			return nil, fmt.Errorf("tlsconf: REST TLS (security.ssl.rest.authentication-enabled): %w", err)
		}
		cfg.ClientCAs, cfg.ClientAuth = p, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// RESTClient is a REST client's TLS configuration, or nil when
// security.ssl.rest.enabled is off: it trusts the REST truststore (or CA),
// else the system roots, and presents the REST keystore (or cert/key)
// when security.ssl.rest.authentication-enabled is on. Host names are
// checked as usual on the web.
func RESTClient(ctx context.Context, c *conf.Configuration, read ReadFunc) (*tls.Config, error) {
	if !conf.SSLRestEnabled.Get(c) {
		return nil, nil
	}
	auth := conf.SSLRestAuthenticationEnabled.Get(c)
	m, err := load(ctx, c, read, restSet, auth, false)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: REST TLS (security.ssl.rest.enabled): %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(m.CA) > 0 {
		if cfg.RootCAs, err = m.pool(); err != nil {
			return nil, fmt.Errorf("tlsconf: REST TLS: %w", err)
		}
	}
	if auth {
		cert, err := tls.X509KeyPair(m.Cert, m.Key)
		if err != nil {
			return nil, fmt.Errorf("tlsconf: REST TLS: client certificate and key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
