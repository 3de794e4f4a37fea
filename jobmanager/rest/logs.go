package rest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gofl/gofl/logs"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/rpc/restapi"
)

// LogFiles is where the log endpoints read. The JobManager implements it.
type LogFiles interface {
	// JobManager is the JobManager's own log files. Non-blocking.
	JobManager() logs.Source
	// TaskManager returns a client of a registered TaskManager's
	// LogService and a function to release it; an unknown TaskManager:
	// restapi.ErrTaskManagerNotFound. Blocks until ctx ends at most.
	TaskManager(ctx context.Context, id string) (pb.LogServiceClient, func(), error)
	// TaskManagers lists the registered TaskManagers' IDs.
	TaskManagers(ctx context.Context) ([]string, error)
}

// LogSizeHeader carries a served log's size in bytes when it was opened,
// so a follower knows where to continue (?offset=).
const LogSizeHeader = restapi.LogSizeHeader

func logList(files []logs.File) restapi.LogListInfo {
	out := restapi.LogListInfo{Logs: []restapi.LogInfo{}}
	for _, f := range files {
		out.Logs = append(out.Logs, logInfo(f))
	}
	return out
}

func logInfo(f logs.File) restapi.LogInfo {
	return restapi.LogInfo{Name: f.Name, Size: f.Size, MTime: f.MTime}
}

// logRoutes registers Flink's log paths (and per-job runner logs); only
// with Options.Logs.
// Contents are text/plain; ?tail=N lines, or ?offset=&length= bytes.
func (h *handler) logRoutes() {
	h.handle("GET /jobmanager/logs", h.jobManagerLogs)
	h.handle("GET /jobmanager/logs/{logname}", h.jobManagerLog)
	h.handle("GET /jobmanager/log", h.jobManagerLog)
	h.handle("GET /jobmanager/stdout", h.jobManagerLog)
	h.handle("GET /taskmanagers/{tmid}/logs", h.taskManagerLogs)
	h.handle("GET /taskmanagers/{tmid}/logs/{logname}", h.taskManagerLog)
	h.handle("GET /taskmanagers/{tmid}/log", h.taskManagerLog)
	h.handle("GET /taskmanagers/{tmid}/stdout", h.taskManagerLog)
	h.handle("GET /jobs/{jobid}/logs", h.jobLogs)
}

// logName is the name a log route asks for: {logname}, or the process's
// own log for /log and /stdout (one file: providers send stdout and
// stderr to the same place).
func logName(r *http.Request, own string) string {
	if n := r.PathValue("logname"); n != "" {
		return n
	}
	return own
}

func (h *handler) jobManagerLogs(context.Context, http.ResponseWriter, *http.Request) (int, any, error) {
	return http.StatusOK, logList(h.opts.Logs.JobManager().List()), nil
}

func (h *handler) jobManagerLog(_ context.Context, w http.ResponseWriter, r *http.Request) (int, any, error) {
	rng, err := logs.ParseRange(r.URL.Query())
	if err != nil {
		return 0, nil, logError(err)
	}
	f, err := h.opts.Logs.JobManager().Lookup(logName(r, logs.JobManagerLog))
	if err != nil {
		return 0, nil, logError(err)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set(LogSizeHeader, strconv.FormatInt(f.Size, 10))
	w.WriteHeader(http.StatusOK)
	_, _, _ = logs.Copy(w, f.Path(), pin(rng, f.Size)) // the status is out: a failure just ends the body
	return 0, nil, nil
}

func (h *handler) taskManagerLogs(ctx context.Context, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	c, release, err := h.opts.Logs.TaskManager(ctx, r.PathValue("tmid"))
	if err != nil {
		return 0, nil, err
	}
	defer release()
	files, err := logs.ListRemote(ctx, c)
	if err != nil {
		return 0, nil, logError(err)
	}
	return http.StatusOK, logList(files), nil
}

func (h *handler) taskManagerLog(ctx context.Context, w http.ResponseWriter, r *http.Request) (int, any, error) {
	rng, err := logs.ParseRange(r.URL.Query())
	if err != nil {
		return 0, nil, logError(err)
	}
	name := logName(r, logs.TaskManagerLog)
	c, release, err := h.opts.Logs.TaskManager(ctx, r.PathValue("tmid"))
	if err != nil {
		return 0, nil, err
	}
	defer release()
	// The size comes with the listing; the body streams after the header.
	files, err := logs.ListRemote(ctx, c)
	if err != nil {
		return 0, nil, logError(err)
	}
	var size int64 = -1
	for _, f := range files {
		if f.Name == name {
			size = f.Size
		}
	}
	if size < 0 {
		return 0, nil, logError(fmt.Errorf("%w: %s", logs.ErrNotFound, name))
	}
	rng = pin(rng, size)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set(LogSizeHeader, strconv.FormatInt(size, 10))
	w.WriteHeader(http.StatusOK)
	_ = logs.ReadRemote(ctx, c, name, rng, w)
	return 0, nil, nil
}

// jobLogs lists the runner logs of a job on every registered TaskManager.
func (h *handler) jobLogs(ctx context.Context, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	jobID := r.PathValue("jobid")
	tms, err := h.opts.Logs.TaskManagers(ctx)
	if err != nil {
		return 0, nil, err
	}
	out := restapi.JobLogs{Logs: []restapi.JobLog{}}
	for _, tm := range tms {
		c, release, err := h.opts.Logs.TaskManager(ctx, tm)
		if err != nil {
			out.Errors = append(out.Errors, fmt.Sprintf("%s: %v", tm, err))
			continue
		}
		files, err := logs.ListRemote(ctx, c)
		release()
		if err != nil {
			out.Errors = append(out.Errors, fmt.Sprintf("%s: %v", tm, err))
			continue
		}
		for _, f := range files {
			if logs.IsRunnerLogOf(f.Name, jobID) {
				out.Logs = append(out.Logs, restapi.JobLog{TaskManager: tm, LogInfo: logInfo(f)})
			}
		}
	}
	return http.StatusOK, out, nil
}

// pin bounds an open-ended byte range to the size the response announces,
// so a follower's next ?offset= is exact while the log grows.
func pin(rng logs.Range, size int64) logs.Range {
	if rng.Tail == 0 && rng.Length == 0 {
		if rng.Length = size - rng.Offset; rng.Length <= 0 {
			rng.Offset, rng.Length = size, 1 // nothing new: reads nothing
		}
	}
	return rng
}

// logError maps the logs package's errors to the API's.
func logError(err error) error {
	switch {
	case errors.Is(err, logs.ErrNotFound):
		return fmt.Errorf("%w: %w", restapi.ErrLogNotFound, err)
	case errors.Is(err, logs.ErrInvalid):
		return badRequest(err.Error())
	}
	return err
}
