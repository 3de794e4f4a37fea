package historyserver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/internal/ids"
	"github.com/gofl/gofl/internal/version"
	"github.com/gofl/gofl/rpc/restapi"
	"github.com/gofl/gofl/storage"
)

// DefaultRefresh is the scan interval when Options.Refresh is zero.
const DefaultRefresh = 10 * time.Second

// Options configure a Server.
type Options struct {
	// Dirs are the archive directories' URIs (file:// or hdfs://).
	Dirs []string
	// Refresh is how often Run scans them (default DefaultRefresh).
	Refresh time.Duration
	// Storage configures the HDFS client.
	Storage storage.Options
	// UI, if set, serves every path that is not the REST API (the web
	// dashboard, web.Handler); without it / lists the archived jobs.
	UI  http.Handler
	Log zerolog.Logger
}

// job is one loaded archive.
type job struct {
	overview restapi.JobOverview
	paths    map[string][]byte
	modTime  time.Time
	size     int64
}

// Server serves archived jobs. Safe for concurrent use.
type Server struct {
	opts Options
	mu   sync.RWMutex
	jobs map[string]*job // by job ID
}

// New returns a Server; call Refresh or Run to load archives.
func New(opts Options) *Server {
	if opts.Refresh <= 0 {
		opts.Refresh = DefaultRefresh
	}
	return &Server{opts: opts, jobs: map[string]*job{}}
}

// Run scans at once and then every Options.Refresh until ctx ends; scan
// failures are logged, not fatal (an archive directory may come later).
func (s *Server) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.Refresh(ctx); err != nil && ctx.Err() == nil {
			s.opts.Log.Warn().Err(err).Msg("scanning the job archives")
		}
		t.Reset(s.opts.Refresh)
	}
}

// Refresh scans every directory once, loading new and changed archives
// and dropping removed ones. Blocking.
func (s *Server) Refresh(ctx context.Context) error {
	var errs []error
	seen := map[string]bool{}
	for _, uri := range s.opts.Dirs {
		if err := s.scan(ctx, uri, seen); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 { // a directory that failed keeps its jobs
		s.mu.Lock()
		for id := range s.jobs {
			if !seen[id] {
				delete(s.jobs, id)
			}
		}
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}

func (s *Server) scan(ctx context.Context, uri string, seen map[string]bool) error {
	fsys, dir, err := storage.Open(ctx, uri, s.opts.Storage)
	if err != nil {
		return fmt.Errorf("historyserver: %s: %w", uri, err)
	}
	defer fsys.Close()
	ents, err := fsys.ReadDir(ctx, dir)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	} else if err != nil {
		return fmt.Errorf("historyserver: %s: %w", uri, err)
	}
	for _, e := range ents {
		if e.IsDir || ids.JobID("job id", e.Name) != nil {
			continue
		}
		seen[e.Name] = true
		s.mu.RLock()
		old := s.jobs[e.Name]
		s.mu.RUnlock()
		if old != nil && old.modTime.Equal(e.ModTime) && old.size == e.Size {
			continue
		}
		j, err := load(ctx, fsys, e.Path)
		if err != nil {
			s.opts.Log.Warn().Err(err).Str("archive", fsys.URI(e.Path)).Msg("skipping a job archive")
			continue
		}
		j.modTime, j.size = e.ModTime, e.Size
		s.mu.Lock()
		s.jobs[e.Name] = j
		s.mu.Unlock()
	}
	return nil
}

func load(ctx context.Context, fsys storage.FileSystem, p string) (*job, error) {
	b, err := storage.ReadFile(ctx, fsys, p)
	if err != nil {
		return nil, err
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("historyserver: %s: %w", fsys.URI(p), err)
	}
	j := &job{paths: map[string][]byte{}}
	for _, a := range f.Archive {
		if a.Path == "/jobs/overview" {
			var o restapi.MultipleJobsDetails
			if json.Unmarshal([]byte(a.JSON), &o) == nil && len(o.Jobs) == 1 {
				j.overview = o.Jobs[0]
			}
			continue
		}
		j.paths[a.Path] = []byte(a.JSON)
	}
	if j.overview.ID != path.Base(p) {
		return nil, fmt.Errorf("historyserver: %s: no overview of job %s", fsys.URI(p), path.Base(p))
	}
	return j, nil
}

// overviews lists the archived jobs, newest first.
func (s *Server) overviews() []restapi.JobOverview {
	s.mu.RLock()
	out := make([]restapi.JobOverview, 0, len(s.jobs))
	for _, j := range s.jobs {
		out = append(out, j.overview)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b restapi.JobOverview) int {
		return cmp.Or(cmp.Compare(b.StartTime, a.StartTime), strings.Compare(a.ID, b.ID))
	})
	return out
}

