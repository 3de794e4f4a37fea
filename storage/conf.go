package storage

import "github.com/gofl/gofl/conf"

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
		DialTimeout:  conf.HDFSConnectTimeout.Get(c),
		IOTimeout:    conf.HDFSIOTimeout.Get(c),
		CloseRetries: conf.HDFSCloseRetries.Get(c),
	}
}
