package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/internal/blob"
	"github.com/gofl/gofl/internal/tlsconf"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/rpc/restapi"
	"github.com/gofl/gofl/storage"
)

// Defaults of the Client's options.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultPollInterval = 100 * time.Millisecond
)

// maxResponseBytes bounds what a response may make the client buffer.
const maxResponseBytes = 64 << 20

// ErrUnexpectedState is wrapped by WaitForJobStatus when the job ended in a
// globally terminal state that was not asked for.
var ErrUnexpectedState = errors.New("client: job ended in an unexpected state")

// Client talks to one JobManager's REST API. It is safe for concurrent use.
type Client struct {
	base    *url.URL // scheme, host and optional path prefix
	digests string   // the digest cache's directory, "" for none
	hc      *http.Client
	timeout time.Duration
	poll    time.Duration
	token   *string // bearer token; never logged or put in errors
	tls     *tls.Config
}

// Option configures a Client.
type Option func(*Client)

// WithTimeout bounds every request (default DefaultTimeout); 0 or less
// leaves only the caller's context.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// EnvToken is the environment variable the client takes its REST bearer
// token from when no WithToken is given (rest.authentication.token on the
// JobManager).
const EnvToken = "GOFL_REST_TOKEN"

// WithToken sends token as "Authorization: Bearer <token>" on every
// request; an empty token sends none. Without it, New uses $GOFL_REST_TOKEN.
func WithToken(token string) Option { return func(c *Client) { c.token = &token } }

// ConfigOptions are the options cfg sets for a client of its cluster: the
// REST token of rest.authentication.token(-file); without one, New falls
// back to $GOFL_REST_TOKEN.
func ConfigOptions(cfg *conf.Configuration) ([]Option, error) {
	var opts []Option
	t, err := conf.RestToken(cfg)
	if err != nil {
		return nil, err
	}
	if t != "" {
		opts = append(opts, WithToken(t))
	}
	// security.ssl.rest.*: https, the configured CA, a client certificate.
	tc, err := tlsconf.RESTClient(context.Background(), cfg, tlsconf.ReadStorage(storage.OptionsFromConf(cfg)))
	if err != nil {
		return nil, err
	}
	if tc != nil {
		opts = append(opts, WithTLS(tc))
	}
	// The job binaries' digests: gofl run against a session sends the same
	// tens of MB again and again.
	if d, err := os.UserCacheDir(); err == nil {
		opts = append(opts, WithDigestCache(filepath.Join(d, "gofl", "digests")))
	}
	return opts, nil
}

// WithTLS makes HOST:PORT addresses https and verifies the server (and
// presents a client certificate) with cfg, unless WithHTTPClient gives
// the whole client.
func WithTLS(cfg *tls.Config) Option { return func(c *Client) { c.tls = cfg } }

// WithHTTPClient replaces http.DefaultClient, e.g. for TLS settings.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithDigestCache keeps the digests of the files UploadBlob sends in dir
// (blob.DigestCache), so that uploading an unchanged job binary again
// reads nothing; "" (the default) hashes the file every time.
func WithDigestCache(dir string) Option { return func(c *Client) { c.digests = dir } }

// WithPollInterval sets how often WaitForJobStatus asks (default
// DefaultPollInterval).
func WithPollInterval(d time.Duration) Option { return func(c *Client) { c.poll = d } }

// New returns a Client for address, which is HOST:PORT (plain HTTP) or an
// http(s) URL, possibly with a path prefix, e.g. https://proxy/flink.
func New(address string, opts ...Option) (*Client, error) {
	c := &Client{hc: http.DefaultClient, timeout: DefaultTimeout, poll: DefaultPollInterval}
	for _, o := range opts {
		o(c)
	}
	scheme := "http://"
	if c.tls != nil {
		scheme = "https://"
		if c.hc == http.DefaultClient {
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.TLSClientConfig = c.tls
			c.hc = &http.Client{Transport: tr}
		}
	}
	base, err := parseAddress(address, scheme)
	if err != nil {
		return nil, err
	}
	c.base = base
	if c.token == nil {
		t := strings.TrimSpace(os.Getenv(EnvToken))
		c.token = &t
	}
	if c.poll <= 0 {
		c.poll = DefaultPollInterval
	}
	return c, nil
}

