package rest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/jobmanager/rest"
	"github.com/gofl/gofl/jobmanager/rest/resttest"
	"github.com/gofl/gofl/rpc/restapi"
)

// wordcountJSON is a JobGraph as a client sends it: protobuf JSON with enum names.
const wordcountJSON = `{
  "jobId": "00000000000000000000000000000001",
  "name": "wordcount",
  "type": "JOB_TYPE_STREAMING",
  "vertices": [
    {"id": "source", "name": "Source", "parallelism": 2, "invokable": "stream"},
    {"id": "sink", "name": "Sink", "parallelism": 3, "maxParallelism": 256, "invokable": "stream",
     "operators": [{"id": "op", "name": "print", "kind": "sink"}]}
  ],
  "edges": [
    {"source": "source", "target": "sink", "distribution": "DISTRIBUTION_PATTERN_ALL_TO_ALL",
     "partitionType": "RESULT_PARTITION_TYPE_PIPELINED", "shipStrategy": "rebalance"}
  ],
  "config": {"pipeline.name": "wc"}
}`

type env struct {
	d   *resttest.Dispatcher
	srv *httptest.Server
	log *bytes.Buffer
}

func newEnv(t *testing.T, opts rest.Options) *env {
	t.Helper()
	d := resttest.NewDispatcher()
	d.SetClock(func() time.Time { return time.UnixMilli(1_700_000_010_000) })
	var buf bytes.Buffer
	log := zerolog.New(&buf).Level(zerolog.DebugLevel)
	srv := httptest.NewServer(rest.NewHandler(d, log, opts))
	t.Cleanup(srv.Close)
	return &env{d: d, srv: srv, log: &buf}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (e *env) do(t *testing.T, method, path, body string) response {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return response{resp.StatusCode, resp.Header, b}
}

// errorsOf decodes an error body and checks its status.
func errorsOf(t *testing.T, r response, status int) []string {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	var er map[string][]string
	if err := json.Unmarshal(r.body, &er); err != nil || len(er) != 1 || len(er["errors"]) == 0 {
		t.Fatalf("error body %s is not {\"errors\": [...]}: %v", r.body, err)
	}
	return er["errors"]
}

// keys decodes a JSON object and returns its keys, sorted.
func keys(t *testing.T, b []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func wantKeys(t *testing.T, what string, b []byte, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := keys(t, b); !slices.Equal(got, want) {
		t.Errorf("%s keys = %q\nwant %q", what, got, want)
	}
}

func (e *env) submit(t *testing.T, body string) restapi.JobSubmitResponse {
	t.Helper()
	r := e.do(t, http.MethodPost, "/jobs", body)
	if r.status != http.StatusAccepted {
		t.Fatalf("POST /jobs: %d %s", r.status, r.body)
	}
	var sr restapi.JobSubmitResponse
	if err := json.Unmarshal(r.body, &sr); err != nil {
		t.Fatal(err)
	}
	return sr
}

func TestSubmitJob(t *testing.T) {
	e := newEnv(t, rest.Options{})
	r := e.do(t, http.MethodPost, "/jobs", wordcountJSON)
	if r.status != http.StatusAccepted {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	wantKeys(t, "submit response", r.body, "jobUrl", "jobid")
	var sr restapi.JobSubmitResponse
	if err := json.Unmarshal(r.body, &sr); err != nil {
		t.Fatal(err)
	}
	const id = "00000000000000000000000000000001"
	if sr.JobID != id || sr.JobURL != "/jobs/"+id {
		t.Errorf("response = %+v", sr)
	}
	g := e.d.Graph(id)
	if g == nil {
		t.Fatal("the Dispatcher got no job")
	}
	if g.Type != jobgraph.Streaming || len(g.Vertices) != 2 || g.Vertices[1].MaxParallelism != 256 ||
		g.Vertices[1].Operators[0].Kind != "sink" || g.Edges[0].Distribution != jobgraph.AllToAll ||
		g.Edges[0].PartitionType != jobgraph.Pipelined || g.Config["pipeline.name"] != "wc" {
		t.Errorf("decoded graph = %+v", g)
	}

	// The same ID again conflicts.
	errs := errorsOf(t, e.do(t, http.MethodPost, "/jobs", wordcountJSON), http.StatusConflict)
	if !strings.Contains(errs[0], id) || !strings.Contains(errs[0], restapi.ErrDuplicateJob.Error()) {
		t.Errorf("409 errors = %q", errs)
	}
}

func TestSubmitRoundTripsToProto(t *testing.T) {
	e := newEnv(t, rest.Options{})
	g := resttest.Wordcount("")
	b, err := protojson.Marshal(jobgraph.ToProto(g))
	if err != nil {
		t.Fatal(err)
	}
	sr := e.submit(t, string(b))
	if len(sr.JobID) != 32 {
		t.Errorf("generated job ID %q", sr.JobID)
	}
	got := e.d.Graph(sr.JobID)
	if got == nil || got.Name != g.Name || len(got.Vertices) != 3 || len(got.Edges) != 2 || got.Edges[0].ShipStrategy != "hash" {
		t.Errorf("graph = %+v", got)
	}
}

func TestSubmitMalformed(t *testing.T) {
	e := newEnv(t, rest.Options{})
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"syntax", `{"name": "x",,}`, []string{"malformed JSON", "(line 1:14)", "invalid character ','"}},
		{"syntax line 3", "{\n\"name\": \"x\",\n  }", []string{"malformed JSON", "(line 3:3)"}},
		{"truncated", "{\n  \"name\": \"x\"", []string{"malformed JSON", "(line 2:13)", "unexpected end"}},
		{"array", `[1, 2]`, []string{"not a JobGraph", "(line 1:1)"}},
		{"unknown field", `{"jobName": "x"}`, []string{"not a JobGraph", `unknown field "jobName"`}},
		{"wrong type", `{"vertices": [{"parallelism": "four"}]}`, []string{"not a JobGraph", "parallelism", "line 1"}},
		{"unknown enum", `{"type": "STREAMING"}`, []string{"not a JobGraph", "STREAMING"}},
		{"empty", ``, []string{"empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := errorsOf(t, e.do(t, http.MethodPost, "/jobs", tc.body), http.StatusBadRequest)
			for _, w := range tc.want {
				if !strings.Contains(errs[0], w) {
					t.Errorf("error %q lacks %q", errs[0], w)
				}
			}
		})
	}
}

func TestSubmitInvalidListsEveryProblem(t *testing.T) {
	e := newEnv(t, rest.Options{})
	body := `{"type": "JOB_TYPE_BATCH", "vertices": [
	  {"id": "a", "parallelism": 0, "invokable": "x"},
	  {"id": "b", "parallelism": 1}],
	  "edges": [{"source": "a", "target": "zzz", "distribution": "DISTRIBUTION_PATTERN_POINTWISE", "partitionType": "RESULT_PARTITION_TYPE_BLOCKING"}]}`
	errs := errorsOf(t, e.do(t, http.MethodPost, "/jobs", body), http.StatusBadRequest)
	want := []string{
		`vertex "a" has parallelism 0 (must be at least 1)`,
		`vertex "b" has no invokable`,
		`edge #0 (a -> zzz): target vertex "zzz" does not exist`,
	}
	if !slices.Equal(errs, want) {
		t.Errorf("errors = %q\nwant %q", errs, want)
	}
}

func TestSubmitTooLarge(t *testing.T) {
	e := newEnv(t, rest.Options{MaxBodyBytes: 100})
	body := `{"name": "` + strings.Repeat("x", 200) + `"}`
	errs := errorsOf(t, e.do(t, http.MethodPost, "/jobs", body), http.StatusRequestEntityTooLarge)
	if !strings.Contains(errs[0], "100 bytes") {
		t.Errorf("errors = %q", errs)
	}
	// At the limit is fine (and then invalid, not too large).
	errorsOf(t, e.do(t, http.MethodPost, "/jobs", `{"name": "x"}`), http.StatusBadRequest)
}

func TestReadRoutes(t *testing.T) {
	e := newEnv(t, rest.Options{})
	e.d.AddTaskManager(restapi.TaskManagerInfo{ID: "tm-1", Path: "127.0.0.1:4000", DataPort: 4001, SlotsNumber: 2, FreeSlots: 1, TimeSinceLastHeartbeat: 1_700_000_000_000})
	id := e.submit(t, wordcountJSON).JobID
	e.d.AddException(id, restapi.ExceptionEntry{ExceptionName: "TaskFailure", Stacktrace: "boom", Timestamp: 5, TaskName: "Sink (1/3)", Location: "tm-1", FailureType: "RECOVERABLE"})

	type check struct {
		path string
		keys []string
		into any
	}
	var (
		ov  restapi.ClusterOverview
		js  restapi.JobIDsWithStatus
		jo  restapi.MultipleJobsDetails
		jd  restapi.JobDetails
		ex  restapi.JobExceptions
		tms restapi.TaskManagersInfo
		tm  restapi.TaskManagerInfo
	)
	for _, c := range []check{
		{"/overview", []string{"taskmanagers", "slots-total", "slots-available", "jobs-running", "jobs-finished", "jobs-cancelled", "jobs-failed", "flink-version", "flink-commit"}, &ov},
		{"/jobs", []string{"jobs"}, &js},
		{"/jobs/overview", []string{"jobs"}, &jo},
		{"/jobs/" + id, []string{"jid", "name", "isStoppable", "state", "job-type", "start-time", "end-time", "duration", "now", "timestamps", "vertices", "status-counts", "plan"}, &jd},
		{"/jobs/" + id + "/exceptions", []string{"exceptionHistory", "root-exception", "timestamp"}, &ex},
		{"/taskmanagers", []string{"taskmanagers"}, &tms},
		{"/taskmanagers/tm-1", []string{"id", "path", "dataPort", "timeSinceLastHeartbeat", "slotsNumber", "freeSlots"}, &tm},
		{"/v1/taskmanagers/tm-1/", []string{"id", "path", "dataPort", "timeSinceLastHeartbeat", "slotsNumber", "freeSlots"}, &tm},
	} {
		r := e.do(t, http.MethodGet, c.path, "")
		if r.status != http.StatusOK {
			t.Errorf("GET %s: %d %s", c.path, r.status, r.body)
			continue
		}
		wantKeys(t, c.path, r.body, c.keys...)
		if err := json.Unmarshal(r.body, c.into); err != nil {
			t.Errorf("GET %s: %v", c.path, err)
		}
	}
	if ov.TaskManagers != 1 || ov.SlotsTotal != 2 || ov.SlotsAvailable != 1 || ov.JobsRunning != 1 {
		t.Errorf("overview = %+v", ov)
	}
	if len(js.Jobs) != 1 || js.Jobs[0] != (restapi.JobIDStatus{ID: id, Status: "RUNNING"}) {
		t.Errorf("jobs = %+v", js)
	}
	if len(jo.Jobs) != 1 || jo.Jobs[0].ID != id || jo.Jobs[0].Tasks.Total != 5 || jo.Jobs[0].Tasks.Running != 5 || jo.Jobs[0].EndTime != -1 {
		t.Errorf("jobs overview = %+v", jo)
	}
	if jd.ID != id || jd.State != "RUNNING" || jd.JobType != "STREAMING" || len(jd.Vertices) != 2 || jd.Vertices[1].Tasks["RUNNING"] != 3 {
		t.Errorf("job details = %+v", jd)
	}
	if len(ex.ExceptionHistory.Entries) != 1 || ex.ExceptionHistory.Entries[0].TaskName != "Sink (1/3)" || ex.RootException != "boom" {
		t.Errorf("exceptions = %+v", ex)
	}
	if len(tms.TaskManagers) != 1 || tm.ID != "tm-1" || tm.DataPort != 4001 {
		t.Errorf("taskmanagers = %+v, %+v", tms, tm)
	}

	// Nested shapes carry Flink's names too.
	r := e.do(t, http.MethodGet, "/jobs/overview", "")
	var raw struct{ Jobs []json.RawMessage }
	if err := json.Unmarshal(r.body, &raw); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, "job overview", raw.Jobs[0], "jid", "name", "state", "start-time", "end-time", "duration", "last-modification", "tasks")
	r = e.do(t, http.MethodGet, "/jobs/"+id, "")
	var det struct{ Vertices []json.RawMessage }
	if err := json.Unmarshal(r.body, &det); err != nil || len(det.Vertices) == 0 {
		t.Fatalf("job details %s: %v", r.body, err)
	}
	wantKeys(t, "job vertex", det.Vertices[0], "id", "name", "parallelism", "maxParallelism", "status", "start-time", "end-time", "duration", "tasks", "metrics")
	var vm struct {
		Metrics json.RawMessage `json:"metrics"`
	}
	_ = json.Unmarshal(det.Vertices[0], &vm)
	wantKeys(t, "job vertex metrics", vm.Metrics, ioMetricsKeys...)
}

