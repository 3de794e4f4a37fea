package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/internal/blob"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/jobmanager/rest"
	"github.com/gofl/gofl/jobmanager/rest/resttest"
	"github.com/gofl/gofl/rpc/restapi"
)

func newClient(t *testing.T, opts ...client.Option) (*client.Client, *resttest.Dispatcher) {
	t.Helper()
	d := resttest.NewDispatcher()
	srv := resttest.NewServer(t, d, rest.Options{})
	c, err := client.New(strings.TrimPrefix(srv.URL, "http://"), append([]client.Option{client.WithPollInterval(5 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c, d
}

func TestNewAddress(t *testing.T) {
	for addr, want := range map[string]string{
		"localhost:8081":               "http://localhost:8081",
		"[::1]:8081":                   "http://[::1]:8081",
		"http://jm:8081/":              "http://jm:8081",
		"https://proxy.example/flink/": "https://proxy.example/flink",
	} {
		c, err := client.New(addr)
		if err != nil || c.Address() != want {
			t.Errorf("New(%q) = %v, %v; want %s", addr, c, err, want)
		}
	}
	for _, addr := range []string{"", "localhost", "ftp://jm:21", "http://", "http://jm:8081/?x=1", "jm:"} {
		if _, err := client.New(addr); err == nil {
			t.Errorf("New(%q) succeeded", addr)
		}
	}
}

func TestSubmitAndRead(t *testing.T) {
	c, d := newClient(t)
	ctx := context.Background()
	d.AddTaskManager(restapi.TaskManagerInfo{ID: "tm-1", SlotsNumber: 4, FreeSlots: 4})

	id, err := c.SubmitJob(ctx, resttest.Wordcount(testJob1))
	if err != nil || id != testJob1 {
		t.Fatalf("SubmitJob = %q, %v", id, err)
	}
	if g := d.Graph(id); g == nil || len(g.Vertices) != 3 || g.Edges[1].ShipStrategy != "rebalance" || g.Config["k"] != "v" {
		t.Errorf("the Dispatcher got %+v", g)
	}
	d.AddException(id, restapi.ExceptionEntry{ExceptionName: "E", Stacktrace: "trace"})

	ov, err := c.Overview(ctx)
	if err != nil || ov.TaskManagers != 1 || ov.SlotsTotal != 4 || ov.JobsRunning != 1 {
		t.Errorf("Overview = %+v, %v", ov, err)
	}
	jobs, err := c.ListJobs(ctx)
	if err != nil || len(jobs.Jobs) != 1 || jobs.Jobs[0].ID != id || jobs.Jobs[0].Status != "RUNNING" {
		t.Errorf("ListJobs = %+v, %v", jobs, err)
	}
	jo, err := c.JobsOverview(ctx)
	if err != nil || len(jo.Jobs) != 1 || jo.Jobs[0].Name != "wordcount" || jo.Jobs[0].Tasks.Total != 7 {
		t.Errorf("JobsOverview = %+v, %v", jo, err)
	}
	jd, err := c.JobDetails(ctx, id)
	if err != nil || jd.ID != id || len(jd.Vertices) != 3 || jd.Vertices[1].Parallelism != 4 {
		t.Errorf("JobDetails = %+v, %v", jd, err)
	}
	ex, err := c.JobExceptions(ctx, id)
	if err != nil || len(ex.ExceptionHistory.Entries) != 1 || ex.RootException != "trace" {
		t.Errorf("JobExceptions = %+v, %v", ex, err)
	}
	tms, err := c.TaskManagers(ctx)
	if err != nil || len(tms.TaskManagers) != 1 {
		t.Errorf("TaskManagers = %+v, %v", tms, err)
	}
	tm, err := c.TaskManager(ctx, "tm-1")
	if err != nil || tm.SlotsNumber != 4 {
		t.Errorf("TaskManager = %+v, %v", tm, err)
	}
}

func TestErrorsWrapSentinels(t *testing.T) {
	c, d := newClient(t)
	ctx := context.Background()
	id, err := c.SubmitJob(ctx, resttest.Wordcount(testJob1))
	if err != nil {
		t.Fatal(err)
	}

	_, err = c.SubmitJob(ctx, resttest.Wordcount(testJob1))
	var apiErr *client.Error
	if !errors.Is(err, restapi.ErrDuplicateJob) || !errors.As(err, &apiErr) || apiErr.StatusCode != 409 {
		t.Errorf("duplicate: %v", err)
	}

	_, err = c.JobDetails(ctx, unknownJob)
	if !errors.Is(err, restapi.ErrJobNotFound) || !strings.Contains(err.Error(), "job "+unknownJob) || !strings.Contains(err.Error(), "404") {
		t.Errorf("unknown job: %v", err)
	}
	if _, err = c.JobExceptions(ctx, unknownJob); !errors.Is(err, restapi.ErrJobNotFound) {
		t.Errorf("unknown job exceptions: %v", err)
	}
	if err = c.CancelJob(ctx, unknownJob); !errors.Is(err, restapi.ErrJobNotFound) {
		t.Errorf("cancel unknown job: %v", err)
	}
	if _, err = c.TaskManager(ctx, "tm-x"); !errors.Is(err, restapi.ErrTaskManagerNotFound) || errors.Is(err, restapi.ErrJobNotFound) {
		t.Errorf("unknown TaskManager: %v", err)
	}

	bad := resttest.Wordcount(testJob2)
	bad.Vertices[0].Parallelism = 0
	bad.Vertices[2].Invokable = ""
	_, err = c.SubmitJob(ctx, bad)
	if !errors.Is(err, restapi.ErrBadRequest) || !errors.As(err, &apiErr) || len(apiErr.Messages) != 2 ||
		!strings.Contains(err.Error(), `vertex "source" has parallelism 0`) || !strings.Contains(err.Error(), `vertex "sink" has no invokable`) {
		t.Errorf("invalid graph: %v", err)
	}

	d.SetState(id, "FINISHED")
	if err = c.CancelJob(ctx, id); !errors.Is(err, restapi.ErrJobNotCancellable) {
		t.Errorf("cancel finished job: %v", err)
	}

	d.FailWith(fmt.Errorf("%w: dropped", restapi.ErrResultGone))
	if _, err = c.WaitForJobResult(ctx, id); !errors.Is(err, restapi.ErrResultGone) || !errors.As(err, &apiErr) || apiErr.StatusCode != 410 {
		t.Errorf("dropped result: %v", err)
	}

	d.FailWith(errors.New("mailbox closed"))
	_, err = c.Overview(ctx)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 500 || !strings.Contains(err.Error(), "mailbox closed") {
		t.Errorf("500: %v", err)
	}
}

func TestNonJSONErrorBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>bad gateway</html>", http.StatusBadGateway)
	}))
	defer srv.Close()
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Overview(context.Background())
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 502 || !strings.Contains(err.Error(), "bad gateway") || errors.Unwrap(err) != nil {
		t.Errorf("err = %v", err)
	}
}

