package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gofl/gofl/internal/blob"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/rpc/restapi"
)

// Defaults for Options fields left zero.
const (
	DefaultMaxBodyBytes   = 16 << 20
	DefaultRequestTimeout = 10 * time.Second
)

// Options tune the handler. Zero values take the defaults.
type Options struct {
	// MaxBodyBytes bounds request bodies; larger ones get 413.
	MaxBodyBytes int64
	// RequestTimeout bounds each call into the Dispatcher.
	RequestTimeout time.Duration
	// Blobs, if set, serves POST /blobs and HEAD /blobs/{key}: uploads of
	// job binaries into the JobManager's content-addressed blob store.
	Blobs *blob.Store
	// MaxBlobBytes bounds one blob upload (default 1 GiB).
	MaxBlobBytes int64
}

// NewHandler returns the REST API handler serving d. Requests are logged at
// debug level on log. The handler is safe for concurrent use.
func NewHandler(d Dispatcher, log zerolog.Logger, opts Options) http.Handler {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxBlobBytes <= 0 {
		opts.MaxBlobBytes = 1 << 30
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	h := &handler{d: d, log: log, opts: opts}
	h.routes = h.buildRoutes()
	return h
}

type handler struct {
	d      Dispatcher
	log    zerolog.Logger
	opts   Options
	routes []route
}

// endpoint serves one method of a route. It returns the status and body to
// write, or an error that writeError maps to a status.
type endpoint func(ctx context.Context, w http.ResponseWriter, r *http.Request, params []string) (int, any, error)

// route is a path pattern whose "{...}" segments are parameters.
type route struct {
	segments []string
	methods  map[string]endpoint
	allow    string
}

func (h *handler) buildRoutes() []route {
	rs := []struct {
		pattern string
		methods map[string]endpoint
	}{
		{"/overview", map[string]endpoint{http.MethodGet: h.overview}},
		{"/jobs", map[string]endpoint{http.MethodGet: h.listJobs, http.MethodPost: h.submitJob}},
		// /jobs/overview is listed before /jobs/{jobid}; the first match wins.
		{"/jobs/overview", map[string]endpoint{http.MethodGet: h.jobsOverview}},
		{"/jobs/{jobid}", map[string]endpoint{http.MethodGet: h.jobDetails, http.MethodPatch: h.cancelJob}},
		{"/jobs/{jobid}/exceptions", map[string]endpoint{http.MethodGet: h.jobExceptions}},
		{"/jobs/{jobid}/execution-result", map[string]endpoint{http.MethodGet: h.jobExecutionResult}},
		{"/jobs/{jobid}/vertices/{vertexid}", map[string]endpoint{http.MethodGet: h.jobVertex}},
		{"/jobs/{jobid}/vertices/{vertexid}/backpressure", map[string]endpoint{http.MethodGet: h.jobVertexBackPressure}},
		{"/blobs", map[string]endpoint{http.MethodPost: h.uploadBlob}},
		{"/blobs/{key}", map[string]endpoint{http.MethodHead: h.blobInfo}},
		{"/taskmanagers", map[string]endpoint{http.MethodGet: h.taskManagers}},
		{"/taskmanagers/{tmid}", map[string]endpoint{http.MethodGet: h.taskManager}},
	}
	out := make([]route, len(rs))
	for i, r := range rs {
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPatch} {
			if r.methods[m] != nil {
				allow = append(allow, m)
			}
		}
		out[i] = route{segments: strings.Split(strings.Trim(r.pattern, "/"), "/"), methods: r.methods, allow: strings.Join(allow, ", ")}
	}
	return out
}

