package nomad

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
)

// With delegation tokens the TaskManagers get them over RPC: their
// configuration names neither the token file nor a Kerberos login,
// whatever the staging directory, unless they must read a staged file on
// hdfs:// before registering (then they keep the login); without tokens
// nothing changes.
func TestTaskManagersGetTokensOverRPCInsteadOfKeytab(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, staging, tokens, secrets string
		wantKeytab                     bool
	}{
		{"file staging", "file://" + dir, "/tmp/jm-local/tokens.json", "", false},
		{"path staging", dir, "/tmp/jm-local/tokens.json", "", false},
		{"hdfs staging", "hdfs://nn:8020/staging", "/tmp/jm-local/tokens.json", "", false},
		{"hdfs staging, staged secrets", "hdfs://nn:8020/staging", "/tmp/jm-local/tokens.json", "hdfs://nn:8020/staging/.gofl/tok/secrets.yaml", true},
		{"file staging, staged secrets", "file://" + dir, "/tmp/jm-local/tokens.json", "file://" + dir + "/.gofl/tok/secrets.yaml", false},
		{"no tokens", "file://" + dir, "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string]string{"staging.dir": tc.staging, conf.KerberosKeytab.Key(): "/k/user.keytab",
				conf.KerberosPrincipal.Key(): "gofl@GOFL.TEST", conf.KerberosKrb5Conf.Key(): "/k/krb5.conf"}
			if tc.tokens != "" {
				m[conf.DelegationTokensFile.Key()] = tc.tokens
			}
			if tc.secrets != "" {
				m[conf.DeploymentSecretsFile.Key()] = tc.secrets
			}
			c, err := conf.FromMap(m)
			if err != nil {
				t.Fatal(err)
			}
			cfg := c.Snapshot()
			taskManagerTokens(cfg, zerolog.Nop())
			if f, ok := cfg[conf.DelegationTokensFile.Key()]; ok {
				t.Errorf("token file %q in the TaskManagers' configuration", f)
			}
			_, keytab := cfg[conf.KerberosKeytab.Key()]
			_, principal := cfg[conf.KerberosPrincipal.Key()]
			if keytab != tc.wantKeytab || principal != tc.wantKeytab {
				t.Errorf("keytab %v, principal %v, want %v: %v", keytab, principal, tc.wantKeytab, cfg)
			}
			if cfg[conf.KerberosKrb5Conf.Key()] != "/k/krb5.conf" {
				t.Errorf("krb5.conf dropped: %v", cfg)
			}
		})
	}
}
