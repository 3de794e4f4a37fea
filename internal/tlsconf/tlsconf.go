// Package tlsconf builds the TLS configurations of gofl's internal links
// (Flink's security.ssl.internal.*: mutual TLS between JobManager,
// TaskManagers and job runners) and of its REST API (security.ssl.rest.*),
// from PEM files or PKCS12 keystores, and generates a per-cluster CA.
//
// Internal TLS trusts exactly the configured CA and checks no host name,
// as Flink's internal SSL does: a cluster's peers are reached by
// addresses nobody knows at deploy time (a Nomad node's), and any
// certificate of the per-cluster CA belongs to the cluster.
package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	pkcs12 "software.sslmate.com/src/go-pkcs12"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/storage"
)

// ReadFunc reads a file named by a path or URI (the cluster's staging
// area). Blocking; called once per file while a configuration is loaded.
type ReadFunc func(ctx context.Context, name string) ([]byte, error)

// ReadLocal is a ReadFunc for local paths only.
func ReadLocal(_ context.Context, name string) ([]byte, error) { return os.ReadFile(name) }

// ReadStorage is a ReadFunc for local paths and file:// or hdfs:// URIs,
// opened with opts (the process's fs.hdfs.* and Kerberos settings).
func ReadStorage(opts storage.Options) ReadFunc {
	return func(ctx context.Context, name string) ([]byte, error) {
		if !strings.Contains(name, "://") {
			return os.ReadFile(name)
		}
		fsys, p, err := storage.Open(ctx, name, opts)
		if err != nil {
			return nil, err
		}
		defer fsys.Close()
		return storage.ReadFile(ctx, fsys, p)
	}
}

// Material is one party's PEM certificate chain and key and the PEM CA
// certificates its peers must chain to. It holds a private key: never log
// it.
type Material struct {
	Cert, Key, CA []byte
}

// Internal loads the internal TLS material of c, or nil when
// security.ssl.internal.enabled is off (a provider-deployed cluster's
// client sets it, see conf.SSLInternalOn). On, it needs a keystore or
// cert/key and a truststore or CA; errors name the missing option.
func Internal(ctx context.Context, c *conf.Configuration, read ReadFunc) (*Material, error) {
	if !conf.SSLInternalEnabled.Get(c) {
		return nil, nil
	}
	m, err := load(ctx, c, read, set{conf.SSLInternalKeystore, conf.SSLInternalKeystorePassword, conf.SSLInternalKeyPassword,
		conf.SSLInternalTruststore, conf.SSLInternalTruststorePassword, conf.SSLInternalCert, conf.SSLInternalKey, conf.SSLInternalCA}, true, true)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: internal TLS (security.ssl.internal.enabled): %w", err)
	}
	if _, err := m.Config(); err != nil {
		return nil, fmt.Errorf("tlsconf: internal TLS (security.ssl.internal.enabled): %w", err)
	}
	return m, nil
}

// set names the options of one kind of TLS.
type set struct {
	keystore, keystorePass, keyPass, truststore, truststorePass, cert, key, ca *conf.Option[string]
}