// match returns the route for path and its parameters, or ok=false.
func match(routes []route, path string) (route, []string, bool) {
	if path == "/v1" || strings.HasPrefix(path, "/v1/") { // Flink's versioned paths
		path = path[len("/v1"):]
	}
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for _, r := range routes {
		if len(r.segments) != len(segs) {
			continue
		}
		var params []string
		ok := true
		for i, s := range r.segments {
			switch {
			case strings.HasPrefix(s, "{"):
				if segs[i] == "" {
					ok = false
				}
				params = append(params, segs[i])
			case s != segs[i]:
				ok = false
			}
			if !ok {
				break
			}
		}
		if ok {
			return r, params, true
		}
	}
	return route{}, nil, false
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w}
	defer func() {
		h.log.Debug().Str("method", r.Method).Str("path", r.URL.Path).Int("status", rec.status).
			Dur("duration", time.Since(start)).Msg("rest request")
	}()

	rt, params, ok := match(h.routes, r.URL.Path)
	if !ok {
		h.writeJSON(rec, http.StatusNotFound, restapi.ErrorResponse{Errors: []string{"Not found: " + r.URL.Path}})
		return
	}
	ep := rt.methods[r.Method]
	if ep == nil {
		rec.Header().Set("Allow", rt.allow)
		h.writeJSON(rec, http.StatusMethodNotAllowed, restapi.ErrorResponse{Errors: []string{
			fmt.Sprintf("method %s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, rt.allow)}})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.opts.RequestTimeout)
	defer cancel()
	status, body, err := ep(ctx, rec, r, params)
	if err != nil {
		h.writeError(rec, r, err)
		return
	}
	h.writeJSON(rec, status, body)
}

func (h *handler) overview(ctx context.Context, _ http.ResponseWriter, _ *http.Request, _ []string) (int, any, error) {
	o, err := h.d.Overview(ctx)
	return http.StatusOK, o, err
}

func (h *handler) listJobs(ctx context.Context, _ http.ResponseWriter, _ *http.Request, _ []string) (int, any, error) {
	j, err := h.d.ListJobs(ctx)
	if j.Jobs == nil {
		j.Jobs = []restapi.JobIDStatus{} // Flink sends [], not null
	}
	return http.StatusOK, j, err
}

func (h *handler) jobsOverview(ctx context.Context, _ http.ResponseWriter, _ *http.Request, _ []string) (int, any, error) {
	j, err := h.d.JobsOverview(ctx)
	if j.Jobs == nil {
		j.Jobs = []restapi.JobOverview{}
	}
	return http.StatusOK, j, err
}

func (h *handler) jobDetails(ctx context.Context, _ http.ResponseWriter, _ *http.Request, p []string) (int, any, error) {
	j, err := h.d.JobDetails(ctx, p[0])
	if j.Vertices == nil {
		j.Vertices = []restapi.JobVertexDetails{}
	}
	return http.StatusOK, j, err
}

func (h *handler) jobExceptions(ctx context.Context, _ http.ResponseWriter, _ *http.Request, p []string) (int, any, error) {
	e, err := h.d.JobExceptions(ctx, p[0])
	if e.ExceptionHistory.Entries == nil {
		e.ExceptionHistory.Entries = []restapi.ExceptionEntry{}
	}
	return http.StatusOK, e, err
}

func (h *handler) jobExecutionResult(ctx context.Context, _ http.ResponseWriter, _ *http.Request, p []string) (int, any, error) {
	r, err := h.d.JobExecutionResult(ctx, p[0])
	return http.StatusOK, r, err
}

func (h *handler) jobVertex(ctx context.Context, _ http.ResponseWriter, _ *http.Request, p []string) (int, any, error) {
	v, err := h.d.JobVertex(ctx, p[0], p[1])
	if v.Subtasks == nil {
		v.Subtasks = []restapi.SubtaskInfo{}
	}
	return http.StatusOK, v, err
}

// jobVertexBackPressure serves the back-pressure view computed from the
// subtasks' backPressuredTimeMsPerSecond (Flink's JobVertexBackPressureInfo).
func (h *handler) jobVertexBackPressure(ctx context.Context, _ http.ResponseWriter, _ *http.Request, p []string) (int, any, error) {
	v, err := h.d.JobVertex(ctx, p[0], p[1])
	if err != nil {
		return 0, nil, err
	}
	bp := v.BackPressure
	if bp.Status == "" {
		bp.Status = restapi.BackPressureStatusDeprecated
	}
	return http.StatusOK, bp, nil
}

func (h *handler) taskManagers(ctx context.Context, _ http.ResponseWriter, _ *http.Request, _ []string) (int, any, error) {
	t, err := h.d.TaskManagers(ctx)
	if t.TaskManagers == nil {
		t.TaskManagers = []restapi.TaskManagerInfo{}
	}
	return http.StatusOK, t, err
}

func (h *handler) taskManager(ctx context.Context, _ http.ResponseWriter, _ *http.Request, p []string) (int, any, error) {
	t, err := h.d.TaskManager(ctx, p[0])
	return http.StatusOK, t, err
}

func (h *handler) cancelJob(ctx context.Context, _ http.ResponseWriter, r *http.Request, p []string) (int, any, error) {
	// Flink's PATCH /jobs/{jobid} knows only mode=cancel (stop-with-savepoint
	// is a separate endpoint).
	if mode := r.URL.Query().Get("mode"); mode != "" && mode != "cancel" {
		return 0, nil, badRequest(fmt.Sprintf("unknown mode %q (supported: cancel)", mode))
	}
	if err := h.d.CancelJob(ctx, p[0]); err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, struct{}{}, nil
}

func (h *handler) uploadBlob(_ context.Context, w http.ResponseWriter, r *http.Request, _ []string) (int, any, error) {
	if h.opts.Blobs == nil {
		return 0, nil, fmt.Errorf("%w: this JobManager does not store blobs", restapi.ErrBadRequest)
	}
	key, stored, err := h.opts.Blobs.Put(http.MaxBytesReader(w, r.Body, h.opts.MaxBlobBytes), r.Header.Get(restapi.BlobKeyHeader), 0)
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		return 0, nil, &tooLargeError{limit: mbe.Limit}
	}
	if errors.Is(err, blob.ErrDigestMismatch) || errors.Is(err, blob.ErrInvalidKey) {
		return 0, nil, fmt.Errorf("%w: %w", restapi.ErrBadRequest, err)
	}
	if err != nil {
		return 0, nil, err
	}
	info := restapi.BlobInfo{Key: key, Stored: stored}
	if p, err := h.opts.Blobs.Path(key); err == nil {
		if st, err := os.Stat(p); err == nil {
			info.Size = st.Size()
		}
	}
	return http.StatusCreated, info, nil
}

func (h *handler) blobInfo(_ context.Context, _ http.ResponseWriter, _ *http.Request, p []string) (int, any, error) {
	if h.opts.Blobs == nil {
		return 0, nil, fmt.Errorf("%w: blob %s", restapi.ErrBlobNotFound, p[0])
	}
	path, err := h.opts.Blobs.Path(p[0])
	if errors.Is(err, blob.ErrInvalidKey) {
		return 0, nil, fmt.Errorf("%w: %w", restapi.ErrBadRequest, err)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %s", restapi.ErrBlobNotFound, p[0])
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %s", restapi.ErrBlobNotFound, p[0])
	}
	return http.StatusOK, restapi.BlobInfo{Key: p[0], Size: st.Size()}, nil
}

func (h *handler) submitJob(ctx context.Context, w http.ResponseWriter, r *http.Request, _ []string) (int, any, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return 0, nil, &tooLargeError{limit: mbe.Limit}
		}
		return 0, nil, badRequest("reading the request body: " + err.Error())
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return 0, nil, badRequest("the request body is empty; want a JobGraph as protobuf JSON")
	}
	// encoding/json reports syntax errors with an offset even at end of
	// input, where protojson only says "unexpected EOF".
	var syntax *json.SyntaxError
	if err := json.Unmarshal(body, new(json.RawMessage)); errors.As(err, &syntax) {
		line, col := position(body, syntax.Offset)
		return 0, nil, badRequest(fmt.Sprintf("the request body is malformed JSON (line %d:%d): %v", line, col, err))
	}
	var m pb.JobGraph
	if err := protojson.Unmarshal(body, &m); err != nil {
		return 0, nil, badRequest("the request body is not a JobGraph in protobuf JSON: " + protoErrorText(err))
	}
	id, err := h.d.SubmitJob(ctx, jobgraph.FromProto(&m))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, restapi.JobSubmitResponse{JobURL: "/jobs/" + url.PathEscape(id), JobID: id}, nil
}

// protoErrorText drops protobuf-go's "proto:" prefix, which it randomly
// spells with a non-breaking space; the rest names the cause and, for JSON
// errors, the position as (line L:C).
func protoErrorText(err error) string {
	s := err.Error()
	for _, p := range []string{"proto: ", "proto:\u00a0"} {
		s = strings.TrimPrefix(s, p)
	}
	return s
}

// position converts a json.SyntaxError offset (bytes read, including the
// offending one) to the 1-based line and column of the offending byte.
func position(b []byte, offset int64) (line, col int) {
	p := int(min(max(offset-1, 0), int64(len(b))))
	before := b[:p]
	line = 1 + bytes.Count(before, []byte("\n"))
	col = p - bytes.LastIndexByte(before, '\n')
	return line, col
}

// badRequestError is a 400 whose text is only the message; the sentinel
// would add nothing for the API's user.
type badRequestError struct{ msg string }

func badRequest(msg string) error { return &badRequestError{msg} }

func (e *badRequestError) Error() string { return e.msg }
func (e *badRequestError) Unwrap() error { return restapi.ErrBadRequest }

type tooLargeError struct{ limit int64 }

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("the request body exceeds the limit of %d bytes", e.limit)
}

