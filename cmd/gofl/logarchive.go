package main

import (
	"context"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/logs"
)

// processClusterID is the cluster a JobManager or TaskManager process
// belongs to: deployment.cluster-id, else GOFL_CLUSTER_ID (set by the
// providers); "" for a process started by hand without one.
func processClusterID(cfg *conf.Configuration) string {
	if id := conf.DeploymentClusterID.Get(cfg); id != "" {
		return id
	}
	return os.Getenv("GOFL_CLUSTER_ID")
}

// openProcessLogArchive opens the log archive of this process's cluster,
// or returns nil (logged) when it has no cluster ID or the archive cannot
// be opened: logs then stay where the provider keeps them.
func openProcessLogArchive(ctx context.Context, cfg *conf.Configuration, log zerolog.Logger) *logs.Archive {
	id := processClusterID(cfg)
	if id == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	a, err := logs.OpenArchive(ctx, cfg, id)
	if err != nil {
		log.Warn().Err(err).Msg("logs are not archived")
		return nil
	}
	return a
}

// archiveJobManagerLog copies the JobManager's own log (GOFL_LOG_FILE) to
// its cluster's archive as it ends. Best effort, bounded.
func archiveJobManagerLog(cfg *conf.Configuration, log zerolog.Logger) {
	src := logs.Source{Own: os.Getenv(logs.EnvLogFile), OwnName: logs.JobManagerLog}
	files := src.List()
	if len(files) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := openProcessLogArchive(ctx, cfg, log)
	if a == nil {
		return
	}
	defer a.Close()
	if err := a.Put(ctx, logs.JobManagerProcess, files); err != nil {
		log.Warn().Err(err).Msg("archiving the JobManager's log")
		return
	}
	log.Info().Str("archive", a.URI(logs.JobManagerProcess, logs.JobManagerLog)).Msg("log archived")
}