func load(ctx context.Context, c *conf.Configuration, read ReadFunc, s set, needKey, needCA bool) (*Material, error) {
	m := &Material{}
	switch {
	case s.cert.Get(c) != "" || s.key.Get(c) != "":
		if s.cert.Get(c) == "" || s.key.Get(c) == "" {
			return nil, fmt.Errorf("%s and %s go together", s.cert.Key(), s.key.Key())
		}
		var err error
		if m.Cert, err = read(ctx, s.cert.Get(c)); err != nil {
			return nil, fmt.Errorf("%s: %w", s.cert.Key(), err)
		}
		if m.Key, err = read(ctx, s.key.Get(c)); err != nil {
			return nil, fmt.Errorf("%s: %w", s.key.Key(), err)
		}
	case s.keystore.Get(c) != "":
		b, err := read(ctx, s.keystore.Get(c))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.keystore.Key(), err)
		}
		pass := s.keystorePass.Get(c)
		key, cert, chain, err := pkcs12.DecodeChain(b, pass)
		if err != nil && s.keyPass.Get(c) != "" {
			key, cert, chain, err = pkcs12.DecodeChain(b, s.keyPass.Get(c))
		}
		if err != nil {
			return nil, fmt.Errorf("%s (password %s): %w", s.keystore.Key(), s.keystorePass.Key(), err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.keystore.Key(), err)
		}
		m.Key = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
		for _, x := range append([]*x509.Certificate{cert}, chain...) {
			m.Cert = append(m.Cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: x.Raw})...)
		}
	case needKey:
		return nil, fmt.Errorf("no certificate: set %s (with %s) or %s and %s", s.keystore.Key(), s.keystorePass.Key(), s.cert.Key(), s.key.Key())
	}
	switch {
	case s.ca.Get(c) != "":
		var err error
		if m.CA, err = read(ctx, s.ca.Get(c)); err != nil {
			return nil, fmt.Errorf("%s: %w", s.ca.Key(), err)
		}
	case s.truststore.Get(c) != "":
		b, err := read(ctx, s.truststore.Get(c))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.truststore.Key(), err)
		}
		certs, err := pkcs12.DecodeTrustStore(b, s.truststorePass.Get(c))
		if err != nil {
			return nil, fmt.Errorf("%s (password %s): %w", s.truststore.Key(), s.truststorePass.Key(), err)
		}
		for _, x := range certs {
			m.CA = append(m.CA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: x.Raw})...)
		}
	case needCA:
		return nil, fmt.Errorf("no CA: set %s (with %s) or %s", s.truststore.Key(), s.truststorePass.Key(), s.ca.Key())
	}
	return m, nil
}

// pool parses the CA certificates.
func (m *Material) pool() (*x509.CertPool, error) {
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(m.CA) {
		return nil, errors.New("the CA file holds no PEM certificate")
	}
	return p, nil
}

// Config is the mutual TLS configuration of an internal link, for both
// sides: it presents m's certificate, requires the peer's, and accepts a
// peer whose chain ends at m's CA, whatever its host name (see the package
// doc). Servers and clients use the same value.
func (m *Material) Config() (*tls.Config, error) {
	cert, err := tls.X509KeyPair(m.Cert, m.Key)
	if err != nil {
		return nil, fmt.Errorf("certificate and key: %w", err)
	}
	p, err := m.pool()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientCAs:    p,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		// Each job opens new connections between the same processes
		// (JobMaster<->TaskManager): resuming a session skips the
		// certificate signatures and chain checks of a full handshake
		// (VerifyConnection still runs, on the session's certificates).
		ClientSessionCache: tls.NewLRUClientSessionCache(256),
		// The client's check of the server's chain is VerifyConnection's:
		// the standard one would compare host names.
		InsecureSkipVerify: true, //nolint:gosec // verified below against the cluster CA
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("tlsconf: the peer sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: p, Intermediates: inter,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
			if err != nil {
				return fmt.Errorf("tlsconf: the peer's certificate is not one of this cluster's (security.ssl.internal.*): %w", err)
			}
			return nil
		},
	}, nil
}

// Handshake failures are recognised by their text: gRPC flattens the
// errors of its transport into strings.
var handshakeMarks = []string{"tls:", "authentication handshake failed", "x509:", "tlsconf:", "first record does not look like a TLS handshake"}

// IsHandshakeFailure reports whether err looks like a failed TLS handshake.
func IsHandshakeFailure(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	for _, m := range handshakeMarks {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// Explain wraps the error of an internal call with what to check when it
// failed for TLS: a failed handshake (tlsOn), or, with TLS off here, a
// peer that closed the connection before answering, as a peer requiring
// TLS does. Other errors are returned as they are.
func Explain(err error, tlsOn bool) error {
	if err == nil {
		return nil
	}
	if !tlsOn {
		if strings.Contains(err.Error(), "server preface") {
			return fmt.Errorf("the peer closed the connection before answering: it may require internal TLS, which is off here (security.ssl.internal.enabled): %w", err)
		}
		return err
	}
	if !IsHandshakeFailure(err) || strings.Contains(err.Error(), "TLS handshake failure") {
		return err
	}
	return fmt.Errorf("TLS handshake failure on an internal link: both sides need security.ssl.internal.enabled and a certificate of the cluster's CA (security.ssl.internal.*): %w", err)
}
