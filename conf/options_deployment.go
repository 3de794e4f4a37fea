package conf

import (
	"encoding/json"
	"errors"
	"time"
)

// Deployment modes (Flink's execution.target, without the provider part).
const (
	ModeSession     = "session"
	ModePerJob      = "per-job"
	ModeApplication = "application"
)

// DeploymentModes are the values of deployment.mode.
var DeploymentModes = []string{ModeSession, ModePerJob, ModeApplication}

// Options a deploying client sets for the JobManager of a per-job or
// application cluster.
var (
	// DeploymentMode is what the JobManager runs.
	DeploymentMode = EnumOption("deployment.mode", ModeSession, DeploymentModes,
		"What the JobManager runs: session (accepts job submissions until stopped), per-job (runs only the JobGraph staged at deployment.jobgraph, accepts no submissions, and exits once the job ended: 0 if it FINISHED, else 1) or application (runs the job binary at deployment.job-binary in application-driver role, which submits its jobs to this JobManager, and exits once the driver and every job it submitted ended). Per-job and application clusters remove their staging directory when they end.")
	// DeploymentJobGraph is the staged JobGraph of a per-job cluster.
	DeploymentJobGraph = StringOption("deployment.jobgraph", "",
		"URI (file:// or hdfs://) of the staged JobGraph (protobuf) a per-job JobManager runs; the client sets it.")
	// DeploymentSecretsFile keeps secret options off command lines.
	DeploymentSecretsFile = StringOption("deployment.secrets-file", "",
		"Path or URI (file://, hdfs://) of a YAML file (0600) of secret options (passwords, tokens) a deployed process reads at start, so that none travels on its command line (visible in ps) or in a Nomad job spec. The client stages the cluster's secrets there and sets it; a JobManager's TaskManagers get the same file (a local JobManager started by hand writes its own) and read only the internal TLS passwords from it.")
	// DeploymentJobBinary is the staged job binary of a per-job or application cluster.
	DeploymentJobBinary = StringOption("deployment.job-binary", "",
		"URI of the job binary in the staging blob cache (<staging.dir>/.gofl/blobs/sha256/<hex>) for per-job and application clusters: the JobManager loads it into its blob store at start, verified against the digest in its name, and TaskManagers fetch it from there.")
	// DeploymentProgramArgs are the application driver's arguments.
	DeploymentProgramArgs = StringOption("deployment.program-args", "",
		`Arguments of the job binary in application mode, as a JSON array of strings (e.g. ["--input","/data"]); the client sets it.`).
		WithCheck(jsonStringArray)
	// DeploymentAttached makes a per-job or application cluster wait for its client.
	DeploymentAttached = BoolOption("deployment.attached", false,
		"Whether a client follows the per-job or application cluster: if so, once its jobs ended the JobManager keeps serving until a client has fetched the final state (GET /application), at most deployment.result-fetch.timeout, and then exits.")
	// DeploymentResultFetchTimeout bounds how long an attached cluster waits for its client.
	DeploymentResultFetchTimeout = DurationOption("deployment.result-fetch.timeout", time.Minute,
		"How long an attached per-job or application cluster keeps serving after its jobs ended while no client fetched the final state.").
		WithCheck(positive)
)

// ProgramArgs parses deployment.program-args.
func ProgramArgs(c *Configuration) []string {
	var out []string
	if s := DeploymentProgramArgs.Get(c); s != "" {
		_ = json.Unmarshal([]byte(s), &out)
	}
	return out
}

func jsonStringArray(s string) error {
	if s == "" {
		return nil
	}
	var out []string
	if json.Unmarshal([]byte(s), &out) != nil {
		return errors.New("must be a JSON array of strings")
	}
	return nil
}