func TestEmptyListsAreArrays(t *testing.T) {
	e := newEnv(t, rest.Options{})
	for path, want := range map[string]string{
		"/jobs":          `{"jobs":[]}`,
		"/jobs/overview": `{"jobs":[]}`,
		"/taskmanagers":  `{"taskmanagers":[]}`,
	} {
		r := e.do(t, http.MethodGet, path, "")
		if got := strings.TrimSpace(string(r.body)); r.status != 200 || got != want {
			t.Errorf("GET %s = %d %s; want %s", path, r.status, got, want)
		}
	}
}

func TestNotFound(t *testing.T) {
	e := newEnv(t, rest.Options{})
	for _, c := range []struct{ method, path, want string }{
		{http.MethodGet, "/jobs/" + unknownJob, unknownJob},
		{http.MethodGet, "/jobs/" + unknownJob + "/exceptions", unknownJob},
		{http.MethodPatch, "/jobs/" + unknownJob, unknownJob},
		{http.MethodGet, "/taskmanagers/tm-9", "tm-9"},
		{http.MethodGet, "/nope", "Not found: /nope"},
		{http.MethodGet, "/jobs/a/b/c", "Not found"},
		{http.MethodGet, "/v1x/jobs", "Not found"},
	} {
		errs := errorsOf(t, e.do(t, c.method, c.path, ""), http.StatusNotFound)
		if !strings.Contains(errs[0], c.want) {
			t.Errorf("%s %s: errors %q lack %q", c.method, c.path, errs, c.want)
		}
	}
}