func parseAddress(address, scheme string) (*url.URL, error) {
	address = strings.TrimSpace(address)
	if address == "" {
		return nil, errors.New("client: empty JobManager address; want HOST:PORT or an http(s) URL")
	}
	if !strings.Contains(address, "://") {
		if _, port, err := net.SplitHostPort(address); err != nil || port == "" {
			return nil, fmt.Errorf("client: JobManager address %q is not HOST:PORT or an http(s) URL", address)
		}
		address = scheme + address
	}
	u, err := url.Parse(address)
	if err != nil {
		return nil, fmt.Errorf("client: JobManager address: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: JobManager address %q: want an http or https URL with a host", address)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("client: JobManager address %q must not have a query or fragment", address)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// Address is the base URL requests go to, e.g. "http://localhost:8081".
func (c *Client) Address() string { return c.base.String() }

// Error is a non-2xx answer from the REST API. It unwraps to the restapi
// sentinel matching the status and path, if any.
type Error struct {
	Method     string
	Path       string
	StatusCode int
	// Messages are the server's {"errors": [...]}, or the raw body when it
	// was not such an object (a proxy's error page, say).
	Messages []string
	kind     error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.StatusCode, http.StatusText(e.StatusCode))
	if len(e.Messages) > 0 {
		s += ": " + strings.Join(e.Messages, "; ")
	}
	return s
}

func (e *Error) Unwrap() error { return e.kind }

// sentinel maps a status to the restapi error for the request.
func sentinel(method, path string, status int) error {
	switch status {
	case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusRequestEntityTooLarge:
		return restapi.ErrBadRequest
	case http.StatusNotFound:
		switch {
		case path == "/jobs" || strings.HasPrefix(path, "/jobs/"):
			return restapi.ErrJobNotFound
		case strings.HasPrefix(path, "/taskmanagers/"):
			return restapi.ErrTaskManagerNotFound
		case strings.HasPrefix(path, "/blobs/"):
			return restapi.ErrBlobNotFound
		}
	case http.StatusGone:
		return restapi.ErrResultGone
	case http.StatusConflict:
		if method == http.MethodPatch {
			return restapi.ErrJobNotCancellable
		}
		return restapi.ErrDuplicateJob
	}
	return nil
}

// do sends one request and decodes a 2xx JSON answer into out (if non-nil).
// path is the API path ("/jobs/..."); query is appended as is.
func (c *Client) do(ctx context.Context, method, path, query string, body []byte, out any) error {
	var rd io.Reader
	var headers map[string]string
	if body != nil {
		rd = bytes.NewReader(body)
		headers = map[string]string{"Content-Type": "application/json"}
	}
	return c.send(ctx, method, path, query, rd, headers, out)
}

// doStream sends a streamed request body, such as a blob upload.
func (c *Client) doStream(ctx context.Context, method, path string, body io.Reader, headers map[string]string, out any) error {
	h := map[string]string{"Content-Type": "application/octet-stream"}
	for k, v := range headers {
		h[k] = v
	}
	return c.send(ctx, method, path, "", body, h, out)
}

func (c *Client) send(ctx context.Context, method, path, query string, rd io.Reader, headers map[string]string, out any) error {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	u := *c.base
	u.Path += path
	u.RawQuery = query
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	if *c.token != "" {
		req.Header.Set("Authorization", "Bearer "+*c.token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return fmt.Errorf("client: cannot reach the JobManager at %s: %w", c.base.Host, err)
		}
		return fmt.Errorf("client: %s %s at %s: %w", method, path, c.base.Host, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("client: %s %s at %s: reading the response: %w", method, path, c.base.Host, err)
	}
	if len(b) > maxResponseBytes {
		return fmt.Errorf("client: %s %s at %s: the response is larger than %d bytes", method, path, c.base.Host, maxResponseBytes)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := &Error{Method: method, Path: path, StatusCode: resp.StatusCode, kind: sentinel(method, path, resp.StatusCode)}
		var er restapi.ErrorResponse
		if json.Unmarshal(b, &er) == nil && len(er.Errors) > 0 {
			e.Messages = er.Errors
		} else if s := strings.TrimSpace(string(b)); s != "" {
			e.Messages = []string{truncate(s, 512)}
		}
		return e
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*[]byte); ok { // a text body (logs)
		*raw = b
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("client: %s %s: decoding the response: %w", method, path, err)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func jobPath(jobID string) string { return "/jobs/" + url.PathEscape(jobID) }

// Overview is GET /overview: TaskManagers, slots and job counts.
func (c *Client) Overview(ctx context.Context) (restapi.ClusterOverview, error) {
	var o restapi.ClusterOverview
	return o, c.do(ctx, http.MethodGet, "/overview", "", nil, &o)
}

// ListJobs is GET /jobs: every job's ID and status.
func (c *Client) ListJobs(ctx context.Context) (restapi.JobIDsWithStatus, error) {
	var j restapi.JobIDsWithStatus
	return j, c.do(ctx, http.MethodGet, "/jobs", "", nil, &j)
}

// JobsOverview is GET /jobs/overview: a summary of every job.
func (c *Client) JobsOverview(ctx context.Context) (restapi.MultipleJobsDetails, error) {
	var j restapi.MultipleJobsDetails
	return j, c.do(ctx, http.MethodGet, "/jobs/overview", "", nil, &j)
}

// JobDetails is GET /jobs/{jobid}.
func (c *Client) JobDetails(ctx context.Context, jobID string) (restapi.JobDetails, error) {
	var j restapi.JobDetails
	return j, c.do(ctx, http.MethodGet, jobPath(jobID), "", nil, &j)
}

// JobExceptions is GET /jobs/{jobid}/exceptions, newest first.
func (c *Client) JobExceptions(ctx context.Context, jobID string) (restapi.JobExceptions, error) {
	var j restapi.JobExceptions
	return j, c.do(ctx, http.MethodGet, jobPath(jobID)+"/exceptions", "", nil, &j)
}

// JobExecutionResult is GET /jobs/{jobid}/execution-result: status
// IN_PROGRESS while the job runs, COMPLETED with the result once it ended.
func (c *Client) JobExecutionResult(ctx context.Context, jobID string) (restapi.JobExecutionResultResponse, error) {
	var r restapi.JobExecutionResultResponse
	return r, c.do(ctx, http.MethodGet, jobPath(jobID)+"/execution-result", "", nil, &r)
}

// WaitForJobResult polls the job's execution result until the job ended,
// as Flink's RestClusterClient.requestJobResult does, and returns it
// whatever the job's final state. Request errors (an unknown job too) and
// ctx end the wait.
func (c *Client) WaitForJobResult(ctx context.Context, jobID string) (*restapi.JobExecutionResult, error) {
	t := time.NewTicker(c.poll)
	defer t.Stop()
	for {
		r, err := c.JobExecutionResult(ctx, jobID)
		if err != nil {
			return nil, err
		}
		if r.Status.ID == restapi.ResultCompleted {
			if r.ExecutionResult == nil {
				return nil, fmt.Errorf("client: job %s is %s but the JobManager sent no result", jobID, r.Status.ID)
			}
			return r.ExecutionResult, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("client: waiting for the result of job %s: %w", jobID, ctx.Err())
		case <-t.C:
		}
	}
}

// JobVertex is GET /jobs/{jobid}/vertices/{vertexid}: the vertex's
// subtasks with their current attempt numbers and TaskManagers.
func (c *Client) JobVertex(ctx context.Context, jobID, vertexID string) (restapi.JobVertexInfo, error) {
	var v restapi.JobVertexInfo
	return v, c.do(ctx, http.MethodGet, jobPath(jobID)+"/vertices/"+url.PathEscape(vertexID), "", nil, &v)
}

// UploadBlob uploads the file at path to the JobManager's blob store unless
// a blob with the same content is already there (HEAD /blobs/{key}), so an
// unchanged job binary is never uploaded twice. It returns the blob's key
// and whether bytes were sent.
func (c *Client) UploadBlob(ctx context.Context, path string) (key string, uploaded bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", false, fmt.Errorf("client: %w", err)
	}
	defer f.Close()
	key, err = c.blobKey(path, f)
	if err != nil {
		return "", false, err
	}
	err = c.do(ctx, http.MethodHead, "/blobs/"+key, "", nil, nil)
	if err == nil {
		return key, false, nil
	}
	if !errors.Is(err, restapi.ErrBlobNotFound) {
		return "", false, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", false, fmt.Errorf("client: %w", err)
	}
	var info restapi.BlobInfo
	if err := c.doStream(ctx, http.MethodPost, "/blobs", f, map[string]string{restapi.BlobKeyHeader: key}, &info); err != nil {
		return "", false, err
	}
	if info.Key != key {
		return "", false, fmt.Errorf("client: the JobManager stored %s as %s", key, info.Key)
	}
	return key, true, nil
}

// blobKey is the key of f, opened from path: remembered in the digest
// cache (WithDigestCache) for an unchanged file, else hashed. A wrong key
// cannot slip through: the JobManager checks an upload against its key.
func (c *Client) blobKey(path string, f *os.File) (string, error) {
	if c.digests == "" {
		return hashFile(path, f)
	}
	dc := blob.DigestCache{Dir: c.digests}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if key, ok := dc.Lookup(path, f); ok {
		return key, nil
	}
	read := dc.StartRead(path, f)
	key, err := hashFile(path, f)
	if err == nil {
		dc.Record(read, f, key)
	}
	return key, err
}

// hashFile is the blob key of f's content, read from its offset to the end.
func hashFile(path string, f *os.File) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("client: hashing %s: %w", path, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// CancelJob is PATCH /jobs/{jobid}?mode=cancel. It returns once cancelling
// started; use WaitForJobStatus to wait for CANCELED.
func (c *Client) CancelJob(ctx context.Context, jobID string) error {
	return c.do(ctx, http.MethodPatch, jobPath(jobID), "mode=cancel", nil, nil)
}

// TaskManagers is GET /taskmanagers.
func (c *Client) TaskManagers(ctx context.Context) (restapi.TaskManagersInfo, error) {
	var t restapi.TaskManagersInfo
	return t, c.do(ctx, http.MethodGet, "/taskmanagers", "", nil, &t)
}

// TaskManager is GET /taskmanagers/{tmid}.
func (c *Client) TaskManager(ctx context.Context, id string) (restapi.TaskManagerInfo, error) {
	var t restapi.TaskManagerInfo
	return t, c.do(ctx, http.MethodGet, "/taskmanagers/"+url.PathEscape(id), "", nil, &t)
}

// SubmitJob is POST /jobs with g as protobuf JSON. It returns the job ID the
// Dispatcher accepted, once the job is accepted (not finished). Invalid
// graphs fail with every problem in the error and wrap ErrBadRequest.
func (c *Client) SubmitJob(ctx context.Context, g *jobgraph.JobGraph) (string, error) {
	if g == nil {
		return "", errors.New("client: SubmitJob of a nil JobGraph")
	}
	body, err := protojson.Marshal(jobgraph.ToProto(g))
	if err != nil {
		return "", fmt.Errorf("client: encoding the JobGraph: %w", err)
	}
	var r restapi.JobSubmitResponse
	if err := c.do(ctx, http.MethodPost, "/jobs", "", body, &r); err != nil {
		return "", err
	}
	return r.JobID, nil
}

// IsGloballyTerminal reports whether a job in state will never change
// state again: FINISHED, FAILED or CANCELED.
func IsGloballyTerminal(state string) bool {
	return state == "FINISHED" || state == "FAILED" || state == "CANCELED"
}

// WaitForJobStatus polls the job's details until its state is one of want,
// or globally terminal; with no want it waits for a globally terminal state.
// A terminal state not in want returns the details and an error wrapping
// ErrUnexpectedState. Request errors (including an unknown job) end the
// wait at once; so does ctx, returning the last details seen.
func (c *Client) WaitForJobStatus(ctx context.Context, jobID string, want ...string) (restapi.JobDetails, error) {
	t := time.NewTicker(c.poll)
	defer t.Stop()
	var last restapi.JobDetails
	for {
		d, err := c.JobDetails(ctx, jobID)
		if err != nil {
			if ctx.Err() != nil {
				return last, fmt.Errorf("client: waiting for job %s to reach %s (last state %q): %w", jobID, wanted(want), last.State, ctx.Err())
			}
			return last, err
		}
		last = d
		if slices.Contains(want, d.State) || (len(want) == 0 && IsGloballyTerminal(d.State)) {
			return d, nil
		}
		if IsGloballyTerminal(d.State) {
			return d, fmt.Errorf("client: job %s is %s, not %s: %w", jobID, d.State, wanted(want), ErrUnexpectedState)
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("client: waiting for job %s to reach %s (last state %q): %w", jobID, wanted(want), last.State, ctx.Err())
		case <-t.C:
		}
	}
}

func wanted(want []string) string {
	if len(want) == 0 {
		return "a terminal state"
	}
	return strings.Join(want, " or ")
}

// TriggerSavepoint is POST /jobs/{jobid}/savepoints: it starts a savepoint
// into dir (state.savepoints.dir when empty) and returns the trigger ID to
// poll with SavepointStatus or WaitForSavepoint.
func (c *Client) TriggerSavepoint(ctx context.Context, jobID, dir string) (string, error) {
	return c.trigger(ctx, jobPath(jobID)+"/savepoints", restapi.SavepointTriggerRequest{TargetDirectory: dir})
}

// StopWithSavepoint is POST /jobs/{jobid}/stop: a savepoint into dir, after
// which the job ends FINISHED. With drain the sources end their input
// first, so every event-time timer fires (Flink's stop --drain).
func (c *Client) StopWithSavepoint(ctx context.Context, jobID, dir string, drain bool) (string, error) {
	return c.trigger(ctx, jobPath(jobID)+"/stop", restapi.StopWithSavepointRequest{TargetDirectory: dir, Drain: drain})
}

func (c *Client) trigger(ctx context.Context, path string, req any) (string, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	var r restapi.TriggerResponse
	if err := c.do(ctx, http.MethodPost, path, "", body, &r); err != nil {
		return "", err
	}
	if r.RequestID == "" {
		return "", fmt.Errorf("client: POST %s: the JobManager returned no request-id", path)
	}
	return r.RequestID, nil
}

// SavepointStatus is GET /jobs/{jobid}/savepoints/{triggerid}.
func (c *Client) SavepointStatus(ctx context.Context, jobID, triggerID string) (restapi.SavepointStatusResponse, error) {
	var r restapi.SavepointStatusResponse
	return r, c.do(ctx, http.MethodGet, jobPath(jobID)+"/savepoints/"+url.PathEscape(triggerID), "", nil, &r)
}

// ErrSavepointFailed wraps the JobManager's reason for a failed savepoint.
var ErrSavepointFailed = errors.New("client: savepoint failed")

// WaitForSavepoint polls a savepoint (or stop-with-savepoint) until it
// completed and returns its location; a failed savepoint is an error
// wrapping ErrSavepointFailed with the JobManager's cause.
func (c *Client) WaitForSavepoint(ctx context.Context, jobID, triggerID string) (string, error) {
	t := time.NewTicker(c.poll)
	defer t.Stop()
	for {
		st, err := c.SavepointStatus(ctx, jobID, triggerID)
		if err != nil {
			return "", err
		}
		if st.Status.ID == restapi.ResultCompleted {
			switch {
			case st.Operation == nil:
				return "", fmt.Errorf("client: savepoint %s of job %s completed without a result", triggerID, jobID)
			case st.Operation.FailureCause != nil:
				return "", fmt.Errorf("%w: %s", ErrSavepointFailed, firstLine(st.Operation.FailureCause.StackTrace, st.Operation.FailureCause.Class))
			}
			return st.Operation.Location, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("client: waiting for savepoint %s of job %s: %w", triggerID, jobID, ctx.Err())
		case <-t.C:
		}
	}
}

// firstLine is the first line of s, or fallback when s is empty.
func firstLine(s, fallback string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if s = strings.TrimSpace(s); s == "" {
		return fallback
	}
	return s
}

// JobCheckpoints is GET /jobs/{jobid}/checkpoints: counts, summary, the
// latest checkpoints and the recent history.
func (c *Client) JobCheckpoints(ctx context.Context, jobID string) (restapi.CheckpointingStatistics, error) {
	var r restapi.CheckpointingStatistics
	return r, c.do(ctx, http.MethodGet, jobPath(jobID)+"/checkpoints", "", nil, &r)
}

// JobCheckpointConfig is GET /jobs/{jobid}/checkpoints/config.
func (c *Client) JobCheckpointConfig(ctx context.Context, jobID string) (restapi.CheckpointConfigInfo, error) {
	var r restapi.CheckpointConfigInfo
	return r, c.do(ctx, http.MethodGet, jobPath(jobID)+"/checkpoints/config", "", nil, &r)
}
