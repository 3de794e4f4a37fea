package storage

import (
	"fmt"
	"os"
	"sync"

	"github.com/gofl/gofl/conf"
)

// clientOptions are the options OptionsFromConf reads.
var clientOptions = []conf.Spec{
	conf.HDFSHadoopConfDir, conf.HDFSUser, conf.KerberosKeytab, conf.KerberosPrincipal,
	conf.KerberosUseTicketCache, conf.KerberosKrb5Conf, conf.HDFSNameNodePrincipal,
	conf.HDFSConnectTimeout, conf.HDFSIOTimeout, conf.HDFSCloseRetries, conf.DelegationTokensFile,
}

// OptionsFromConf reads the HDFS client and Kerberos options (fs.hdfs.*,
// security.kerberos.*) from a gofl configuration.
func OptionsFromConf(c *conf.Configuration) Options {
	return Options{
		HadoopConfDir: conf.HDFSHadoopConfDir.Get(c),
		User:          conf.HDFSUser.Get(c),
		Kerberos: KerberosOptions{
			Keytab:           conf.KerberosKeytab.Get(c),
			Principal:        conf.KerberosPrincipal.Get(c),
			UseTicketCache:   conf.KerberosUseTicketCache.Get(c),
			Krb5Conf:         conf.KerberosKrb5Conf.Get(c),
			ServicePrincipal: conf.HDFSNameNodePrincipal.Get(c),
		},
		DelegationTokenFile: conf.DelegationTokensFile.Get(c),
		DialTimeout:         conf.HDFSConnectTimeout.Get(c),
		IOTimeout:           conf.HDFSIOTimeout.Get(c),
		CloseRetries:        conf.HDFSCloseRetries.Get(c),
	}
}

// ClientEnv renders the HDFS client and Kerberos options that c sets
// (anything but defaults) as GOFL_* environment variables: how a
// TaskManager hands its file-system settings to the job runners it starts,
// which read them back with OptionsFromEnv.
func ClientEnv(c *conf.Configuration) []string {
	var env []string
	for _, s := range clientOptions {
		if e, ok := c.Lookup(s.Key()); ok && e.Source.Kind != conf.SourceDefault {
			env = append(env, s.EnvVar()+"="+e.Raw)
		}
	}
	return env
}

// SetProcessOptions makes opts what OptionsFromEnv returns in this
// process: for a process whose file-system settings come from its own
// configuration, not from a TaskManager's environment (a JobManager, whose
// split enumerators list files). It is called once at start; once
// OptionsFromEnv has run, it has no effect.
func SetProcessOptions(opts Options) { envOptionsOnce.Do(func() { envOptions = opts }) }

var (
	envOptionsOnce sync.Once
	envOptions     Options
	envOptionsErr  error
)

// OptionsFromEnv is OptionsFromConf of the configuration this process's
// environment gives (GOFL_* variables and $GOFL_CONF_DIR/gofl.yaml), read
// once: the options of a job runner, whose TaskManager passed its own
// (ClientEnv). A bad value is an error naming it.
func OptionsFromEnv() (Options, error) {
	envOptionsOnce.Do(func() {
		c, _, err := conf.Load(conf.LoadOptions{Env: os.Environ()})
		if err != nil {
			envOptionsErr = fmt.Errorf("storage: the file-system settings in this process's environment: %w", err)
			return
		}
		envOptions = OptionsFromConf(c)
	})
	return envOptions, envOptionsErr
}
