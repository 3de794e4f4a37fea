package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

//go:embed assets
var assets embed.FS

// AssetPrefix is the path under which the dashboard's scripts and styles are
// served; the index page is served at "/" and "/index.html".
const AssetPrefix = "/web/"

// apiPlaceholder in index.html is replaced by the REST API's base path.
const apiPlaceholder = "{{GOFL_API_BASE}}"

// file is one asset ready to serve: its bytes, gzipped bytes (nil when
// compression does not pay), content type and strong ETag. The gzipped
// bytes are made on the first request that takes them, not when the
// JobManager starts: most JobManagers (a per-job cluster's) never serve
// the dashboard, and compressing it all is on their start-up path.
type file struct {
	body   []byte
	ctype  string
	etag   string
	gzOnce sync.Once
	gzBody []byte
}

// gz returns the gzipped body, nil when compression does not pay.
func (f *file) gz() []byte {
	f.gzOnce.Do(func() {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		_, _ = zw.Write(f.body)
		_ = zw.Close()
		if b.Len() < len(f.body)*9/10 {
			f.gzBody = b.Bytes()
		}
	})
	return f.gzBody
}

func newFile(name string, body []byte) *file {
	sum := sha256.Sum256(body)
	f := &file{body: body, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, ctype: mime.TypeByExtension(path.Ext(name))}
	if f.ctype == "" {
		f.ctype = http.DetectContentType(body)
	}
	return f
}

// Handler serves the dashboard: the index page at "/" and "/index.html",
// its assets under AssetPrefix, 404 for anything else. apiBase is the REST
// API's base path as the browser reaches it, such as "/api" behind another
// server; empty means the API answers beside the dashboard (requests go
// relative to the page, so the pair also works under a proxy's prefix).
// The handler is safe for concurrent use and holds no state but the
// embedded files.
func Handler(apiBase string) http.Handler {
	if apiBase == "" {
		apiBase = "."
	}
	files := map[string]*file{}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "assets")
		if name == "/index.html" {
			b = bytes.ReplaceAll(b, []byte(apiPlaceholder), []byte(html.EscapeString(strings.TrimRight(apiBase, "/"))))
		}
		files[name] = newFile(name, b)
		return nil
	})
	if err != nil {
		panic(fmt.Sprintf("web: reading the embedded assets: %v", err)) // only a broken build gets here
	}
	files["/"] = files["/index.html"]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		f, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", f.ctype)
		h.Set("ETag", f.etag)
		h.Set("Cache-Control", "no-cache") // revalidate: a new binary brings new assets
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Vary", "Accept-Encoding")
		if f.ctype == "text/html; charset=utf-8" {
			h.Set("Content-Security-Policy", csp(apiBase))
			h.Set("X-Frame-Options", "DENY")
		}
		body := f.body
		if acceptsGzip(r) {
			if gz := f.gz(); gz != nil {
				h.Set("Content-Encoding", "gzip")
				body = gz
			}
		}
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
	})
}

// csp allows only the dashboard's own files, and API requests to its own
// origin or the configured API's.
func csp(apiBase string) string {
	connect := "'self'"
	if strings.HasPrefix(apiBase, "http://") || strings.HasPrefix(apiBase, "https://") {
		connect += " " + apiBase
	}
	return "default-src 'self'; img-src 'self' data:; connect-src " + connect + "; frame-ancestors 'none'; base-uri 'none'"
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.ReplaceAll(q, " ", "") != "q=0" {
			return true
		}
	}
	return false
}

// IsDashboardPath reports whether a request for p is the dashboard's: "/",
// "/index.html" or under AssetPrefix. No REST path is.
func IsDashboardPath(p string) bool {
	return p == "/" || p == "/index.html" || strings.HasPrefix(p, AssetPrefix)
}

// Mount serves GET and HEAD requests for dashboard paths (IsDashboardPath)
// from dashboard and every other request from api, so one port serves both.
// Wrap only api in authentication: the dashboard's files are public, and
// the page asks for the token when the API answers 401.
func Mount(api, dashboard http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && IsDashboardPath(r.URL.Path) {
			dashboard.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}
