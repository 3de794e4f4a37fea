package conf

// TLS: Flink's security.ssl.internal.* (mutual TLS between the cluster's
// processes) and security.ssl.rest.* (TLS of the REST API), with PEM
// equivalents of Flink's PKCS12 keystores, and the override of the Nomad
// provider's bind rule. Files may be paths or staging URIs (file://,
// hdfs://): a TaskManager on another node reads the cluster's certificates
// where the client staged them.

var (
	// SSLInternalEnabled turns on mutual TLS for every internal link.
	SSLInternalEnabled = BoolOption("security.ssl.internal.enabled", false,
		"Mutual TLS on every internal link: JobManager<->TaskManager gRPC, blob fetches and the data plane between job runners; a peer without a certificate of the cluster's CA is refused. Unset: on for clusters a provider deploys (gofl session start, gofl run -t), with a per-cluster CA the client generates when no certificates are given; off for processes started by hand.")
	// SSLInternalKeystore is Flink's PKCS12 keystore of internal TLS.
	SSLInternalKeystore = StringOption("security.ssl.internal.keystore", "",
		"PKCS12 keystore (path or URI) with this process's private key and certificate chain for internal TLS; alternative: security.ssl.internal.cert/key.")
	SSLInternalKeystorePassword = StringOption("security.ssl.internal.keystore-password", "",
		"Password of security.ssl.internal.keystore. Never logged.").AsSecret()
	SSLInternalKeyPassword = StringOption("security.ssl.internal.key-password", "",
		"Password of the key in security.ssl.internal.keystore when it differs from the keystore's (PKCS12 files of gofl and most tools use one password). Never logged.").AsSecret()
	SSLInternalTruststore = StringOption("security.ssl.internal.truststore", "",
		"PKCS12 truststore (path or URI) with the CA certificates internal peers must chain to; alternative: security.ssl.internal.ca.")
	SSLInternalTruststorePassword = StringOption("security.ssl.internal.truststore-password", "",
		"Password of security.ssl.internal.truststore. Never logged.").AsSecret()
	SSLInternalCert = StringOption("security.ssl.internal.cert", "",
		"PEM certificate chain (path or URI) of this process for internal TLS (PEM equivalent of the keystore).")
	SSLInternalKey = StringOption("security.ssl.internal.key", "",
		"PEM private key (path or URI) matching security.ssl.internal.cert; keep it readable by the cluster's user only.")
	SSLInternalCA = StringOption("security.ssl.internal.ca", "",
		"PEM CA certificates (path or URI) internal peers must chain to (PEM equivalent of the truststore).")

	// SSLRestEnabled serves the REST API over HTTPS.
	SSLRestEnabled = BoolOption("security.ssl.rest.enabled", false,
		"Serve the REST API over HTTPS with security.ssl.rest.keystore (or .cert/.key); clients trust security.ssl.rest.truststore (or .ca), else the system roots.")
	SSLRestKeystore = StringOption("security.ssl.rest.keystore", "",
		"PKCS12 keystore of the REST server (JobManager) or of the REST client's certificate (with security.ssl.rest.authentication-enabled).")
	SSLRestKeystorePassword = StringOption("security.ssl.rest.keystore-password", "",
		"Password of security.ssl.rest.keystore. Never logged.").AsSecret()
	SSLRestKeyPassword = StringOption("security.ssl.rest.key-password", "",
		"Password of the key in security.ssl.rest.keystore when it differs from the keystore's. Never logged.").AsSecret()
	SSLRestTruststore = StringOption("security.ssl.rest.truststore", "",
		"PKCS12 truststore: the CAs a REST client trusts, and the CAs client certificates must chain to with security.ssl.rest.authentication-enabled.")
	SSLRestTruststorePassword = StringOption("security.ssl.rest.truststore-password", "",
		"Password of security.ssl.rest.truststore. Never logged.").AsSecret()
	SSLRestCert = StringOption("security.ssl.rest.cert", "",
		"PEM certificate chain of the REST server, or of the REST client with security.ssl.rest.authentication-enabled.")
	SSLRestKey = StringOption("security.ssl.rest.key", "",
		"PEM private key matching security.ssl.rest.cert.")
	SSLRestCA = StringOption("security.ssl.rest.ca", "",
		"PEM CA certificates a REST client trusts (and client certificates must chain to with security.ssl.rest.authentication-enabled).")
	SSLRestAuthenticationEnabled = BoolOption("security.ssl.rest.authentication-enabled", false,
		"Require a client certificate chaining to security.ssl.rest.truststore (or .ca) on every REST connection (Flink's mutual REST TLS); the CLI presents security.ssl.rest.keystore (or .cert/.key).")

	// SecurityInsecure overrides the Nomad provider's bind rule.
	SecurityInsecure = BoolOption("security.insecure", false,
		"Let the nomad provider bind internal ports to the allocation's routable address without internal TLS (security.ssl.internal.enabled false): anyone who reaches the node can then act as the JobManager or a TaskManager. For trusted networks only.")
)

// SSLInternalOn is security.ssl.internal.enabled if set, else
// providerDeployed (clusters a provider deploys default to on).
func SSLInternalOn(c *Configuration, providerDeployed bool) bool {
	if c.IsSet(SSLInternalEnabled.Key()) {
		return SSLInternalEnabled.Get(c)
	}
	return providerDeployed
}
