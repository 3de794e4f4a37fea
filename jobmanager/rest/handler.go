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
	"path"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gofl/gofl/internal/blob"
	"github.com/gofl/gofl/internal/ids"
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
	// Uploads, if set, tracks uploaded blobs and the jobs using them, so
	// unreferenced uploads are removed (blob.upload.cleanup-grace).
	Uploads *blob.Uploads
	// DisableSubmit refuses POST /jobs and POST /blobs with 403
	// (web.submit.enable: false), except for requests marked Trusted.
	DisableSubmit bool
	// DisableCancel refuses cancel and stop-with-savepoint with 403
	// (web.cancel.enable: false).
	DisableCancel bool
	// Logs, if set, serves the log endpoints (logs.go).
	Logs LogFiles
	// Version is the cluster's version, for GET /config.
	Version string
	// RefreshInterval is how often a dashboard polls, for GET /config
	// (default DefaultRefreshInterval).
	RefreshInterval time.Duration
	// Config is GET /jobmanager/config: the options set on the cluster,
	// secrets already masked (conf.Configuration.Settings masks them).
	Config []restapi.ConfigEntry
}

// gate names what a route changes, for web.submit.enable and
// web.cancel.enable.
type gate int

const (
	gateNone gate = iota
	gateSubmit
	gateCancel
)

type trustedKey struct{}

// Trusted marks a request context as coming through an authenticated path
// of the JobManager itself (an application cluster's driver): it passes
// web.submit.enable.
func Trusted(ctx context.Context) context.Context { return context.WithValue(ctx, trustedKey{}, true) }

func isTrusted(ctx context.Context) bool { v, _ := ctx.Value(trustedKey{}).(bool); return v }

// refused answers whether the gate closes r's route, and why.
func (h *handler) refused(g gate, r *http.Request) (string, bool) {
	switch {
	case g == gateSubmit && h.opts.DisableSubmit && !isTrusted(r.Context()):
		return "job submission and uploads over REST are disabled on this cluster (web.submit.enable: false)", true
	case g == gateCancel && h.opts.DisableCancel:
		return "cancelling and stopping jobs over REST is disabled on this cluster (web.cancel.enable: false)", true
	}
	return "", false
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
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = DefaultRefreshInterval
	}
	h := &handler{d: d, log: log, opts: opts, mux: http.NewServeMux(), denied: map[string]bool{}}
	h.routes()
	return h
}

type handler struct {
	d    Dispatcher
	log  zerolog.Logger
	opts Options
	// mux routes by method and path (Go's patterns; GET patterns also
	// serve HEAD). Paths reach it without Flink's /v1 prefix and without a
	// trailing slash.
	mux *http.ServeMux
	// methods are the methods some pattern serves, for Allow headers.
	methods []string
	// denied holds the patterns registered only to answer 405, where a
	// wildcard pattern would otherwise take a method the literal path
	// does not serve (PATCH /jobs/overview is not PATCH /jobs/{jobid}).
	denied map[string]bool
}

// endpoint serves one route. It returns the status and body to write, or
// an error that writeError maps to a status. Path wildcards are in
// r.PathValue.
type endpoint func(ctx context.Context, w http.ResponseWriter, r *http.Request) (int, any, error)

// routes registers Flink's REST paths. The most specific pattern wins, so
// /jobs/overview is not a job ID.
func (h *handler) routes() {
	h.handle("GET /overview", h.overview)
	h.handle("GET /jobs", h.listJobs)
	h.handleGated("POST /jobs", gateSubmit, h.submitJob)
	h.handle("GET /jobs/overview", h.jobsOverview)
	h.deny("PATCH /jobs/overview")
	h.handle("GET /jobs/{jobid}", h.jobDetails)
	h.handleGated("PATCH /jobs/{jobid}", gateCancel, h.cancelJob)
	h.handle("GET /jobs/{jobid}/exceptions", h.jobExceptions)
	h.handle("GET /jobs/{jobid}/execution-result", h.jobExecutionResult)
	h.handle("GET /jobs/{jobid}/vertices/{vertexid}", h.jobVertex)
	h.handle("GET /jobs/{jobid}/vertices/{vertexid}/backpressure", h.jobVertexBackPressure)
	h.handle("GET /jobs/{jobid}/checkpoints", h.checkpointStatistics)
	h.handle("GET /jobs/{jobid}/checkpoints/config", h.checkpointConfig)
	h.handle("POST /jobs/{jobid}/savepoints", h.triggerSavepoint)
	h.handle("GET /jobs/{jobid}/savepoints/{triggerid}", h.savepointStatus)
	h.handleGated("POST /jobs/{jobid}/stop", gateCancel, h.stopWithSavepoint)
	h.handleGated("POST /blobs", gateSubmit, h.uploadBlob)
	h.handle("HEAD /blobs/{key}", h.blobInfo)
	h.handle("GET /taskmanagers", h.taskManagers)
	h.handle("GET /taskmanagers/{tmid}", h.taskManager)
	h.metricRoutes()
	if h.opts.Logs != nil {
		h.logRoutes()
	}
	h.dashboardRoutes()
	slices.Sort(h.methods)
}