// isAPI tells REST paths from the dashboard's.
func isAPI(p string) bool {
	for _, pre := range []string{"/jobs", "/overview", "/config"} {
		if p == pre || strings.HasPrefix(p, pre+"/") {
			return true
		}
	}
	return false
}

// ServeHTTP serves the archived REST JSON (GET; /v1 prefix optional) and
// the dashboard.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if p == "/v1" || strings.HasPrefix(p, "/v1/") {
		p = strings.TrimPrefix(p, "/v1")
	}
	if t := strings.TrimRight(p, "/"); t != "" {
		p = t
	} else {
		p = "/"
	}
	if !isAPI(p) {
		switch {
		case s.opts.UI != nil:
			s.opts.UI.ServeHTTP(w, r)
		case p == "/":
			s.index(w)
		default:
			writeJSON(w, http.StatusNotFound, restapi.ErrorResponse{Errors: []string{"Not found: " + r.URL.Path}})
		}
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSON(w, http.StatusMethodNotAllowed, restapi.ErrorResponse{Errors: []string{
			fmt.Sprintf("method %s is not allowed on %s: the history server is read-only", r.Method, r.URL.Path)}})
		return
	}
	switch p {
	case "/jobs/overview":
		writeJSON(w, http.StatusOK, restapi.MultipleJobsDetails{Jobs: s.overviews()})
		return
	case "/jobs":
		out := restapi.JobIDsWithStatus{Jobs: []restapi.JobIDStatus{}}
		for _, o := range s.overviews() {
			out.Jobs = append(out.Jobs, restapi.JobIDStatus{ID: o.ID, Status: o.State})
		}
		writeJSON(w, http.StatusOK, out)
		return
	case "/overview":
		o := restapi.ClusterOverview{Version: version.Version}
		for _, j := range s.overviews() {
			switch j.State {
			case "FINISHED":
				o.JobsFinished++
			case "CANCELED":
				o.JobsCancelled++
			case "FAILED":
				o.JobsFailed++
			}
		}
		writeJSON(w, http.StatusOK, o)
		return
	case "/config":
		writeJSON(w, http.StatusOK, map[string]any{
			"refresh-interval": s.opts.Refresh.Milliseconds(), "timezone-name": "UTC", "timezone-offset": 0,
			"flink-version": version.Version, "flink-revision": "",
			"features": map[string]bool{"web-submit": false, "web-cancel": false, "web-rescale": false, "web-history": true},
		})
		return
	}
	if rest, ok := strings.CutPrefix(p, "/jobs/"); ok {
		id, _, _ := strings.Cut(rest, "/")
		s.mu.RLock()
		j := s.jobs[id]
		var b []byte
		if j != nil {
			b = j.paths[p]
		}
		s.mu.RUnlock()
		if b != nil {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(append(b, '\n'))
			return
		}
		if j == nil && ids.JobID("job id", id) == nil {
			writeJSON(w, http.StatusNotFound, restapi.ErrorResponse{Errors: []string{"Job " + id + " not found in the archive"}})
			return
		}
	}
	writeJSON(w, http.StatusNotFound, restapi.ErrorResponse{Errors: []string{"Not found: " + r.URL.Path}})
}

// index is a plain page listing the archived jobs, for when no dashboard
// is mounted.
func (s *Server) index(w http.ResponseWriter) {
	var b strings.Builder
	b.WriteString("<!doctype html><html><head><meta charset=\"utf-8\"><title>gofl history server</title></head><body>\n<h1>gofl history server</h1>\n<table>\n<tr><th>Job</th><th>Name</th><th>State</th><th>Duration</th></tr>\n")
	for _, o := range s.overviews() {
		fmt.Fprintf(&b, "<tr><td><a href=\"jobs/%s\">%s</a></td><td>%s</td><td>%s</td><td>%v</td></tr>\n",
			html.EscapeString(o.ID), html.EscapeString(o.ID), html.EscapeString(o.Name), html.EscapeString(o.State),
			time.Duration(o.Duration)*time.Millisecond)
	}
	b.WriteString("</table>\n</body></html>\n")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(b.String()))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
