package local

import (
	"github.com/gofl/gofl/providers"

	"os"
	"path/filepath"
	"slices"
	"time"
)

// KeptClusterLogs is how many ended clusters' logs the local provider
// keeps under <base>/logs; older ones are removed when a cluster's are
// saved.
const KeptClusterLogs = 20

// LogDir implements providers.LogLocator: where the logs of the cluster's
// processes stay once the cluster is gone (<base>/logs/<cluster-id>/:
// jobmanager.log, taskmanager-N.log). A TaskManager's log holds what its
// job runners print, so Print() output of a per-job or application cluster
// is found there after the cluster ended.
func (d *Deployer) LogDir(clusterID string) string {
	if _, err := d.clusterDir(clusterID); err != nil {
		return ""
	}
	return filepath.Join(d.opts.Dir, "logs", clusterID)
}

// saveLogs moves the gofl.log of every process of the cluster in dir to
// LogDir before dir is removed, and prunes the logs of all but the newest
// KeptClusterLogs clusters. Best effort: a log that cannot be moved goes
// with the directory.
func (d *Deployer) saveLogs(clusterID, dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	to := d.LogDir(clusterID)
	if to == "" {
		return
	}
	for _, e := range ents {
		src := filepath.Join(dir, e.Name(), logFile) // jobmanager/, taskmanager-N/
		if _, err := os.Stat(src); !e.IsDir() || err != nil {
			continue
		}
		if err := os.MkdirAll(to, 0o755); err != nil {
			return
		}
		_ = os.Rename(src, filepath.Join(to, e.Name()+".log"))
	}
	d.pruneLogs()
}

// pruneLogs keeps the KeptClusterLogs most recently saved clusters' logs.
func (d *Deployer) pruneLogs() {
	base := filepath.Join(d.opts.Dir, "logs")
	ents, err := os.ReadDir(base)
	if err != nil || len(ents) <= KeptClusterLogs {
		return
	}
	type saved struct {
		name string
		at   time.Time
	}
	var all []saved
	for _, e := range ents {
		if info, err := e.Info(); err == nil && e.IsDir() {
			all = append(all, saved{e.Name(), info.ModTime()})
		}
	}
	slices.SortFunc(all, func(a, b saved) int { return b.at.Compare(a.at) })
	for _, s := range all[min(len(all), KeptClusterLogs):] {
		_ = os.RemoveAll(filepath.Join(base, s.name))
	}
}

var _ providers.LogLocator = (*Deployer)(nil)