// writeError maps err to a status and writes the error body.
func (h *handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	msgs := []string{err.Error()}
	var ve *jobgraph.ValidationError
	var tl *tooLargeError
	switch {
	case errors.As(err, &tl):
		status = http.StatusRequestEntityTooLarge
	case errors.As(err, &ve):
		status = http.StatusBadRequest
		msgs = append([]string(nil), ve.Problems...)
	case errors.Is(err, jobgraph.ErrInvalid), errors.Is(err, restapi.ErrBadRequest):
		status = http.StatusBadRequest
	case errors.Is(err, restapi.ErrJobNotFound), errors.Is(err, restapi.ErrTaskManagerNotFound), errors.Is(err, restapi.ErrBlobNotFound):
		status = http.StatusNotFound
	case errors.Is(err, restapi.ErrDuplicateJob), errors.Is(err, restapi.ErrJobNotCancellable):
		status = http.StatusConflict
	case errors.Is(err, restapi.ErrResultGone):
		status = http.StatusGone
	default:
		if errors.Is(err, context.DeadlineExceeded) {
			msgs = []string{fmt.Sprintf("the Dispatcher did not answer within %v: %v", h.opts.RequestTimeout, err)}
		}
		h.log.Error().Err(err).Str("method", r.Method).Str("path", r.URL.Path).Msg("rest request failed")
	}
	h.writeJSON(w, status, restapi.ErrorResponse{Errors: msgs})
}

func (h *handler) writeJSON(w http.ResponseWriter, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		// Only a programming error (an unencodable type) gets here.
		h.log.Error().Err(err).Msg("rest: encoding the response")
		status = http.StatusInternalServerError
		b, _ = json.Marshal(restapi.ErrorResponse{Errors: []string{"internal error encoding the response"}})
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// statusRecorder remembers the status for the request log.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}
