package historyserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/internal/ids"
	"github.com/gofl/gofl/rpc/restapi"
	"github.com/gofl/gofl/storage"
)

// ArchivedJSON is one REST response in an archive (Flink's ArchivedJson).
type ArchivedJSON struct {
	Path string `json:"path"`
	JSON string `json:"json"`
}

// File is the content of one job's archive file.
type File struct {
	Archive []ArchivedJSON `json:"archive"`
}

// Archiver writes finished jobs' REST JSON to an archive directory.
type Archiver struct {
	uri     string
	opts    storage.Options
	rest    http.Handler
	log     zerolog.Logger
	timeout time.Duration
}

// NewArchiver archives into the directory at uri (jobmanager.archive.fs.dir),
// reading the JSON from rest (the JobManager's REST handler, called
// in-process: no token, no network). The file system is opened per job,
// so an unreachable HDFS fails that job's archiving only.
func NewArchiver(uri string, opts storage.Options, rest http.Handler, log zerolog.Logger) *Archiver {
	return &Archiver{uri: strings.TrimRight(uri, "/"), opts: opts, rest: rest, log: log, timeout: time.Minute}
}

// URI is where the job's archive goes.
func (a *Archiver) URI(jobID string) string { return a.uri + "/" + jobID }

// get answers a GET of p from the REST handler; ok is false for a non-200.
func (a *Archiver) get(ctx context.Context, p string) ([]byte, bool) {
	req := httptest.NewRequest(http.MethodGet, p, nil).WithContext(ctx)
	rec := httptest.NewRecorder()
	a.rest.ServeHTTP(rec, req)
	return bytes.TrimSpace(rec.Body.Bytes()), rec.Code == http.StatusOK
}

// ArchiveJob writes the job's archive file (atomically, replacing an
// older one). Blocking, bounded by a minute; safe for concurrent use.
// The Dispatcher calls it through Config.OnGloballyTerminal.
func (a *Archiver) ArchiveJob(ctx context.Context, jobID string) error {
	if err := ids.JobID("job id", jobID); err != nil {
		return fmt.Errorf("historyserver: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	f, err := a.collect(ctx, jobID)
	if err != nil {
		return err
	}
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("historyserver: %w", err)
	}
	fsys, dir, err := storage.Open(ctx, a.uri, a.opts)
	if err != nil {
		return fmt.Errorf("historyserver: archiving job %s: %w", jobID, err)
	}
	defer fsys.Close()
	if _, err := storage.WriteFileAtomic(ctx, fsys, path.Join(dir, jobID), bytes.NewReader(b)); err != nil {
		return fmt.Errorf("historyserver: archiving job %s to %s: %w", jobID, a.URI(jobID), err)
	}
	return nil
}

func (a *Archiver) collect(ctx context.Context, jobID string) (File, error) {
	var f File
	add := func(p string, b []byte) { f.Archive = append(f.Archive, ArchivedJSON{Path: p, JSON: string(b)}) }
	jobPath := "/jobs/" + jobID
	details, ok := a.get(ctx, jobPath)
	if !ok {
		return File{}, fmt.Errorf("historyserver: job %s: GET %s: %s", jobID, jobPath, details)
	}
	add(jobPath, details)
	// The overview holds only this job, as in Flink; the server merges.
	if b, ok := a.get(ctx, "/jobs/overview"); ok {
		var all restapi.MultipleJobsDetails
		if json.Unmarshal(b, &all) == nil {
			one := restapi.MultipleJobsDetails{Jobs: []restapi.JobOverview{}}
			for _, j := range all.Jobs {
				if j.ID == jobID {
					one.Jobs = append(one.Jobs, j)
				}
			}
			if ob, err := json.Marshal(one); err == nil {
				add("/jobs/overview", ob)
			}
		}
	}
	var d restapi.JobDetails
	if err := json.Unmarshal(details, &d); err != nil {
		return File{}, fmt.Errorf("historyserver: job %s: decoding its details: %w", jobID, err)
	}
	add(jobPath+"/config", jobConfig(d))
	for _, sub := range []string{"/exceptions", "/checkpoints", "/checkpoints/config", "/execution-result"} {
		if b, ok := a.get(ctx, jobPath+sub); ok {
			add(jobPath+sub, b)
		}
	}
	for _, v := range d.Vertices {
		vp := jobPath + "/vertices/" + v.ID
		if b, ok := a.get(ctx, vp); ok {
			add(vp, b)
		}
		if b, ok := a.get(ctx, vp+"/backpressure"); ok {
			add(vp+"/backpressure", b)
		}
	}
	return f, nil
}

// jobConfig is Flink's /jobs/{id}/config (JobConfigInfo) as far as gofl
// knows it.
func jobConfig(d restapi.JobDetails) []byte {
	b, _ := json.Marshal(map[string]any{"jid": d.ID, "name": d.Name, "execution-config": map[string]any{}})
	return b
}