func TestMethodNotAllowed(t *testing.T) {
	e := newEnv(t, rest.Options{})
	for _, c := range []struct{ method, path, allow string }{
		// GET routes also serve HEAD, so Allow lists it.
		{http.MethodDelete, "/jobs", "GET, HEAD, POST"},
		{http.MethodPost, "/overview", "GET, HEAD"},
		{http.MethodPut, "/jobs/abc", "GET, HEAD, PATCH"},
		{http.MethodPost, "/taskmanagers/tm-1", "GET, HEAD"},
		{http.MethodPatch, "/jobs/overview", "GET, HEAD"},
	} {
		r := e.do(t, c.method, c.path, "")
		errs := errorsOf(t, r, http.StatusMethodNotAllowed)
		if got := r.header.Get("Allow"); got != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, got, c.allow)
		}
		if !strings.Contains(errs[0], c.method) {
			t.Errorf("%s %s: errors %q", c.method, c.path, errs)
		}
	}
}

func TestCancel(t *testing.T) {
	e := newEnv(t, rest.Options{})
	id := e.submit(t, wordcountJSON).JobID

	errs := errorsOf(t, e.do(t, http.MethodPatch, "/jobs/"+id+"?mode=stop", ""), http.StatusBadRequest)
	if !strings.Contains(errs[0], `unknown mode "stop"`) {
		t.Errorf("errors = %q", errs)
	}
	for _, q := range []string{"?mode=cancel", ""} { // cancel is the default and idempotent while cancelling
		r := e.do(t, http.MethodPatch, "/jobs/"+id+q, "")
		if r.status != http.StatusAccepted || strings.TrimSpace(string(r.body)) != "{}" {
			t.Errorf("PATCH %s: %d %s", q, r.status, r.body)
		}
	}
	var jd restapi.JobDetails
	if err := json.Unmarshal(e.do(t, http.MethodGet, "/jobs/"+id, "").body, &jd); err != nil || jd.State != "CANCELLING" {
		t.Errorf("state after cancel = %q (%v)", jd.State, err)
	}
	e.d.SetState(id, "FINISHED")
	errs = errorsOf(t, e.do(t, http.MethodPatch, "/jobs/"+id, ""), http.StatusConflict)
	if !strings.Contains(errs[0], "not cancellable") {
		t.Errorf("errors = %q", errs)
	}
}

