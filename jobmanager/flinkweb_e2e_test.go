package jobmanager_test

import (
	"archive/zip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/web/webtest"
)

// flinkWebVersion is the Flink release whose dashboard is checked. Its
// dashboard lists jobs from /jobs/overview; Flink 2.2 and later read
// /applications/overview, which gofl does not serve.
const flinkWebVersion = "1.20.5"

// flinkWebAssets returns a directory holding Flink's dashboard (the web/
// folder of flink-runtime-web), fetched from Maven Central with mvn at test
// time, or read from the jar GOFL_FLINK_WEB_JAR names. Without mvn the test
// fails under CI=true and skips elsewhere.
func flinkWebAssets(t *testing.T) string {
	t.Helper()
	jar := os.Getenv("GOFL_FLINK_WEB_JAR")
	if jar == "" {
		if _, err := exec.LookPath("mvn"); err != nil {
			msg := "mvn is needed to fetch flink-runtime-web from Maven Central (or set GOFL_FLINK_WEB_JAR)"
			if os.Getenv("CI") == "true" {
				t.Fatal("CI=true, so Flink's dashboard must be checked: " + msg)
			}
			t.Skip("skipping: " + msg)
		}
		dir := t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "mvn", "-q", "-B", "dependency:copy", "-Dtransitive=false",
			"-Dartifact=org.apache.flink:flink-runtime-web:"+flinkWebVersion+":jar", "-DoutputDirectory="+dir)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("fetching flink-runtime-web %s with mvn: %v\n%s", flinkWebVersion, err, out)
		}
		jar = filepath.Join(dir, "flink-runtime-web-"+flinkWebVersion+".jar")
	}
	zr, err := zip.OpenReader(jar)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	out := t.TempDir()
	n := 0
	for _, f := range zr.File {
		name, ok := strings.CutPrefix(f.Name, "web/")
		if !ok || name == "" || strings.HasSuffix(name, "/") || !filepath.IsLocal(name) {
			continue
		}
		dst := filepath.Join(out, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		w, err := os.Create(dst)
		if err == nil {
			_, err = io.Copy(w, rc)
			w.Close()
		}
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if _, err := os.Stat(filepath.Join(out, "index.html")); err != nil || n == 0 {
		t.Fatalf("%s holds no web/index.html (%d files)", jar, n)
	}
	return out
}

// TestFlinkDashboardAgainstGofl serves Flink's own web dashboard (from
// flink-runtime-web) in front of a gofl JobManager's REST API, as Flink's
// REST server does, and checks in headless Chromium that its overview, job
// list and job graph pages render gofl's running job without a
// console error or a failed request.
func TestFlinkDashboardAgainstGofl(t *testing.T) {
	parallel(t)
	if webtest.ExecPath() == "" {
		webtest.New(t) // fails under CI, skips elsewhere
	}
	assets := flinkWebAssets(t)
	c := newCluster(t, nil)
	c.startTaskManagerProcess("tm-a", 2)
	c.waitForTaskManagers(1)
	id := c.runSDKJob(testJobBinary, 2, "held-numbers", "--count", "100", "--output", filepath.Join(t.TempDir(), "out"))
	defer func() { _ = c.client.CancelJob(context.Background(), id) }()
	det := c.waitFor(id, waitLimit, "RUNNING")

	// Flink's dashboard asks its own origin ("." as base URL): files from
	// the jar, every other path to gofl's REST API.
	target, _ := url.Parse("http://" + c.jm.RESTAddress)
	proxy := httputil.NewSingleHostReverseProxy(target)
	transport := &http.Transport{}
	proxy.Transport = transport
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := path.Clean(r.URL.Path)
		if p == "/" {
			p = "/index.html"
		}
		if st, err := os.Stat(filepath.Join(assets, filepath.FromSlash(p))); err == nil && !st.IsDir() {
			http.ServeFile(w, r, filepath.Join(assets, filepath.FromSlash(p)))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.Close(); transport.CloseIdleConnections() }) // before the cluster's goroutine check

	b := webtest.New(t)
	b.Navigate(srv.URL + "/#/overview")
	b.WaitText("body", det.Name)
	b.WaitText("body", "Task Managers")
	b.Screenshot("flink-overview")

	b.Go("#/job/running")
	b.WaitText("body", det.Name)
	b.WaitText("body", "RUNNING")
	b.Screenshot("flink-running-jobs")

	b.Go("#/job/running/" + id + "/overview")
	// Flink's job graph (flink-dagre): each vertex a node group drawn with a
	// size, and the edge between them in its link group.
	for _, v := range det.Vertices {
		b.WaitFor("the job graph's node "+v.Name, fmt.Sprintf(`[...document.querySelectorAll('g.node-group')].some((g) => {
			const r = g.getBoundingClientRect(); return r.width > 0 && r.height > 0 && g.textContent.includes(%q) })`, v.Name))
	}
	b.WaitFor("the job graph's edge", `document.querySelectorAll('g.link-group path').length >= 1`)
	b.Screenshot("flink-job-graph")

	// Flink's TaskManager list waits for fields gofl does not report
	// (hardware, memory), so it is not checked.
	b.CheckConsole()
}
