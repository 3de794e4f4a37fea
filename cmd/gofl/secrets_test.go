package main

import (
	"strings"
	"testing"

	"github.com/gofl/gofl/conf"
)

// Secrets given on the command line or in the environment never show in
// `gofl config`: their value is masked, the source still shown.
func TestConfigMasksSecrets(t *testing.T) {
	const rest, nomad = "rest-s3cr3t-0123456789", "nomad-s3cr3t-0123456789"
	r := gofl(t, []string{"GOFL_PROVIDER_NOMAD_TOKEN=" + nomad}, "config", "-D", "rest.authentication.token="+rest)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	out := r.stdout + r.stderr
	for _, secret := range []string{rest, nomad} {
		if strings.Contains(out, secret) {
			t.Errorf("gofl config shows a secret:\n%s", out)
		}
	}
	rows := configRows(t, r.stdout)
	for _, k := range []string{"rest.authentication.token", "provider.nomad.token"} {
		if v := rows[k][0]; v != conf.Masked {
			t.Errorf("%s shows %q, want %q", k, v, conf.Masked)
		}
	}
}

// The TLS passwords (security.ssl.*-password) are masked too.
func TestConfigMasksTLSPasswords(t *testing.T) {
	keys := []string{"security.ssl.internal.keystore-password", "security.ssl.internal.key-password", "security.ssl.internal.truststore-password",
		"security.ssl.rest.keystore-password", "security.ssl.rest.key-password", "security.ssl.rest.truststore-password"}
	args := []string{"config"}
	for i, k := range keys {
		args = append(args, "-D", k+"=tls-pw-"+strings.Repeat("x", i+8))
	}
	r := gofl(t, nil, args...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, "tls-pw-") {
		t.Errorf("gofl config shows a TLS password:\n%s", r.stdout)
	}
	rows := configRows(t, r.stdout)
	for _, k := range keys {
		if v := rows[k][0]; v != conf.Masked {
			t.Errorf("%s shows %q, want %q", k, v, conf.Masked)
		}
	}
}