func (h *handler) handle(pattern string, ep endpoint) { h.handleGated(pattern, gateNone, ep) }

// handleGated registers ep behind gate g (and the identifier checks).
func (h *handler) handleGated(pattern string, g gate, ep endpoint) {
	h.addMethod(pattern)
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if msg, no := h.refused(g, r); no {
			h.writeJSON(w, http.StatusForbidden, restapi.ErrorResponse{Errors: []string{msg}})
			return
		}
		if err := checkPathIDs(r); err != nil {
			h.writeError(w, r, badRequest(err.Error()))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), h.opts.RequestTimeout)
		defer cancel()
		status, body, err := ep(ctx, w, r)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		if status == 0 { // the endpoint wrote a response of its own (logs)
			return
		}
		h.writeJSON(w, status, body)
	})
}

// pathIDs are the path wildcards that carry identifiers, with their rules.
var pathIDs = []struct {
	wildcard, field string
	check           func(field, s string) error
}{
	{"jobid", "job id", ids.JobID},
	{"vertexid", "vertex id", ids.VertexID},
	{"triggerid", "trigger id", ids.Name},
	{"key", "blob key", ids.BlobKey},
	{"tmid", "task manager id", ids.Name},
	{"logname", "log name", ids.Name},
}

// checkPathIDs checks r's identifiers before any reaches the Dispatcher, a
// map or a log line.
func checkPathIDs(r *http.Request) error {
	for _, p := range pathIDs {
		if v := r.PathValue(p.wildcard); v != "" {
			if err := p.check(p.field, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// deny registers pattern to answer 405.
func (h *handler) deny(pattern string) {
	h.denied[pattern] = true
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { h.writeMethodNotAllowed(w, r, r.URL.Path) })
}

func (h *handler) addMethod(pattern string) {
	method, _, _ := strings.Cut(pattern, " ")
	ms := []string{method}
	if method == http.MethodGet {
		ms = append(ms, http.MethodHead) // the mux serves HEAD with GET patterns
	}
	for _, m := range ms {
		if !slices.Contains(h.methods, m) {
			h.methods = append(h.methods, m)
		}
	}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w}
	defer func() {
		h.log.Debug().Str("method", r.Method).Str("path", r.URL.Path).Int("status", rec.status).
			Dur("duration", time.Since(start)).Msg("rest request")
	}()

	rr, ok := routable(r)
	if !ok {
		h.notFound(rec, r)
		return
	}
	if _, pattern := h.mux.Handler(rr); pattern == "" {
		// No pattern matches: the mux answers 405 if one would with
		// another method, else 404. Only the status is taken from it;
		// the body is Flink's error JSON.
		probe := &headerRecorder{header: http.Header{}}
		h.mux.ServeHTTP(probe, rr)
		if probe.status == http.StatusMethodNotAllowed {
			h.writeMethodNotAllowed(rec, rr, r.URL.Path)
		} else {
			h.notFound(rec, r)
		}
		return
	}
	h.mux.ServeHTTP(rec, rr)
}

// routable returns r with its path as the mux sees it: without Flink's
// version prefix /v1 and without trailing slashes. ok is false for a path
// that is not clean (empty segments, dot segments), which the mux would
// redirect instead; no Flink path has one.
func routable(r *http.Request) (*http.Request, bool) {
	p, raw := muxPath(r.URL.Path), r.URL.RawPath
	if raw != "" {
		raw = muxPath(raw)
	}
	rr := r
	if p != r.URL.Path || raw != r.URL.RawPath {
		rr = new(http.Request)
		*rr = *r
		rr.URL = new(url.URL)
		*rr.URL = *r.URL
		rr.URL.Path, rr.URL.RawPath = p, raw
	}
	esc := rr.URL.EscapedPath()
	return rr, path.Clean(esc) == esc
}

func muxPath(p string) string {
	if p == "/v1" {
		p = "/"
	} else if rest, ok := strings.CutPrefix(p, "/v1/"); ok {
		p = "/" + rest
	}
	if t := strings.TrimRight(p, "/"); t != "" {
		return t
	}
	return "/"
}

// writeMethodNotAllowed answers 405 to r (as routed) with the methods its
// path serves: those whose best pattern is a real route, not a deny one.
func (h *handler) writeMethodNotAllowed(w http.ResponseWriter, r *http.Request, shownPath string) {
	var allow []string
	for _, m := range h.methods {
		probe := new(http.Request)
		*probe = *r
		probe.Method = m
		if _, pattern := h.mux.Handler(probe); pattern != "" && !h.denied[pattern] {
			allow = append(allow, m)
		}
	}
	list := strings.Join(allow, ", ")
	w.Header().Set("Allow", list)
	h.writeJSON(w, http.StatusMethodNotAllowed, restapi.ErrorResponse{Errors: []string{
		fmt.Sprintf("method %s is not allowed on %s (allowed: %s)", r.Method, shownPath, list)}})
}

func (h *handler) notFound(w http.ResponseWriter, r *http.Request) {
	h.writeJSON(w, http.StatusNotFound, restapi.ErrorResponse{Errors: []string{"Not found: " + r.URL.Path}})
}

// headerRecorder takes what the mux would answer to a request no pattern
// matches; only the status is used.
type headerRecorder struct {
	header http.Header
	status int
}

func (p *headerRecorder) Header() http.Header { return p.header }
func (p *headerRecorder) WriteHeader(code int) {
	if p.status == 0 {
		p.status = code
	}
}
func (p *headerRecorder) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	return len(b), nil
}

func (h *handler) overview(ctx context.Context, _ http.ResponseWriter, _ *http.Request) (int, any, error) {
	o, err := h.d.Overview(ctx)
	return http.StatusOK, o, err
}

func (h *handler) listJobs(ctx context.Context, _ http.ResponseWriter, _ *http.Request) (int, any, error) {
	j, err := h.d.ListJobs(ctx)
	if j.Jobs == nil {
		j.Jobs = []restapi.JobIDStatus{} // Flink sends [], not null
	}
	return http.StatusOK, j, err
}

func (h *handler) jobsOverview(ctx context.Context, _ http.ResponseWriter, _ *http.Request) (int, any, error) {
	j, err := h.d.JobsOverview(ctx)
	if j.Jobs == nil {
		j.Jobs = []restapi.JobOverview{}
	}
	return http.StatusOK, j, err
}

func (h *handler) jobDetails(ctx context.Context, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	j, err := h.d.JobDetails(ctx, r.PathValue("jobid"))
	if j.Vertices == nil {
		j.Vertices = []restapi.JobVertexDetails{}
	}
	if j.Plan.Nodes == nil {
		j.Plan.Nodes = []restapi.JobPlanNode{}
	}
	return http.StatusOK, j, err
}

func (h *handler) jobExceptions(ctx context.Context, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	e, err := h.d.JobExceptions(ctx, r.PathValue("jobid"))
	if e.ExceptionHistory.Entries == nil {
		e.ExceptionHistory.Entries = []restapi.ExceptionEntry{}
	}
	return http.StatusOK, e, err
}

func (h *handler) jobExecutionResult(ctx context.Context, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	res, err := h.d.JobExecutionResult(ctx, r.PathValue("jobid"))
	return http.StatusOK, res, err
}

func (h *handler) jobVertex(ctx context.Context, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	v, err := h.d.JobVertex(ctx, r.PathValue("jobid"), r.PathValue("vertexid"))
	if v.Subtasks == nil {
		v.Subtasks = []restapi.SubtaskInfo{}
	}
	return http.StatusOK, v, err
}

// jobVertexBackPressure serves the back-pressure view computed from the
// subtasks' backPressuredTimeMsPerSecond (Flink's JobVertexBackPressureInfo).
func (h *handler) jobVertexBackPressure(ctx context.Context, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	v, err := h.d.JobVertex(ctx, r.PathValue("jobid"), r.PathValue("vertexid"))
	if err != nil {
		return 0, nil, err
	}
	bp := v.BackPressure
	if bp.Status == "" {
		bp.Status = restapi.BackPressureStatusDeprecated
	}
	return http.StatusOK, bp, nil
}

func (h *handler) taskManagers(ctx context.Context, _ http.ResponseWriter, _ *http.Request) (int, any, error) {
	t, err := h.d.TaskManagers(ctx)
	if t.TaskManagers == nil {
		t.TaskManagers = []restapi.TaskManagerInfo{}
	}
	return http.StatusOK, t, err
}

func (h *handler) taskManager(ctx context.Context, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	t, err := h.d.TaskManager(ctx, r.PathValue("tmid"))
	return http.StatusOK, t, err
}

func (h *handler) cancelJob(ctx context.Context, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	// Flink's PATCH /jobs/{jobid} knows only mode=cancel (stop-with-savepoint
	// is a separate endpoint).
	if mode := r.URL.Query().Get("mode"); mode != "" && mode != "cancel" {
		return 0, nil, badRequest(fmt.Sprintf("unknown mode %q (supported: cancel)", mode))
	}
	if err := h.d.CancelJob(ctx, r.PathValue("jobid")); err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, struct{}{}, nil
}

func (h *handler) uploadBlob(_ context.Context, w http.ResponseWriter, r *http.Request) (int, any, error) {
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
	if qe := (*blob.QuotaError)(nil); errors.As(err, &qe) {
		return 0, nil, &tooLargeError{msg: fmt.Sprintf("the cluster's blob store is full: %d of %d bytes in use and the upload does not fit "+
			"(blob.upload.max-total-size); uploads no running job uses are removed after blob.upload.cleanup-grace", qe.Used, qe.Max)}
	}
	if err != nil {
		return 0, nil, err
	}
	if h.opts.Uploads != nil {
		h.opts.Uploads.Uploaded(key)
	}
	info := restapi.BlobInfo{Key: key, Stored: stored}
	if p, err := h.opts.Blobs.Path(key); err == nil {
		if st, err := os.Stat(p); err == nil {
			info.Size = st.Size()
		}
	}
	return http.StatusCreated, info, nil
}

func (h *handler) blobInfo(_ context.Context, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	key := r.PathValue("key")
	if h.opts.Blobs == nil {
		return 0, nil, fmt.Errorf("%w: blob %s", restapi.ErrBlobNotFound, key)
	}
	file, err := h.opts.Blobs.Path(key)
	if errors.Is(err, blob.ErrInvalidKey) {
		return 0, nil, fmt.Errorf("%w: %w", restapi.ErrBadRequest, err)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %s", restapi.ErrBlobNotFound, key)
	}
	st, err := os.Stat(file)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %s", restapi.ErrBlobNotFound, key)
	}
	if h.opts.Uploads != nil {
		h.opts.Uploads.Touch(key) // a submission using it is likely next
	}
	return http.StatusOK, restapi.BlobInfo{Key: key, Size: st.Size()}, nil
}

func (h *handler) submitJob(ctx context.Context, w http.ResponseWriter, r *http.Request) (int, any, error) {
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
	jg := jobgraph.FromProto(&m)
	id, err := h.d.SubmitJob(ctx, jg)
	if err != nil {
		return 0, nil, err
	}
	if h.opts.Uploads != nil && jg.BinaryKey != "" {
		h.opts.Uploads.Reference(jg.BinaryKey, id)
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

// tooLargeError is a 413: a body over a limit, or an upload over the quota
// (msg set).
type tooLargeError struct {
	limit int64
	msg   string
}

func (e *tooLargeError) Error() string {
	if e.msg != "" {
		return e.msg
	}
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
	case errors.Is(err, restapi.ErrJobNotFound), errors.Is(err, restapi.ErrTaskManagerNotFound), errors.Is(err, restapi.ErrBlobNotFound),
		errors.Is(err, restapi.ErrOperationNotFound), errors.Is(err, restapi.ErrLogNotFound):
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
