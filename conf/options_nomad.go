package conf

import "time"

// Nomad provider (providers/nomad): kept here with every other option so the
// configuration reference lists them whatever is linked.
var (
	NomadAddress = StringOption("provider.nomad.address", "",
		"Nomad HTTP API address; empty: $NOMAD_ADDR, else http://127.0.0.1:4646.")
	NomadNamespace = StringOption("provider.nomad.namespace", "",
		"Nomad namespace of the cluster's jobs; empty: $NOMAD_NAMESPACE, else default.")
	NomadRegion = StringOption("provider.nomad.region", "",
		"Nomad region of the cluster's jobs; empty: $NOMAD_REGION, else the agent's region.")
	NomadDatacenters = StringOption("provider.nomad.datacenters", "*",
		"Comma-separated datacenters (globs) the cluster's jobs may run in.")
	NomadToken = StringOption("provider.nomad.token", "",
		"Nomad ACL token (secret ID); empty: $NOMAD_TOKEN. Never logged, never put on a command line: deployed JobManagers get it as NOMAD_TOKEN in their task environment.").AsSecret()
	NomadTLSCACert = StringOption("provider.nomad.tls.ca-cert", "",
		"CA certificate file for Nomad's HTTPS API; empty: $NOMAD_CACERT.")
	NomadTLSClientCert = StringOption("provider.nomad.tls.client-cert", "",
		"Client certificate file for Nomad's HTTPS API; empty: $NOMAD_CLIENT_CERT.")
	NomadTLSClientKey = StringOption("provider.nomad.tls.client-key", "",
		"Client key file for Nomad's HTTPS API; empty: $NOMAD_CLIENT_KEY.")
	NomadTLSInsecure = BoolOption("provider.nomad.tls.insecure", false,
		"Skip verification of Nomad's TLS certificate.")
	NomadJobManagerAttempts = IntOption("provider.nomad.jobmanager.attempts", 0,
		"How many times the JobManager's task runs, the first start included, as Flink's yarn.application-attempts: the JobManager job's restart policy restarts a task that failed (killed, crashed; a per-job or application JobManager's exit 0 is its end) in place, on the same ports, this many times minus one, then fails it (no rescheduling). 0 means 1 without high availability and 2 with it, as in Flink.").
		WithCheck(atLeast(0))
	NomadJobManagerCPU = IntOption("provider.nomad.jobmanager.cpu", 500,
		"CPU (MHz) reserved for a JobManager task.")
	NomadJobManagerMemory = MemorySizeOption("provider.nomad.jobmanager.memory", 512*Mebibyte,
		"Memory reserved for a JobManager task (Nomad's memory, rounded up to MB).")
	NomadTaskManagerCPU = IntOption("provider.nomad.taskmanager.cpu", 1000,
		"CPU (MHz) reserved for a TaskManager task whose worker spec names no CPU.")
	NomadTaskManagerMemory = MemorySizeOption("provider.nomad.taskmanager.memory", Gibibyte,
		"Memory reserved for a TaskManager task whose worker spec names none.")
	NomadMHzPerCore = IntOption("provider.nomad.cpu.mhz-per-core", 1000,
		"MHz reserved per core when a worker spec asks for CPU cores.")
	NomadConstraints = StringOption("provider.nomad.constraints", "",
		`Job constraints separated by ';', each "<attribute> <operator> [value]", e.g. "${attr.kernel.name} = linux" or "attr.kernel.name = linux" (the ${} may be left out; JobManagers receive the constraints without it, since Nomad would interpolate it in task arguments).`)
	NomadJobManagerConstraints = StringOption("provider.nomad.jobmanager.constraints", "",
		"Constraints of JobManager jobs only, beside provider.nomad.constraints (same syntax), e.g. to keep JobManagers and TaskManagers on different node classes.")
	NomadTaskManagerConstraints = StringOption("provider.nomad.taskmanager.constraints", "",
		"Constraints of TaskManager jobs only, beside provider.nomad.constraints (same syntax).")
	NomadNodePool = StringOption("provider.nomad.node-pool", "",
		`Nomad node pool of every job (Nomad 1.6+; "all" spans every pool); empty: Nomad's default pool.`)
	NomadDriver = EnumOption("provider.nomad.driver", "raw_exec", []string{"raw_exec", "exec"},
		"Nomad task driver for JobManagers and TaskManagers.")
	NomadBinaryPath = StringOption("provider.nomad.binary.path", "",
		"Path of the gofl binary pre-installed on the Nomad nodes; empty: deployment.binary, else the running executable's path.")
	NomadBinaryURL = StringOption("provider.nomad.binary.url", "",
		"http(s) URL the tasks fetch the gofl binary from through an artifact stanza (WebHDFS: http://namenode:9870/webhdfs/v1/<path>?op=OPEN); takes precedence over binary.path.")
	NomadBinarySHA256 = StringOption("provider.nomad.binary.sha256", "",
		"Hex SHA-256 of the binary at provider.nomad.binary.url; required with it (the artifact stanza's checksum).")
	NomadKillTimeout = DurationOption("provider.nomad.kill-timeout", 10*time.Second,
		"Time Nomad gives a JobManager or TaskManager between SIGTERM and SIGKILL when it is stopped.")
)
