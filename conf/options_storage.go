package conf

import (
	"errors"
	"time"
)

// HDFS client and Kerberos (storage/), with Flink's keys where Flink has one.
var (
	HDFSHadoopConfDir = StringOption("fs.hdfs.hadoopconf", "",
		"Directory with core-site.xml and hdfs-site.xml (fs.defaultFS, HA nameservices, security settings); empty: $HADOOP_CONF_DIR, else $HADOOP_HOME/etc/hadoop.")
	HDFSUser = StringOption("fs.hdfs.user", "",
		"HDFS user the client acts as when Kerberos is off; empty: $HADOOP_USER_NAME, else the operating-system user.")
	HDFSConnectTimeout = DurationOption("fs.hdfs.connect-timeout", 10*time.Second,
		"Timeout of each TCP connect to a NameNode or DataNode.").WithCheck(positive)
	HDFSIOTimeout = DurationOption("fs.hdfs.io-timeout", 60*time.Second,
		"Timeout of each network read or write on a NameNode connection, and so of every NameNode call.").WithCheck(positive)
	HDFSCloseRetries = IntOption("fs.hdfs.close-retries", 8,
		"How often closing an HDFS file is retried while the NameNode reports its last block still replicating.").WithCheck(atLeast(0))
	KerberosKeytab = StringOption("security.kerberos.login.keytab", "",
		"Keytab file for a Kerberos login to a secured HDFS; needs security.kerberos.login.principal.")
	KerberosPrincipal = StringOption("security.kerberos.login.principal", "",
		"Kerberos principal (user[/instance][@REALM]) for the keytab login.")
	KerberosUseTicketCache = BoolOption("security.kerberos.login.use-ticket-cache", false,
		"Log in to Kerberos from the ticket cache kinit left ($KRB5CCNAME, else /tmp/krb5cc_<uid>).")
	KerberosKrb5Conf = StringOption("security.kerberos.krb5-conf.path", "",
		"krb5.conf path; empty: $KRB5_CONFIG, else /etc/krb5.conf.")
	HDFSNameNodePrincipal = StringOption("fs.hdfs.namenode.principal", "",
		"The NameNode's Kerberos service principal; empty: dfs.namenode.kerberos.principal from hdfs-site.xml.")
	DelegationTokensEnabled = BoolOption("security.delegation.tokens.enabled", true,
		"With a Kerberos login, the client obtains HDFS delegation tokens (for staging.dir, state.checkpoints.dir, fs.defaultFS and security.kerberos.access.hadoopFileSystems) for the cluster and ships them through staging (0600); the TaskManagers use them instead of the Kerberos options, and the JobManager renews them. A job submitted to a session brings its user's own tokens, which the JobManager renews while it runs and cancels at its end.")
	KerberosAccessHadoopFileSystems = StringOption("security.kerberos.access.hadoopFileSystems", "",
		"Comma-separated hdfs:// file systems the client obtains delegation tokens for, besides staging.dir, state.checkpoints.dir and the Hadoop configuration's fs.defaultFS (Flink's key).")
	DelegationTokensFile = StringOption("security.delegation.tokens.file", "",
		"File of HDFS delegation tokens (0600, JSON); without a keytab or ticket cache, hdfs:// presents its NameNode's token from it on the NameNode RPC port (SASL DIGEST-MD5).")
	DelegationTokensRenewalTimeRatio = FloatOption("security.delegation.tokens.renewal.time-ratio", 0.75,
		"Delegation tokens are renewed when this fraction of the time to their expiry has passed.").WithCheck(func(r float64) error {
		if r <= 0 || r >= 1 {
			return errors.New("must be between 0 and 1 (exclusive)")
		}
		return nil
	})
	DelegationTokensRenewalRetryBackoff = DurationOption("security.delegation.tokens.renewal.retry.backoff", time.Hour,
		"Delay before a failed delegation token renewal is tried again.").WithCheck(positive)
)
