package jobmanager

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/conf"
)

func TestDeploymentHandler(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusAccepted) })
	newDep := func(mode string) *deployment {
		return &deployment{mode: mode, clusterID: "c1", token: "tok", fetched: make(chan struct{}),
			status: ApplicationStatus{Mode: mode, State: "RUNNING", Jobs: []string{}}}
	}
	do := func(h http.Handler, method, path, token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader("{}"))
		if token != "" {
			r.Header.Set(DriverTokenHeader, token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}

	perJob := newDep(conf.ModePerJob)
	perJob.submitted = make(chan struct{})
	h := perJob.handler(next)
	// Until the staged job is submitted, questions about jobs wait: a
	// client following it must not see it missing.
	answered := make(chan int, 1)
	go func() { answered <- do(h, http.MethodGet, "/v1/jobs/j1", "").Code }()
	select {
	case code := <-answered:
		t.Fatalf("per-job GET /jobs/j1 answered %d before the job was submitted", code)
	case <-time.After(50 * time.Millisecond):
	}
	close(perJob.submitted)
	if code := <-answered; code != http.StatusAccepted {
		t.Errorf("per-job GET /jobs/j1 after the submission: %d", code)
	}
	if w := do(h, http.MethodPost, "/jobs", ""); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "per-job cluster") {
		t.Errorf("per-job POST /jobs: %d %s", w.Code, w.Body)
	}
	if w := do(h, http.MethodGet, "/jobs/overview", ""); w.Code != http.StatusAccepted {
		t.Errorf("per-job GET /jobs/overview: %d", w.Code)
	}

	app := newDep(conf.ModeApplication)
	h = app.handler(next)
	for _, tok := range []string{"", "wrong"} {
		if w := do(h, http.MethodPost, "/jobs", tok); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "application driver") {
			t.Errorf("application POST /jobs with token %q: %d %s", tok, w.Code, w.Body)
		}
	}
	if w := do(h, http.MethodPost, "/jobs", "tok"); w.Code != http.StatusAccepted {
		t.Errorf("the driver's POST /jobs: %d", w.Code)
	}
	// The final state, once read, lets an attached cluster go.
	if w := do(h, http.MethodGet, ApplicationPath, ""); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"state":"RUNNING"`) {
		t.Errorf("GET /application: %d %s", w.Code, w.Body)
	}
	select {
	case <-app.fetched:
		t.Fatal("fetched before the end")
	default:
	}
	app.mu.Lock()
	app.status.State, app.status.Jobs = "FINISHED", []string{"j1"}
	app.mu.Unlock()
	if w := do(h, http.MethodGet, ApplicationPath, ""); !strings.Contains(w.Body.String(), `"state":"FINISHED","jobs":["j1"]`) {
		t.Errorf("GET /application: %s", w.Body)
	}
	select {
	case <-app.fetched:
	default:
		t.Fatal("reading the final state did not count as fetched")
	}
}

func TestDriverRESTAddress(t *testing.T) {
	for in, want := range map[string]string{"0.0.0.0:81": "127.0.0.1:81", "[::]:81": "127.0.0.1:81", "10.0.0.1:81": "10.0.0.1:81", "localhost:81": "127.0.0.1:81"} {
		if got := driverRESTAddress(in); got != want {
			t.Errorf("driverRESTAddress(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestApplicationWaitedRead: GET /application?wait= answers once the
// work ended (or the wait passed), without letting the attached cluster go;
// the plain read after it does.
func TestApplicationWaitedRead(t *testing.T) {
	dep := &deployment{mode: conf.ModePerJob, clusterID: "c1", fetched: make(chan struct{}), over: make(chan struct{}),
		status: ApplicationStatus{Mode: conf.ModePerJob, State: "RUNNING", Jobs: []string{"j1"}}}
	h := dep.handler(http.NotFoundHandler())
	get := func(query string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, ApplicationPath+query, nil))
		return w
	}
	if w := get("?wait=soon"); w.Code != http.StatusBadRequest {
		t.Errorf("GET /application?wait=soon: %d %s", w.Code, w.Body)
	}
	if w := get("?wait=1ms"); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"state":"RUNNING"`) {
		t.Errorf("a waited read past its wait: %d %s", w.Code, w.Body)
	}
	answered := make(chan *httptest.ResponseRecorder, 1)
	go func() { answered <- get("?wait=1m") }()
	select {
	case w := <-answered:
		t.Fatalf("a waited read answered while RUNNING: %d %s", w.Code, w.Body)
	case <-time.After(50 * time.Millisecond):
	}
	dep.mu.Lock()
	dep.status.State = "FINISHED"
	dep.mu.Unlock()
	dep.markEnded()
	if w := <-answered; !strings.Contains(w.Body.String(), `"state":"FINISHED"`) {
		t.Fatalf("the waited read at the end: %d %s", w.Code, w.Body)
	}
	select {
	case <-dep.fetched:
		t.Fatal("a waited read let the cluster go; the client still reads the result after it")
	default:
	}
	if w := get(""); !strings.Contains(w.Body.String(), `"state":"FINISHED"`) {
		t.Fatalf("GET /application: %s", w.Body)
	}
	select {
	case <-dep.fetched:
	default:
		t.Fatal("the plain read of the final state did not let the cluster go")
	}
}
