package jobmanager

import (
	"context"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/historyserver"
	"github.com/gofl/gofl/jobmanager/dispatcher"
	"github.com/gofl/gofl/logs"
	"github.com/gofl/gofl/rpc/pb"
)

// logFiles serves the REST log endpoints (rest.LogFiles): the JobManager's
// own log from GOFL_LOG_FILE, which its provider sets, and TaskManagers'
// through their LogService at the RPC address they registered with.
type logFiles struct {
	disp *dispatcher.Dispatcher
	own  logs.Source
	// creds are the internal link's, as for every call to a TaskManager.
	creds credentials.TransportCredentials
}

func newLogFiles(disp *dispatcher.Dispatcher, creds credentials.TransportCredentials) logFiles {
	return logFiles{disp: disp, own: logs.Source{Own: os.Getenv(logs.EnvLogFile), OwnName: logs.JobManagerLog}, creds: creds}
}

func (l logFiles) JobManager() logs.Source { return l.own }

func (l logFiles) TaskManager(ctx context.Context, id string) (pb.LogServiceClient, func(), error) {
	info, err := l.disp.TaskManager(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	conn, err := grpc.NewClient(info.Path, grpc.WithTransportCredentials(l.creds))
	if err != nil {
		return nil, nil, fmt.Errorf("jobmanager: TaskManager %s at %s: %w", id, info.Path, err)
	}
	return pb.NewLogServiceClient(conn), func() { _ = conn.Close() }, nil
}

func (l logFiles) TaskManagers(ctx context.Context) ([]string, error) {
	tms, err := l.disp.TaskManagers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(tms.TaskManagers))
	for _, tm := range tms.TaskManagers {
		out = append(out, tm.ID)
	}
	return out, nil
}

// archiveJob archives a globally terminal job for the history server
// (jobmanager.archive.fs.dir); a failure is logged, as in Flink.
func archiveJob(a *historyserver.Archiver, jobID string, log zerolog.Logger) {
	if err := a.ArchiveJob(context.Background(), jobID); err != nil {
		log.Warn().Err(err).Str("job_id", jobID).Msg("the job is not archived for the history server")
		return
	}
	log.Info().Str("job_id", jobID).Str("archive", a.URI(jobID)).Msg("job archived for the history server")
}
