package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pkcs12 "software.sslmate.com/src/go-pkcs12"

	"github.com/gofl/gofl/conf"
)

func gen(t *testing.T) *Material {
	t.Helper()
	m, err := Generate("c1", []string{"10.0.0.7", "node-1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// handshake runs one TLS handshake between a server with srv and a
// client with cli over a pipe and returns both sides' errors.
func handshake(t *testing.T, srv, cli *tls.Config) (serverErr, clientErr error) {
	t.Helper()
	// A TCP pair, not net.Pipe: both sides may write an alert at once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	deadline := time.Now().Add(time.Minute)
	_ = a.SetDeadline(deadline)
	_ = b.SetDeadline(deadline)
	done := make(chan error, 1)
	go func() {
		s := tls.Server(a, srv)
		err := s.Handshake()
		if err == nil {
			// TLS 1.3: the server checks the client's certificate after
			// the client finished; read so its verdict reaches the client.
			if _, err = s.Read(make([]byte, 1)); err == nil {
				_, err = s.Write([]byte{2})
			}
		}
		a.Close()
		done <- err
	}()
	c := tls.Client(b, cli)
	clientErr = c.Handshake()
	if clientErr == nil {
		_, clientErr = c.Write([]byte{1})
		if clientErr == nil {
			_, clientErr = c.Read(make([]byte, 1))
		}
	}
	b.Close()
	return <-done, clientErr
}

func TestGeneratedPeersHandshake(t *testing.T) {
	m := gen(t)
	cfg, err := m.Config()
	if err != nil {
		t.Fatal(err)
	}
	srvErr, _ := handshake(t, cfg, cfg)
	if srvErr != nil {
		t.Fatalf("server: %v", srvErr)
	}
	block, _ := pem.Decode(m.Cert)
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(leaf.DNSNames, ","), "node-1") || len(leaf.IPAddresses) < 3 {
		t.Fatalf("SANs: %v %v", leaf.DNSNames, leaf.IPAddresses)
	}
	if leaf.PublicKeyAlgorithm != x509.ECDSA {
		t.Fatalf("key algorithm %v", leaf.PublicKeyAlgorithm)
	}
}

func TestOtherClusterRefused(t *testing.T) {
	ours, theirs := gen(t), gen(t)
	a, _ := ours.Config()
	b, _ := theirs.Config()
	srvErr, cliErr := handshake(t, a, b)
	if srvErr == nil || cliErr == nil {
		t.Fatalf("a certificate of another CA was accepted: server %v, client %v", srvErr, cliErr)
	}
	if !strings.Contains(cliErr.Error(), "security.ssl.internal") {
		t.Fatalf("the client's error does not say why: %v", cliErr)
	}
	if !IsHandshakeFailure(srvErr) || !strings.Contains(Explain(srvErr, true).Error(), "TLS handshake failure") {
		t.Fatalf("server error not recognised: %v", srvErr)
	}
}

func TestClientWithoutCertificateRefused(t *testing.T) {
	m := gen(t)
	srv, _ := m.Config()
	cli := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // an attacker's client
	srvErr, cliErr := handshake(t, srv, cli)
	if srvErr == nil || cliErr == nil {
		t.Fatalf("a client without a certificate was accepted: server %v, client %v", srvErr, cliErr)
	}
	if !strings.Contains(cliErr.Error(), "certificate required") && !strings.Contains(cliErr.Error(), "bad certificate") {
		t.Fatalf("client error: %v", cliErr)
	}
}

func write(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestInternalFromPEMAndPKCS12(t *testing.T) {
	ctx := context.Background()
	m := gen(t)
	dir := t.TempDir()
	c := conf.NewConfiguration()
	if got, err := Internal(ctx, c, ReadLocal); got != nil || err != nil {
		t.Fatalf("off: %v %v", got, err)
	}
	must(t, c.Set(conf.SSLInternalEnabled.Key(), "true", conf.CodeSource))
	if _, err := Internal(ctx, c, ReadLocal); err == nil || !strings.Contains(err.Error(), "security.ssl.internal.keystore") {
		t.Fatalf("missing certificate: %v", err)
	}
	must(t, c.Set(conf.SSLInternalCert.Key(), write(t, dir, "cert.pem", m.Cert), conf.CodeSource))
	must(t, c.Set(conf.SSLInternalKey.Key(), write(t, dir, "key.pem", m.Key), conf.CodeSource))
	if _, err := Internal(ctx, c, ReadLocal); err == nil || !strings.Contains(err.Error(), "security.ssl.internal.ca") {
		t.Fatalf("missing CA: %v", err)
	}
	must(t, c.Set(conf.SSLInternalCA.Key(), write(t, dir, "ca.pem", m.CA), conf.CodeSource))
	got, err := Internal(ctx, c, ReadLocal)
	if err != nil || string(got.Key) != string(m.Key) {
		t.Fatalf("PEM: %v", err)
	}

	// The same material as Flink's PKCS12 keystore and truststore.
	kp, _ := tls.X509KeyPair(m.Cert, m.Key)
	leaf, _ := x509.ParseCertificate(kp.Certificate[0])
	block, _ := pem.Decode(m.CA)
	ca, _ := x509.ParseCertificate(block.Bytes)
	ks, err := pkcs12.Modern.Encode(kp.PrivateKey, leaf, nil, "ks-secret")
	if err != nil {
		t.Fatal(err)
	}
	ts, err := pkcs12.Modern.EncodeTrustStore([]*x509.Certificate{ca}, "ts-secret")
	if err != nil {
		t.Fatal(err)
	}
	p := conf.NewConfiguration()
	must(t, p.Set(conf.SSLInternalEnabled.Key(), "true", conf.CodeSource))
	must(t, p.Set(conf.SSLInternalKeystore.Key(), write(t, dir, "ks.p12", ks), conf.CodeSource))
	must(t, p.Set(conf.SSLInternalKeystorePassword.Key(), "wrong", conf.CodeSource))
	must(t, p.Set(conf.SSLInternalTruststore.Key(), write(t, dir, "ts.p12", ts), conf.CodeSource))
	must(t, p.Set(conf.SSLInternalTruststorePassword.Key(), "ts-secret", conf.CodeSource))
	if _, err := Internal(ctx, p, ReadLocal); err == nil || !strings.Contains(err.Error(), "security.ssl.internal.keystore-password") ||
		strings.Contains(err.Error(), "ks-secret") {
		t.Fatalf("wrong keystore password: %v", err)
	}
	must(t, p.Set(conf.SSLInternalKeystorePassword.Key(), "ks-secret", conf.CodeSource))
	fromP12, err := Internal(ctx, p, ReadLocal)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := fromP12.Config()
	b, _ := got.Config()
	if srvErr, cliErr := handshake(t, a, b); srvErr != nil || cliErr != nil {
		t.Fatalf("PKCS12 peer vs PEM peer: %v / %v", srvErr, cliErr)
	}
}

func TestWriteFilesPrivate(t *testing.T) {
	m := gen(t)
	dir := filepath.Join(t.TempDir(), "tls")
	env, err := m.WriteFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		st, err := os.Stat(v)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", k, st.Mode(), err)
		}
		t.Setenv(k, v)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v", st.Mode())
	}
	got, err := FromEnv()
	if err != nil || string(got.CA) != string(m.CA) {
		t.Fatalf("FromEnv: %v", err)
	}
}

func TestRESTConfigs(t *testing.T) {
	ctx := context.Background()
	m := gen(t)
	dir := t.TempDir()
	c := conf.NewConfiguration()
	if s, err := RESTServer(ctx, c, ReadLocal); s != nil || err != nil {
		t.Fatal("off")
	}
	must(t, c.Set(conf.SSLRestEnabled.Key(), "true", conf.CodeSource))
	must(t, c.Set(conf.SSLRestCert.Key(), write(t, dir, "cert.pem", m.Cert), conf.CodeSource))
	must(t, c.Set(conf.SSLRestKey.Key(), write(t, dir, "key.pem", m.Key), conf.CodeSource))
	must(t, c.Set(conf.SSLRestCA.Key(), write(t, dir, "ca.pem", m.CA), conf.CodeSource))
	srv, err := RESTServer(ctx, c, ReadLocal)
	if err != nil || srv.ClientAuth != tls.NoClientCert {
		t.Fatalf("server: %v", err)
	}
	cli, err := RESTClient(ctx, c, ReadLocal)
	if err != nil || cli.RootCAs == nil || len(cli.Certificates) != 0 {
		t.Fatalf("client: %v", err)
	}
	must(t, c.Set(conf.SSLRestAuthenticationEnabled.Key(), "true", conf.CodeSource))
	srv, _ = RESTServer(ctx, c, ReadLocal)
	cli, _ = RESTClient(ctx, c, ReadLocal)
	if srv.ClientAuth != tls.RequireAndVerifyClientCert || len(cli.Certificates) != 1 {
		t.Fatal("client authentication not configured")
	}
	cli.ServerName = "localhost"
	if srvErr, cliErr := handshake(t, srv, cli); srvErr != nil || cliErr != nil {
		t.Fatalf("REST handshake: %v / %v", srvErr, cliErr)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A second connection to the same server resumes the session (no
// certificate signatures), and the client still checks the peer.
func TestInternalSessionsResume(t *testing.T) {
	cfg, err := gen(t).Config()
	if err != nil {
		t.Fatal(err)
	}
	cli := cfg.Clone()
	cli.ServerName = "gofl-internal" // the session cache's key; the test's ports differ
	var resumed []bool
	check := cli.VerifyConnection
	cli.VerifyConnection = func(cs tls.ConnectionState) error {
		resumed = append(resumed, cs.DidResume)
		return check(cs)
	}
	for i := 0; i < 2; i++ {
		if srvErr, cliErr := handshake(t, cfg, cli); srvErr != nil || cliErr != nil {
			t.Fatalf("handshake %d: %v / %v", i, srvErr, cliErr)
		}
	}
	if len(resumed) != 2 || resumed[0] || !resumed[1] {
		t.Fatalf("resumed %v, want [false true]", resumed)
	}
}
