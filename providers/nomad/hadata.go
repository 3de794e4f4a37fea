package nomad

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/gofl/gofl/ha"
	"github.com/gofl/gofl/providers"
)

// failedCluster is a cluster's JobManager job while it is failed for good
// (its task failed with no in-place restart left: out of
// provider.nomad.jobmanager.attempts), nil otherwise: nothing recovers its
// jobs any more, so its high-availability data can go once it is killed.
func (d *Deployer) failedCluster(ctx context.Context, clusterID string) *api.Job {
	jobID := JobManagerJobID(clusterID)
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	job, _, err := d.c.api.Jobs().Info(jobID, q(cctx, 0, 0))
	if err != nil || job.Meta[metaClusterID] != clusterID {
		return nil
	}
	status := ""
	if job.Status != nil {
		status = *job.Status
	}
	info, err := d.info(cctx, jobID, clusterID, job.Meta, status)
	if err != nil || info.Status != providers.StatusTerminated && info.Status != providers.StatusFailed || info.Details["error"] == "" {
		return nil
	}
	return job
}

// cleanupHAData removes the high-availability data (ZooKeeper
// <path.root>/<cluster-id>, <storageDir>/<cluster-id>) of a failed
// cluster whose processes are gone, with the configuration its JobManager
// ran with (the -D arguments of the job's task), as the local provider
// does. A cluster without high availability has none. Errors are logged:
// the cluster goes anyway.
func (d *Deployer) cleanupHAData(clusterID string, job *api.Job) {
	log := d.log.With().Str("cluster_id", clusterID).Logger()
	settings := jobManagerSettings(job)
	if settings == nil {
		return
	}
	ha.CleanupFailedCluster(settings, cleanupTimeout, log)
}

// jobManagerSettings reads the -D key=value arguments of a JobManager job
// (see buildJob) but those Nomad interpolates (its ports), nil if it has
// none.
func jobManagerSettings(job *api.Job) map[string]string {
	if job == nil || len(job.TaskGroups) == 0 || len(job.TaskGroups[0].Tasks) == 0 {
		return nil
	}
	var args []string
	switch a := job.TaskGroups[0].Tasks[0].Config["args"].(type) {
	case []string:
		args = a
	case []any:
		for _, v := range a {
			args = append(args, fmt.Sprint(v))
		}
	}
	out := map[string]string{}
	for i := 0; i+1 < len(args); i++ {
		if args[i] != "-D" {
			continue
		}
		k, v, ok := strings.Cut(args[i+1], "=")
		if !ok || nomadPortVar.MatchString(v) {
			continue // Nomad fills the ports in at run time; HA needs none
		}
		out[k] = strings.ReplaceAll(v, "$${", "${") // undo escapeInterpolation
		i++
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
