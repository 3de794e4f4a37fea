package web_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gofl/gofl/web"
)

func get(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestHandlerServesIndexWithAPIBase(t *testing.T) {
	for base, want := range map[string]string{"": `content="."`, "/api/": `content="/api"`, `/a"b`: `content="/a&#34;b"`} {
		h := web.Handler(base)
		for _, p := range []string{"/", "/index.html"} {
			w := get(t, h, http.MethodGet, p, nil)
			if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
				t.Fatalf("GET %s: %d %s", p, w.Code, w.Header().Get("Content-Type"))
			}
			if body := w.Body.String(); !strings.Contains(body, want) || strings.Contains(body, "{{") {
				t.Errorf("base %q: index has no %s:\n%s", base, want, body)
			}
			if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
				t.Errorf("CSP %q", csp)
			}
		}
	}
}

func TestHandlerAssets(t *testing.T) {
	h := web.Handler("")
	for p, ctype := range map[string]string{"/web/app.js": "javascript", "/web/api.js": "javascript", "/web/dag.js": "javascript",
		"/web/util.js": "javascript", "/web/style.css": "text/css"} {
		w := get(t, h, http.MethodGet, p, nil)
		if w.Code != http.StatusOK || !strings.Contains(w.Header().Get("Content-Type"), ctype) || w.Body.Len() == 0 {
			t.Errorf("GET %s: %d %q, %d bytes", p, w.Code, w.Header().Get("Content-Type"), w.Body.Len())
		}
		if w.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", p)
		}
		// Revalidation by ETag.
		etag := w.Header().Get("ETag")
		if w2 := get(t, h, http.MethodGet, p, map[string]string{"If-None-Match": etag}); etag == "" || w2.Code != http.StatusNotModified {
			t.Errorf("GET %s with If-None-Match %s: %d", p, etag, w2.Code)
		}
		// Compressed when asked, the same bytes once inflated.
		gz := get(t, h, http.MethodGet, p, map[string]string{"Accept-Encoding": "gzip, deflate"})
		if gz.Header().Get("Content-Encoding") != "gzip" {
			t.Errorf("GET %s: not gzipped", p)
			continue
		}
		zr, err := gzip.NewReader(gz.Body)
		if err != nil {
			t.Fatal(err)
		}
		plain, _ := io.ReadAll(zr)
		if !bytes.Equal(plain, w.Body.Bytes()) || gz.Body.Len() >= w.Body.Len() {
			t.Errorf("GET %s: gzip body differs or is no smaller", p)
		}
	}
	for _, p := range []string{"/web/", "/web/nope.js", "/jobs", "/web/../index.html"} {
		if w := get(t, h, http.MethodGet, p, nil); w.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, w.Code)
		}
	}
	if w := get(t, h, http.MethodPost, "/", nil); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d", w.Code)
	}
}

func TestMountRoutesDashboardAndAPI(t *testing.T) {
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Header().Set("X-API", "1") })
	h := web.Mount(api, web.Handler(""))
	for _, c := range []struct {
		method, path string
		api          bool
	}{
		{"GET", "/", false}, {"HEAD", "/", false}, {"GET", "/index.html", false}, {"GET", "/web/app.js", false},
		{"GET", "/overview", true}, {"GET", "/jobs/overview", true}, {"POST", "/jobs", true}, {"POST", "/", true},
		{"GET", "/v1/overview", true}, {"GET", "/config", true},
	} {
		w := get(t, h, c.method, c.path, nil)
		if got := w.Header().Get("X-API") == "1"; got != c.api {
			t.Errorf("%s %s went to the API: %v, want %v", c.method, c.path, got, c.api)
		}
	}
}
