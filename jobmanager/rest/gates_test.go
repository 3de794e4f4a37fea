package rest_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/internal/blob"
	"github.com/gofl/gofl/jobmanager/rest"
)

// Attack: anyone reaching the REST port uploaded a binary (POST /blobs)
// and submitted a job running it (POST /jobs). With web.submit.enable off
// both answer 403 naming the key; with web.cancel.enable off cancel and
// stop do. Reads keep working.
func TestDisabledRoutesAnswer403NamingTheKey(t *testing.T) {
	store, err := blob.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, rest.Options{Blobs: store})
	id := e.submit(t, wordcountJSON).JobID
	gated := httptest.NewServer(rest.NewHandler(e.d, zerolog.Nop(), rest.Options{Blobs: store, DisableSubmit: true, DisableCancel: true}))
	t.Cleanup(gated.Close)
	g := &env{d: e.d, srv: gated, log: &bytes.Buffer{}}

	for _, c := range []struct{ method, path, body, key string }{
		{http.MethodPost, "/jobs", wordcountJSON, "web.submit.enable"},
		{http.MethodPost, "/v1/jobs", wordcountJSON, "web.submit.enable"},
		{http.MethodPost, "/blobs", "#!/bin/sh\nid\n", "web.submit.enable"},
		{http.MethodPatch, "/jobs/" + id, "", "web.cancel.enable"},
		{http.MethodPatch, "/jobs/" + id + "?mode=cancel", "", "web.cancel.enable"},
		{http.MethodPost, "/jobs/" + id + "/stop", `{"targetDirectory":"file:///sp"}`, "web.cancel.enable"},
		{http.MethodPost, "/jobs/" + id + "/savepoints", `{"target-directory":"file:///sp","cancel-job":true}`, "web.cancel.enable"},
	} {
		r := g.do(t, c.method, c.path, c.body)
		errs := errorsOf(t, r, http.StatusForbidden)
		if !strings.Contains(errs[0], c.key) {
			t.Errorf("%s %s: errors %q do not name %s", c.method, c.path, errs, c.key)
		}
	}
	l, err := e.d.ListJobs(context.Background())
	if err != nil || len(l.Jobs) != 1 || l.Jobs[0].Status != "RUNNING" {
		t.Errorf("jobs after refused submissions and cancels: %+v, %v; want the one job RUNNING", l.Jobs, err)
	}
	if r := g.do(t, http.MethodGet, "/jobs/"+id, ""); r.status != http.StatusOK {
		t.Errorf("GET /jobs/%s with the gates closed: %d", id, r.status)
	}
}

// Attack: anonymous uploads had no bound in total. Past
// blob.upload.max-total-size an upload answers 413 naming the key, and
// nothing of it stays.
func TestUploadQuota(t *testing.T) {
	store, err := blob.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store.SetMaxTotalSize(1000)
	e := newEnv(t, rest.Options{Blobs: store})
	if r := e.do(t, http.MethodPost, "/blobs", strings.Repeat("a", 600)); r.status != http.StatusCreated {
		t.Fatalf("first upload: %d %s", r.status, r.body)
	}
	errs := errorsOf(t, e.do(t, http.MethodPost, "/blobs", strings.Repeat("b", 600)), http.StatusRequestEntityTooLarge)
	if !strings.Contains(errs[0], "blob.upload.max-total-size") {
		t.Errorf("errors %q do not name blob.upload.max-total-size", errs)
	}
	if got := store.Usage(); got != 600 {
		t.Errorf("usage %d after a refused upload, want 600", got)
	}
}