func TestInternalErrors(t *testing.T) {
	e := newEnv(t, rest.Options{RequestTimeout: 50 * time.Millisecond})
	e.d.FailWith(errors.New("mailbox closed"))
	errs := errorsOf(t, e.do(t, http.MethodGet, "/overview", ""), http.StatusInternalServerError)
	if !slices.Equal(errs, []string{"mailbox closed"}) {
		t.Errorf("errors = %q", errs)
	}
	if !strings.Contains(e.log.String(), `"level":"error","error":"mailbox closed"`) {
		t.Errorf("500 not logged as error: %s", e.log)
	}

	e.d.FailWith(nil)
	e.d.Block()
	defer e.d.Unblock()
	start := time.Now()
	errs = errorsOf(t, e.do(t, http.MethodGet, "/jobs", ""), http.StatusInternalServerError)
	if !strings.Contains(errs[0], "did not answer within 50ms") || time.Since(start) > 30*time.Second { // not blocked for good
		t.Errorf("errors = %q after %v", errs, time.Since(start))
	}
}

func TestRequestLog(t *testing.T) {
	e := newEnv(t, rest.Options{})
	e.do(t, http.MethodGet, "/jobs/"+unknownJob, "")
	var ev struct {
		Level, Method, Path, Message string
		Status                       int
		Duration                     *float64
	}
	line, _, _ := strings.Cut(e.log.String(), "\n")
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		t.Fatalf("log %q: %v", e.log, err)
	}
	if ev.Level != "debug" || ev.Method != "GET" || ev.Path != "/jobs/"+unknownJob || ev.Status != 404 || ev.Duration == nil {
		t.Errorf("log event = %+v from %s", ev, line)
	}
}

