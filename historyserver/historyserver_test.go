package historyserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/historyserver"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/jobmanager/rest"
	"github.com/gofl/gofl/jobmanager/rest/resttest"
	"github.com/gofl/gofl/rpc/restapi"
	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/storage/storagetest"
)

const jobID = "00000000000000000000000000000042"

// finishedJob is a REST handler over a fake Dispatcher with one FINISHED job.
func finishedJob(t *testing.T) http.Handler {
	t.Helper()
	d := resttest.NewDispatcher()
	d.SetClock(func() time.Time { return time.UnixMilli(1_700_000_010_000) })
	jg := &jobgraph.JobGraph{JobID: jobID, Name: "archived-wc", Type: jobgraph.Streaming,
		Vertices: []*jobgraph.Vertex{{ID: "source", Name: "Source", Parallelism: 2, Invokable: "noop"}}}
	if _, err := d.SubmitJob(context.Background(), jg); err != nil {
		t.Fatal(err)
	}
	d.SetState(jobID, "FINISHED")
	return rest.NewHandler(d, zerolog.Nop(), rest.Options{})
}

func get(t *testing.T, h http.Handler, p string) (int, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + p)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func roundTrip(t *testing.T, dir string) {
	ctx := context.Background()
	h := finishedJob(t)
	a := historyserver.NewArchiver(dir, storage.Options{}, h, zerolog.Nop())
	if err := a.ArchiveJob(ctx, jobID); err != nil {
		t.Fatal(err)
	}
	if err := a.ArchiveJob(ctx, "../x"); err == nil {
		t.Fatal("archived a job ID with a path in it")
	}
	// The file is Flink's: {"archive": [{"path", "json"}]}.
	fsys, root, err := storage.Open(ctx, dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	b, err := storage.ReadFile(ctx, fsys, root+"/"+jobID)
	if err != nil {
		t.Fatal(err)
	}
	var f historyserver.File
	if err := json.Unmarshal(b, &f); err != nil || len(f.Archive) < 5 {
		t.Fatalf("archive file %s: %v", b, err)
	}

	s := historyserver.New(historyserver.Options{Dirs: []string{dir}})
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	// Each archived path serves what the live REST API answered.
	for _, p := range []string{"/jobs/" + jobID, "/jobs/" + jobID + "/vertices/source", "/jobs/" + jobID + "/exceptions"} {
		_, live := get(t, h, p)
		code, archived := get(t, s, p)
		if code != 200 || archived != live {
			t.Errorf("GET %s: %d %s, live %s", p, code, archived, live)
		}
	}
	code, body := get(t, s, "/v1/jobs/overview")
	var o restapi.MultipleJobsDetails
	if err := json.Unmarshal([]byte(body), &o); code != 200 || err != nil || len(o.Jobs) != 1 || o.Jobs[0].ID != jobID || o.Jobs[0].State != "FINISHED" {
		t.Fatalf("/jobs/overview = %d %s", code, body)
	}
	if code, body := get(t, s, "/overview"); code != 200 || !strings.Contains(body, `"jobs-finished":1`) {
		t.Fatalf("/overview = %d %s", code, body)
	}
	if code, body := get(t, s, "/config"); code != 200 || !strings.Contains(body, "web-history") {
		t.Fatalf("/config = %d %s", code, body)
	}
	if code, body := get(t, s, "/"); code != 200 || !strings.Contains(body, jobID) || !strings.Contains(body, "archived-wc") {
		t.Fatalf("/ = %d %s", code, body)
	}
	for _, p := range []string{"/jobs/00000000000000000000000000000043", "/jobs/" + jobID + "/nope", "/jobs/../../etc/passwd", "/nope"} {
		if code, body := get(t, s, p); code != 404 || !strings.Contains(body, `"errors"`) {
			t.Errorf("GET %s = %d %s", p, code, body)
		}
	}
	// With a dashboard, / is the dashboard's.
	ui := historyserver.New(historyserver.Options{Dirs: []string{dir},
		UI: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "dashboard") })})
	if code, body := get(t, ui, "/"); code != 200 || body != "dashboard" {
		t.Fatalf("/ with UI = %d %s", code, body)
	}
	// A removed archive goes at the next scan.
	if err := fsys.RemoveAll(ctx, root+"/"+jobID); err != nil {
		t.Fatal(err)
	}
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if code, _ := get(t, s, "/jobs/"+jobID); code != 404 {
		t.Fatalf("removed job still served: %d", code)
	}
}

func TestArchiveAndServeFile(t *testing.T) {
	roundTrip(t, "file://"+t.TempDir()+"/completed-jobs")
}

func TestArchiveAndServeHDFS(t *testing.T) {
	uri := storagetest.HDFS(t) + "/gofl-test/historyserver/" + strings.ReplaceAll(t.Name(), "/", "_")
	roundTrip(t, uri)
	fsys, root, err := storage.Open(context.Background(), uri, storage.Options{})
	if err == nil {
		_ = fsys.RemoveAll(context.Background(), root)
		fsys.Close()
	}
}
