package nomad

import (
	"testing"

	"github.com/gofl/gofl/conf"
)

// jobManagerSettings reads back the configuration buildJob put into the
// JobManager task's arguments, with an artifact binary (sh -c wrapper)
// and without, escaped interpolations undone and Nomad's port variables
// left out (they are no valid configuration before Nomad fills them in).
func TestJobManagerSettingsRoundTrip(t *testing.T) {
	cfg := map[string]string{
		"high-availability.type":             "zookeeper",
		"high-availability.zookeeper.quorum": "127.0.0.1:2181",
		"high-availability.cluster-id":       "/c1",
		"high-availability.storageDir":       "file:///tmp/${USER}/ha",
		"jobmanager.rpc.port":                "${NOMAD_PORT_" + portRPC + "}",
	}
	for _, bin := range []binary{{path: "/usr/bin/gofl"}, {url: "http://h/gofl", sha256: "00"}} {
		job := buildJob(Options{}, taskParams{jobID: "j", jobType: "batch", role: roleJobManager, cfg: cfg, bin: bin})
		got := jobManagerSettings(job)
		if p, ok := got["jobmanager.rpc.port"]; ok {
			t.Errorf("binary %+v: the port Nomad fills in is read back as %q", bin, p)
		}
		if _, err := conf.FromMap(got); err != nil {
			t.Errorf("binary %+v: the settings read back are no valid configuration: %v", bin, err)
		}
		for k, v := range cfg {
			if k == "jobmanager.rpc.port" {
				continue
			}
			if got[k] != v {
				t.Errorf("binary %+v: %s = %q, want %q (all: %v)", bin, k, got[k], v, got)
			}
		}
	}
	if got := jobManagerSettings(nil); got != nil {
		t.Errorf("no job: %v", got)
	}
}
