package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/logs"
)

// workDirName is a TaskManager's work directory inside its own
// (taskmanager.work.dir), so its runners' logs survive the process for
// archiving.
const workDirName = "work"

// archiveTimeout bounds one archiving of a cluster's logs.
const archiveTimeout = 60 * time.Second

// processSource is the log files the process with working directory dir
// left: its gofl.log and, for a TaskManager, its runners' logs.
func processSource(dir string, taskManager bool) logs.Source {
	src := logs.Source{Own: filepath.Join(dir, logFile), OwnName: logs.JobManagerLog}
	if taskManager {
		src.OwnName = logs.TaskManagerLog
		src.RunnerDir = filepath.Join(dir, workDirName, "jobs")
	}
	return src
}

// archiveLogs copies what the processes in cluster directory dir left on
// disk (only the one named only, when set) to the cluster's log archive.
// It is what keeps the logs of processes killed with SIGKILL, and of
// TaskManagers a JobManager did not outlive. Best effort: failures are
// logged. c nil: nothing.
func archiveLogs(c *conf.Configuration, clusterID, dir, only string, log zerolog.Logger) {
	if c == nil {
		return
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), archiveTimeout)
	defer cancel()
	var a *logs.Archive
	for _, e := range ents {
		if !e.IsDir() || (only != "" && e.Name() != only) {
			continue
		}
		var proc logs.Process
		var src logs.Source
		switch {
		case e.Name() == jobManagerDir || strings.HasPrefix(e.Name(), jobManagerDir+"-"):
			proc, src = logs.JobManagerProcess, processSource(filepath.Join(dir, e.Name()), false)
		case strings.HasPrefix(e.Name(), "taskmanager-"):
			p, err := logs.TaskManagerProcess(e.Name())
			if err != nil {
				continue
			}
			proc, src = p, processSource(filepath.Join(dir, e.Name()), true)
		default:
			continue
		}
		files := src.List()
		if len(files) == 0 {
			continue
		}
		if a == nil {
			if a, err = logs.OpenArchive(ctx, c, clusterID); err != nil {
				log.Warn().Err(err).Str("cluster_id", clusterID).Msg("logs not archived")
				return
			}
			defer a.Close()
		}
		if err := a.Put(ctx, proc, files); err != nil {
			log.Warn().Err(err).Str("cluster_id", clusterID).Msg("archiving logs")
		}
	}
	if a != nil {
		log.Debug().Str("cluster_id", clusterID).Str("archive", a.URI("", "")).Msg("logs archived")
	}
}