func TestPathPrefix(t *testing.T) {
	d := resttest.NewDispatcher()
	mux := http.NewServeMux()
	mux.Handle("/flink/", http.StripPrefix("/flink", rest.NewHandler(d, zerolog.Nop(), rest.Options{})))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c, err := client.New(srv.URL + "/flink/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SubmitJob(context.Background(), resttest.Wordcount(testJob3)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.JobDetails(context.Background(), testJob3); err != nil {
		t.Error(err)
	}
}

func TestUnreachableNamesAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := client.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ListJobs(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cannot reach the JobManager at "+addr) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("err = %v", err)
	}
}

func TestTimeout(t *testing.T) {
	c, d := newClient(t, client.WithTimeout(50*time.Millisecond))
	d.Block()
	defer d.Unblock()
	start := time.Now()
	_, err := c.Overview(context.Background())
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 30*time.Second { // not blocked for good
		t.Errorf("err = %v after %v", err, time.Since(start))
	}
}

func TestWaitForJobStatus(t *testing.T) {
	c, d := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := c.SubmitJob(ctx, resttest.Wordcount(""))
	if err != nil {
		t.Fatal(err)
	}

	jd, err := c.WaitForJobStatus(ctx, id, "RUNNING")
	if err != nil || jd.State != "RUNNING" {
		t.Fatalf("wait RUNNING = %q, %v", jd.State, err)
	}

	go func() {
		time.Sleep(30 * time.Millisecond)
		d.SetState(id, "FINISHED")
	}()
	jd, err = c.WaitForJobStatus(ctx, id) // any terminal state
	if err != nil || jd.State != "FINISHED" {
		t.Fatalf("wait terminal = %q, %v", jd.State, err)
	}

	// Terminal but not wanted: stop and say so.
	jd, err = c.WaitForJobStatus(ctx, id, "CANCELED")
	if !errors.Is(err, client.ErrUnexpectedState) || jd.State != "FINISHED" || !strings.Contains(err.Error(), "is FINISHED, not CANCELED") {
		t.Errorf("wait CANCELED = %q, %v", jd.State, err)
	}

	// Cancellation through the client, then wait for CANCELED.
	id2, err := c.SubmitJob(ctx, resttest.Wordcount(""))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CancelJob(ctx, id2); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(30 * time.Millisecond)
		d.SetState(id2, "CANCELED")
	}()
	if jd, err = c.WaitForJobStatus(ctx, id2, "CANCELED"); err != nil || jd.State != "CANCELED" {
		t.Errorf("wait after cancel = %q, %v", jd.State, err)
	}

	// The context bounds the wait. It ends once the client has seen the job
	// RUNNING (its second poll was answered), not after a fixed time that a
	// loaded machine could spend before the first answer.
	id3, _ := c.SubmitJob(ctx, resttest.Wordcount(""))
	short, cancelShort := context.WithCancel(ctx)
	defer cancelShort()
	go func() {
		for d.DetailsServed(id3) < 2 && short.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		cancelShort()
	}()
	jd, err = c.WaitForJobStatus(short, id3, "FINISHED")
	if !errors.Is(err, context.Canceled) || jd.State != "RUNNING" || !strings.Contains(err.Error(), `last state "RUNNING"`) {
		t.Errorf("wait with deadline = %q, %v", jd.State, err)
	}

	if _, err = c.WaitForJobStatus(ctx, unknownJob, "RUNNING"); !errors.Is(err, restapi.ErrJobNotFound) {
		t.Errorf("wait unknown job: %v", err)
	}
}

