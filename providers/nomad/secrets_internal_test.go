package nomad

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/providers"
)

// No token or password reaches a Nomad job spec (which anyone who may read
// the job sees): not the JobManager's, whose secrets are in the staged
// secrets file (the Nomad token too), nor a TaskManager's, even when the
// JobManager's own configuration holds them.
func TestNoSecretsInJobSpecs(t *testing.T) {
	secrets := map[string]string{
		conf.SSLInternalKeystorePassword.Key():   "ks-pw-31c4",
		conf.SSLInternalKeyPassword.Key():        "key-pw-77a0",
		conf.SSLInternalTruststorePassword.Key(): "ts-pw-5b2e",
		conf.SSLRestKeystorePassword.Key():       "rest-ks-pw-90d1",
		conf.RestAuthToken.Key():                 "rest-token-a8f3",
		conf.NomadToken.Key():                    "nomad-token-c6e9",
	}
	cfg := map[string]string{
		conf.DeploymentSecretsFile.Key(): "hdfs://nn:8020/staging/.gofl/c1/secrets.yaml",
		conf.SSLInternalEnabled.Key():    "true",
	}
	for k, v := range secrets {
		cfg[k] = v
	}
	o := Options{Driver: "raw_exec", Token: secrets[conf.NomadToken.Key()], JobManagerCPU: 100, JobManagerMemoryMB: 64}
	d := &Deployer{opts: o}
	jm, err := d.jobManagerJob(providers.ClusterSpec{ClusterID: "c1", Mode: providers.ModeSession, Config: cfg}, binary{path: "/opt/gofl"})
	if err != nil {
		t.Fatal(err)
	}
	w := &WorkerDriver{opts: o, clusterID: "c1", bin: binary{path: "/opt/gofl"}, rpcHost: "10.0.0.1", rpcPort: "6123", config: cfg}
	tm := w.taskManagerJob("taskmanager-1", 1, 100, 64)
	for name, job := range map[string]any{"JobManager": jm, "TaskManager": tm} {
		b, err := json.Marshal(job)
		if err != nil {
			t.Fatal(err)
		}
		spec := string(b)
		for k, v := range secrets {
			if strings.Contains(spec, v) {
				t.Errorf("the %s job spec holds %s", name, k)
			}
		}
		if !strings.Contains(spec, conf.DeploymentSecretsFile.Key()+"=") {
			t.Errorf("the %s job spec does not name the secrets file: %s", name, spec)
		}
	}
}