func TestJobVertex(t *testing.T) {
	e := newEnv(t, rest.Options{})
	id := e.submit(t, wordcountJSON).JobID
	r := e.do(t, http.MethodGet, "/jobs/"+id+"/vertices/source", "")
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	wantKeys(t, "vertex", r.body, "id", "name", "parallelism", "maxParallelism", "now", "subtasks")
	var v restapi.JobVertexInfo
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatal(err)
	}
	if v.ID != "source" || len(v.Subtasks) != v.Parallelism || v.Parallelism == 0 {
		t.Fatalf("vertex %+v", v)
	}
	errorsOf(t, e.do(t, http.MethodGet, "/jobs/"+id+"/vertices/nope", ""), http.StatusNotFound)
	errorsOf(t, e.do(t, http.MethodGet, "/jobs/"+unknownJob+"/vertices/source", ""), http.StatusNotFound)
	var raw struct {
		Subtasks []json.RawMessage `json:"subtasks"`
	}
	if err := json.Unmarshal(r.body, &raw); err != nil || len(raw.Subtasks) == 0 {
		t.Fatalf("subtasks %s: %v", r.body, err)
	}
	wantKeys(t, "subtask", raw.Subtasks[0], "subtask", "status", "attempt", "host", "taskmanager-id", "metrics")
	var sub struct {
		Metrics json.RawMessage `json:"metrics"`
	}
	_ = json.Unmarshal(raw.Subtasks[0], &sub)
	wantKeys(t, "subtask metrics", sub.Metrics, ioMetricsKeys...)
}

// Flink's IOMetricsInfo field names.
var ioMetricsKeys = []string{"read-bytes", "read-bytes-complete", "write-bytes", "write-bytes-complete",
	"read-records", "read-records-complete", "write-records", "write-records-complete",
	"accumulated-backpressured-time", "accumulated-idle-time", "accumulated-busy-time"}

func TestJobVertexBackPressure(t *testing.T) {
	e := newEnv(t, rest.Options{})
	id := e.submit(t, wordcountJSON).JobID
	for _, path := range []string{"/jobs/" + id + "/vertices/source/backpressure", "/v1/jobs/" + id + "/vertices/source/backpressure"} {
		r := e.do(t, http.MethodGet, path, "")
		if r.status != http.StatusOK {
			t.Fatalf("%s: status %d: %s", path, r.status, r.body)
		}
		wantKeys(t, "back pressure", r.body, "status", "backpressure-level", "end-timestamp", "subtasks")
		var bp struct {
			Status   string            `json:"status"`
			Level    string            `json:"backpressure-level"`
			Subtasks []json.RawMessage `json:"subtasks"`
		}
		if err := json.Unmarshal(r.body, &bp); err != nil || bp.Status != "ok" || bp.Level != "ok" || len(bp.Subtasks) == 0 {
			t.Fatalf("back pressure %s: %v", r.body, err)
		}
		wantKeys(t, "subtask back pressure", bp.Subtasks[0], "subtask", "attempt-number", "backpressure-level", "ratio", "idleRatio", "busyRatio")
	}
	if r := e.do(t, http.MethodPost, "/jobs/"+id+"/vertices/source/backpressure", ""); r.status != http.StatusMethodNotAllowed {
		t.Errorf("POST: status %d", r.status)
	}
	errorsOf(t, e.do(t, http.MethodGet, "/jobs/"+id+"/vertices/nope/backpressure", ""), http.StatusNotFound)
	errorsOf(t, e.do(t, http.MethodGet, "/jobs/"+unknownJob+"/vertices/source/backpressure", ""), http.StatusNotFound)
	// Without metrics (here: an ended job), Flink answers "deprecated".
	e.d.SetState(id, "CANCELED")
	r := e.do(t, http.MethodGet, "/jobs/"+id+"/vertices/source/backpressure", "")
	wantKeys(t, "deprecated back pressure", r.body, "status")
}