func TestWaitForJobResult(t *testing.T) {
	c, d := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := c.SubmitJob(ctx, resttest.Wordcount(""))
	if err != nil {
		t.Fatal(err)
	}
	if r, err := c.JobExecutionResult(ctx, id); err != nil || r.Status.ID != restapi.ResultInProgress || r.ExecutionResult != nil {
		t.Fatalf("while running: %+v, %v", r, err)
	}
	go func() {
		time.Sleep(30 * time.Millisecond)
		d.SetAccumulators(id, map[string][]byte{"collect": []byte("records")})
		d.SetState(id, "FINISHED")
	}()
	res, err := c.WaitForJobResult(ctx, id)
	if err != nil || res.ApplicationStatus != "SUCCEEDED" || string(res.AccumulatorResults["collect"]) != "records" {
		t.Fatalf("result = %+v, %v", res, err)
	}

	id2, _ := c.SubmitJob(ctx, resttest.Wordcount(""))
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if _, err := c.WaitForJobResult(short, id2); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), id2) {
		t.Errorf("wait with deadline: %v", err)
	}
	if _, err := c.WaitForJobResult(ctx, unknownJob); !errors.Is(err, restapi.ErrJobNotFound) {
		t.Errorf("wait unknown job: %v", err)
	}
}

func TestSubmitNil(t *testing.T) {
	c, _ := newClient(t)
	var g *jobgraph.JobGraph
	if _, err := c.SubmitJob(context.Background(), g); err == nil {
		t.Error("nil graph accepted")
	}
}

func TestUploadBlobOnlyOnce(t *testing.T) {
	store, err := blob.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := resttest.NewServer(t, resttest.NewDispatcher(), rest.Options{Blobs: store})
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "job-binary")
	if err := os.WriteFile(path, bytes.Repeat([]byte("\x7fELF"), 100_000), 0o755); err != nil {
		t.Fatal(err)
	}
	key, uploaded, err := c.UploadBlob(context.Background(), path)
	if err != nil || !uploaded || !store.Has(key) {
		t.Fatalf("first upload: %s %v %v", key, uploaded, err)
	}
	p, _ := store.Path(key)
	before, _ := os.Stat(p)
	key2, uploaded2, err := c.UploadBlob(context.Background(), path)
	if err != nil || uploaded2 || key2 != key {
		t.Fatalf("second upload: %s %v %v; want nothing sent", key2, uploaded2, err)
	}
	if after, _ := os.Stat(p); !after.ModTime().Equal(before.ModTime()) {
		t.Fatal("the blob was rewritten")
	}
	// A body that does not match the announced key is refused.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/blobs", strings.NewReader("something else"))
	req.Header.Set(restapi.BlobKeyHeader, key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("mismatching upload: status %d, want 400", resp.StatusCode)
	}
	if _, _, err := c.UploadBlob(context.Background(), filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("uploading a missing file succeeded")
	}
}

// Well-formed job IDs (32 hex digits): the REST API refuses others.
const (
	testJob1   = "0000000000000000000000000000a001"
	testJob2   = "0000000000000000000000000000a002"
	testJob3   = "0000000000000000000000000000a003"
	unknownJob = "0000000000000000000000000000dead"
)

// TestWatchEnd: the watch closes its channel once a waited read of
// /application reports the end, and stays open (its goroutine gone) when
// the JobManager answers without waiting.
func TestWatchEnd(t *testing.T) {
	end := make(chan struct{})
	waiting := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != client.ApplicationPath {
			http.NotFound(w, r)
			return
		}
		select {
		case waiting <- r.URL.Query().Get("wait"):
		default:
		}
		<-end
		fmt.Fprint(w, `{"mode":"per-job","state":"FINISHED","jobs":["j1"]}`)
	}))
	defer srv.Close()
	c, err := client.New(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	ended, stop := c.WatchEnd(context.Background())
	defer stop()
	if w := <-waiting; w == "" {
		t.Fatal("the watch's read does not ask the JobManager to wait")
	}
	select {
	case <-ended:
		t.Fatal("ended before the end")
	default:
	}
	close(end)
	<-ended

	// A JobManager that does not wait (an older one): RUNNING at once.
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"mode":"per-job","state":"RUNNING","jobs":["j1"]}`)
	}))
	defer old.Close()
	if c, err = client.New(strings.TrimPrefix(old.URL, "http://")); err != nil {
		t.Fatal(err)
	}
	ended, stop2 := c.WatchEnd(context.Background())
	stop2() // returns: the goroutine gave up by itself or on the cancel
	select {
	case <-ended:
		t.Fatal("ended while RUNNING")
	default:
	}
}
