package tlsconf

import (
	"fmt"
	"os"
	"path/filepath"
)

// Environment variables a TaskManager sets for its job runners: the local
// PEM files of internal TLS, for the data plane between runners.
const (
	EnvCert = "GOFL_INTERNAL_TLS_CERT"
	EnvKey  = "GOFL_INTERNAL_TLS_KEY"
	EnvCA   = "GOFL_INTERNAL_TLS_CA"
)

// WriteFiles writes m as cert.pem, key.pem and ca.pem into dir (created
// 0700; files 0600: readable by the cluster's user only) and returns the
// environment (EnvCert, EnvKey, EnvCA) naming them. Idempotent.
func (m *Material) WriteFiles(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tlsconf: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tlsconf: %w", err)
	}
	var env []string
	for _, f := range []struct {
		name, env string
		data      []byte
	}{{"cert.pem", EnvCert, m.Cert}, {"key.pem", EnvKey, m.Key}, {"ca.pem", EnvCA, m.CA}} {
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, f.data, 0o600); err != nil {
			return nil, fmt.Errorf("tlsconf: %w", err)
		}
		env = append(env, f.env+"="+p)
	}
	return env, nil
}

// FromEnv loads the material a TaskManager handed to this job runner
// (WriteFiles), or nil when it handed none (internal TLS off).
func FromEnv() (*Material, error) {
	cp, kp, ap := os.Getenv(EnvCert), os.Getenv(EnvKey), os.Getenv(EnvCA)
	if cp == "" && kp == "" && ap == "" {
		return nil, nil
	}
	m := &Material{}
	var err error
	if m.Cert, err = os.ReadFile(cp); err != nil {
		return nil, fmt.Errorf("tlsconf: %s: %w", EnvCert, err)
	}
	if m.Key, err = os.ReadFile(kp); err != nil {
		return nil, fmt.Errorf("tlsconf: %s: %w", EnvKey, err)
	}
	if m.CA, err = os.ReadFile(ap); err != nil {
		return nil, fmt.Errorf("tlsconf: %s: %w", EnvCA, err)
	}
	return m, nil
}