func TestJobExecutionResult(t *testing.T) {
	e := newEnv(t, rest.Options{})
	id := e.submit(t, wordcountJSON).JobID
	path := "/jobs/" + id + "/execution-result"

	// While the job runs: only the queue status, as Flink answers.
	r := e.do(t, http.MethodGet, path, "")
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	wantKeys(t, "in progress", r.body, "status")
	if !strings.Contains(string(r.body), `"id":"IN_PROGRESS"`) {
		t.Fatalf("in progress: %s", r.body)
	}

	e.d.SetAccumulators(id, map[string][]byte{"sink": {0, 1, 2, 0xff}})
	e.d.SetState(id, resttest.StateFinished)
	r = e.do(t, http.MethodGet, path, "")
	wantKeys(t, "completed", r.body, "status", "job-execution-result")
	var body map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, "job-execution-result", body["job-execution-result"], "id", "application-status", "accumulator-results", "net-runtime")
	var res restapi.JobExecutionResultResponse
	if err := json.Unmarshal(r.body, &res); err != nil {
		t.Fatal(err)
	}
	if res.Status.ID != restapi.ResultCompleted || res.ExecutionResult.ID != id || res.ExecutionResult.ApplicationStatus != "SUCCEEDED" ||
		!bytes.Equal(res.ExecutionResult.AccumulatorResults["sink"], []byte{0, 1, 2, 0xff}) {
		t.Fatalf("completed: %s", r.body)
	}
	// Accumulator values are base64 in JSON, as Flink's serialized values.
	if !strings.Contains(string(r.body), `"sink":"AAEC/w=="`) {
		t.Errorf("accumulator not base64: %s", r.body)
	}

	// A failed job carries its failure cause.
	id2 := e.submit(t, strings.Replace(wordcountJSON, "00000000000000000000000000000001", "00000000000000000000000000000002", 1)).JobID
	e.d.AddException(id2, restapi.ExceptionEntry{ExceptionName: "TaskFailure", Stacktrace: "boom"})
	e.d.SetState(id2, resttest.StateFailed)
	var failed restapi.JobExecutionResultResponse
	if err := json.Unmarshal(e.do(t, http.MethodGet, "/jobs/"+id2+"/execution-result", "").body, &failed); err != nil {
		t.Fatal(err)
	}
	if fr := failed.ExecutionResult; fr == nil || fr.ApplicationStatus != "FAILED" || fr.FailureCause == nil || fr.FailureCause.StackTrace != "boom" {
		t.Fatalf("failed: %+v", failed)
	}

	errs := errorsOf(t, e.do(t, http.MethodGet, "/jobs/"+unknownJob+"/execution-result", ""), http.StatusNotFound)
	if !strings.Contains(errs[0], unknownJob) {
		t.Errorf("unknown job: %q", errs)
	}
	errorsOf(t, e.do(t, http.MethodPost, path, ""), http.StatusMethodNotAllowed)

	// A result the JobManager no longer keeps is 410 Gone, with the reason.
	e.d.FailWith(fmt.Errorf("%w: dropped (jobstore.cache-size)", restapi.ErrResultGone))
	errs = errorsOf(t, e.do(t, http.MethodGet, path, ""), http.StatusGone)
	if !strings.Contains(errs[0], "jobstore.cache-size") {
		t.Errorf("gone: %q", errs)
	}
}
