package nomad

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/storage"
)

// With delegation tokens and a file:// staging directory the TaskManagers
// get the staged token file's URI and no Kerberos login; with hdfs://
// staging, which they could not read without one, they keep the login and
// no token file; without tokens nothing changes.
func TestTaskManagersGetStagedTokensInsteadOfKeytab(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, staging, tokens, wantFile string
		wantKeytab                      bool
	}{
		{"file staging", "file://" + dir, "/tmp/jm-local/tokens.json", "file://" + dir + "/.gofl/tok/" + storage.DelegationTokensFile, false},
		{"path staging", dir, "/tmp/jm-local/tokens.json", "file://" + dir + "/.gofl/tok/" + storage.DelegationTokensFile, false},
		{"hdfs staging", "hdfs://nn:8020/staging", "/tmp/jm-local/tokens.json", "", true},
		{"no tokens", "file://" + dir, "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string]string{"staging.dir": tc.staging, conf.KerberosKeytab.Key(): "/k/user.keytab",
				conf.KerberosPrincipal.Key(): "gofl@GOFL.TEST", conf.KerberosKrb5Conf.Key(): "/k/krb5.conf"}
			if tc.tokens != "" {
				m[conf.DelegationTokensFile.Key()] = tc.tokens
			}
			c, err := conf.FromMap(m)
			if err != nil {
				t.Fatal(err)
			}
			cfg := c.Snapshot()
			if err := taskManagerTokens(cfg, c, "tok", zerolog.Nop()); err != nil {
				t.Fatal(err)
			}
			if cfg[conf.DelegationTokensFile.Key()] != tc.wantFile {
				t.Errorf("token file %q, want %q", cfg[conf.DelegationTokensFile.Key()], tc.wantFile)
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
