package storage

import (
	"testing"
	"time"

	"github.com/gofl/gofl/conf"
)

func TestOptionsFromConf(t *testing.T) {
	c, err := conf.FromMap(map[string]string{
		"fs.hdfs.user": "etl", "fs.hdfs.hadoopconf": "/etc/hadoop/conf", "fs.hdfs.io-timeout": "5 s",
		"security.kerberos.login.keytab": "/k.keytab", "security.kerberos.login.principal": "gofl@EXAMPLE.COM",
		"security.kerberos.login.use-ticket-cache": "true", "fs.hdfs.namenode.principal": "nn/_HOST@EXAMPLE.COM",
	})
	if err != nil {
		t.Fatal(err)
	}
	o := OptionsFromConf(c)
	if o.User != "etl" || o.HadoopConfDir != "/etc/hadoop/conf" || o.IOTimeout != 5*time.Second || o.DialTimeout != 10*time.Second ||
		o.Kerberos.Keytab != "/k.keytab" || o.Kerberos.Principal != "gofl@EXAMPLE.COM" || !o.Kerberos.UseTicketCache ||
		o.Kerberos.ServicePrincipal != "nn/_HOST@EXAMPLE.COM" || o.CloseRetries != 8 {
		t.Fatalf("OptionsFromConf = %+v", o)
	}
}

// ClientEnv carries exactly the settings a TaskManager has to its runners,
// which load the same options back from their environment.
func TestClientEnvRoundTrips(t *testing.T) {
	c, err := conf.FromMap(map[string]string{
		"fs.hdfs.user": "etl", "fs.hdfs.io-timeout": "5 s", "security.kerberos.login.use-ticket-cache": "true",
		"taskmanager.numberOfTaskSlots": "4", // not a file-system option
	})
	if err != nil {
		t.Fatal(err)
	}
	env := ClientEnv(c)
	if len(env) != 3 {
		t.Fatalf("ClientEnv = %q, want the 3 file-system settings", env)
	}
	back, _, err := conf.Load(conf.LoadOptions{Env: env})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := OptionsFromConf(back), OptionsFromConf(c); got != want {
		t.Fatalf("through the environment: %+v, want %+v", got, want)
	}
	if env := ClientEnv(conf.NewConfiguration()); len(env) != 0 {
		t.Fatalf("defaults are not passed on: %q", env)
	}
}
