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
