package rest_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/internal/blob"
	"github.com/gofl/gofl/jobmanager/rest"
)

// rawHead sends HEAD path over a plain TCP connection and returns the
// response's status and header and every byte the server sent after the
// header, so a body the server wrongly sends would show.
func rawHead(t *testing.T, e *env, path string) (status int, header http.Header, after []byte) {
	t.Helper()
	u, err := url.Parse(e.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, "HEAD "+path+" HTTP/1.1\r\nHost: gofl\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(conn) // the server closes after the response
	if err != nil {
		t.Fatal(err)
	}
	head, rest, ok := bytes.Cut(all, []byte("\r\n\r\n"))
	if !ok {
		t.Fatalf("HEAD %s: no end of header in %q", path, all)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(append(head, "\r\n\r\n"...))), &http.Request{Method: http.MethodHead})
	if err != nil {
		t.Fatalf("HEAD %s: %v", path, err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header, rest
}

func TestHeadOnGetRoutes(t *testing.T) {
	e := newEnv(t, rest.Options{})
	id := e.submit(t, wordcountJSON).JobID
	for _, path := range []string{"/overview", "/jobs", "/jobs/overview", "/jobs/" + id, "/jobs/" + id + "/exceptions",
		"/jobs/" + id + "/vertices/source", "/taskmanagers", "/v1/jobs", "/v1/jobs/" + id + "/"} {
		status, header, body := rawHead(t, e, path)
		if status != http.StatusOK || len(body) != 0 {
			t.Errorf("HEAD %s: %d with %d body bytes %q; want 200 without a body", path, status, len(body), body)
		}
		if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("HEAD %s: Content-Type %q", path, ct)
		}
		// HEAD answers as GET would, body aside.
		if get := e.do(t, http.MethodGet, path, ""); get.status != http.StatusOK {
			t.Errorf("GET %s: %d", path, get.status)
		}
	}
	// An unknown job is 404 for HEAD as for GET, still without a body.
	if status, _, body := rawHead(t, e, "/jobs/"+unknownJob); status != http.StatusNotFound || len(body) != 0 {
		t.Errorf("HEAD /jobs/%s: %d with body %q", unknownJob, status, body)
	}
}

func TestWrongMethodIs405WithAllow(t *testing.T) {
	e := newEnv(t, rest.Options{Blobs: func() *blob.Store {
		s, err := blob.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}()})
	id := e.submit(t, wordcountJSON).JobID
	for _, c := range []struct{ method, path, allow string }{
		{http.MethodDelete, "/jobs", "GET, HEAD, POST"},
		{http.MethodPut, "/v1/jobs/", "GET, HEAD, POST"},
		{http.MethodPost, "/jobs/" + id, "GET, HEAD, PATCH"},
		{http.MethodDelete, "/jobs/overview", "GET, HEAD"},
		{http.MethodPatch, "/v1/jobs/overview", "GET, HEAD"},
		{http.MethodPost, "/jobs/" + id + "/exceptions", "GET, HEAD"},
		{http.MethodPatch, "/jobs/" + id + "/vertices/source", "GET, HEAD"},
		{http.MethodGet, "/blobs", "POST"},
		{http.MethodGet, "/blobs/" + blob.KeyOf([]byte("x")), "HEAD"},
		{http.MethodDelete, "/taskmanagers", "GET, HEAD"},
	} {
		r := e.do(t, c.method, c.path, "")
		errs := errorsOf(t, r, http.StatusMethodNotAllowed)
		if got := r.header.Get("Allow"); got != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, got, c.allow)
		}
		if !strings.Contains(errs[0], c.method) || !strings.Contains(errs[0], c.allow) {
			t.Errorf("%s %s: errors %q", c.method, c.path, errs)
		}
	}
	// Nothing was cancelled or submitted by the refused requests.
	if st := e.d.Graph(id); st == nil {
		t.Fatal("job vanished")
	}
	var jd struct{ State string }
	if err := json.Unmarshal(e.do(t, http.MethodGet, "/jobs/"+id, "").body, &jd); err != nil || jd.State != "RUNNING" {
		t.Errorf("job state %q (%v) after refused requests", jd.State, err)
	}
}

func TestUnknownPathIs404InFlinkShape(t *testing.T) {
	e := newEnv(t, rest.Options{})
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/"},
		{http.MethodGet, "/nope"},
		{http.MethodPost, "/nope"},
		{http.MethodDelete, "/nope/deeper"},
		{http.MethodGet, "/v1"},
		{http.MethodGet, "/v2/jobs"},
		{http.MethodGet, "/jobs/a/b/c"},
		{http.MethodGet, "/jobs//exceptions"},
		{http.MethodGet, "/jobs/x/../overview"},
		{http.MethodGet, "/taskmanagers/tm-1/logs"},
	} {
		r := e.do(t, c.method, c.path, "")
		if r.status != http.StatusNotFound {
			t.Errorf("%s %s: status %d, want 404; body %s", c.method, c.path, r.status, r.body)
			continue
		}
		var body map[string][]string
		if err := json.Unmarshal(r.body, &body); err != nil || len(body) != 1 || len(body["errors"]) != 1 ||
			!strings.HasPrefix(body["errors"][0], "Not found: ") {
			t.Errorf("%s %s: body %s is not {\"errors\": [\"Not found: ...\"]} (%v)", c.method, c.path, r.body, err)
		}
		if allow := r.header.Get("Allow"); allow != "" {
			t.Errorf("%s %s: 404 with Allow %q", c.method, c.path, allow)
		}
	}
}
