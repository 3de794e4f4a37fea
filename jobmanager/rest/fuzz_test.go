package rest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/jobmanager/rest"
	"github.com/gofl/gofl/jobmanager/rest/resttest"
)

// fuzzHandler serves the REST API over the test Dispatcher, with one job.
func fuzzHandler(f *testing.F) (http.Handler, string) {
	d := resttest.NewDispatcher()
	id, err := d.SubmitJob(context.Background(), resttest.Wordcount("0000000000000000000000000000f00d"))
	if err != nil {
		f.Fatal(err)
	}
	return rest.NewHandler(d, zerolog.Nop(), rest.Options{}), id
}

// serveChecked sends one request and fails on a 5xx or a body that is not
// JSON: network input must never get past the decoders as an internal error.
func serveChecked(t *testing.T, h http.Handler, method, target, body string) {
	r := httptest.NewRequest(method, "/", strings.NewReader(body))
	r.URL.Path = target
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code >= 500 {
		t.Fatalf("%s %q with %q: %d %s", method, target, body, w.Code, w.Body)
	}
	if method != http.MethodHead && !json.Valid(w.Body.Bytes()) {
		t.Fatalf("%s %q with %q: %d, body not JSON: %q", method, target, body, w.Code, w.Body)
	}
}

// FuzzSubmitJobBody fuzzes POST /jobs (a JobGraph as protobuf JSON).
func FuzzSubmitJobBody(f *testing.F) {
	f.Add(wordcountJSON)
	f.Add(`{"name":"x","type":"JOB_TYPE_BATCH","vertices":[{"id":"a","invokable":"noop","parallelism":1}],"edges":[{"source":"a","target":"a"}]}`)
	f.Add(`{"jobId":"../../../../tmp/x","vertices":[{"id":"../a"}]}`)
	f.Add(strings.Repeat("[", 10000))
	f.Add(`{"vertices":[{"id":"a","parallelism":2147483647,"maxParallelism":-1}]}`)
	h, _ := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, body string) { serveChecked(t, h, http.MethodPost, "/jobs", body) })
}

// FuzzSavepointBodies fuzzes the savepoint trigger and stop bodies.
func FuzzSavepointBodies(f *testing.F) {
	f.Add(`{"target-directory":"file:///sp","cancel-job":false}`)
	f.Add(`{"targetDirectory":"file:///sp","drain":true}`)
	f.Add(`{"target-directory":1e999}`)
	h, id := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, body string) {
		serveChecked(t, h, http.MethodPost, "/jobs/"+id+"/savepoints", body)
		serveChecked(t, h, http.MethodPost, "/jobs/"+id+"/stop", body)
	})
}

// FuzzPaths fuzzes the path (and so every identifier parser behind it).
func FuzzPaths(f *testing.F) {
	for _, p := range []string{"/jobs/0000000000000000000000000000f00d", "/v1/jobs/x/vertices/y/backpressure", "/jobs/../../etc",
		"/blobs/sha256:../x", "/taskmanagers/%00", "/jobs/0000000000000000000000000000f00d/savepoints/a%2Fb", "//"} {
		f.Add(http.MethodGet, p)
	}
	h, _ := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, method, path string) {
		switch method {
		case http.MethodGet, http.MethodHead, http.MethodPatch, http.MethodDelete:
		default:
			method = http.MethodGet // POST bodies have their own targets
		}
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		serveChecked(t, h, method, path, "")
	})
}
