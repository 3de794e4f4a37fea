package local

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/providers"
)

// With delegation tokens the TaskManagers get the token file and not the
// Kerberos login; without, they keep it.
func TestTaskManagersGetTokensInsteadOfKeytab(t *testing.T) {
	for _, withTokens := range []bool{true, false} {
		m := map[string]string{
			"provider.local.dir": t.TempDir(), "deployment.binary": "/bin/true", "deployment.cluster-id": "tok",
			conf.KerberosKeytab.Key(): "/k/user.keytab", conf.KerberosPrincipal.Key(): "gofl@GOFL.TEST",
			conf.KerberosKrb5Conf.Key(): "/k/krb5.conf",
		}
		if withTokens {
			m[conf.DelegationTokensFile.Key()] = "/k/tokens.json"
		}
		c, err := conf.FromMap(m)
		if err != nil {
			t.Fatal(err)
		}
		d, err := NewWorkerDriver(providers.DriverContext{Config: c, JobManagerRPCAddress: "127.0.0.1:1", Log: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		_, hasKeytab := d.config[conf.KerberosKeytab.Key()]
		_, hasPrincipal := d.config[conf.KerberosPrincipal.Key()]
		if hasKeytab == withTokens || hasPrincipal == withTokens {
			t.Errorf("tokens %v: TaskManager config %v", withTokens, d.config)
		}
		if d.config[conf.KerberosKrb5Conf.Key()] != "/k/krb5.conf" {
			t.Errorf("tokens %v: krb5.conf dropped: %v", withTokens, d.config)
		}
	}
}
