package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gofl/gofl/jobmanager/rest"
	"github.com/gofl/gofl/logs"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/rpc/restapi"
)

const logJobID = "0123456789abcdef0123456789abcdef"

// fakeLogs serves a JobManager log from a file and one TaskManager "tm-1"
// through a real LogService on loopback.
type fakeLogs struct {
	jm   logs.Source
	addr string
}

func (f fakeLogs) JobManager() logs.Source { return f.jm }
func (f fakeLogs) TaskManagers(context.Context) ([]string, error) {
	return []string{"tm-1"}, nil
}
func (f fakeLogs) TaskManager(_ context.Context, id string) (pb.LogServiceClient, func(), error) {
	if id != "tm-1" {
		return nil, nil, fmt.Errorf("%w: %s", restapi.ErrTaskManagerNotFound, id)
	}
	conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	return pb.NewLogServiceClient(conn), func() { conn.Close() }, nil
}

func newLogEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "jm", "gofl.log"), "jm line 1\njm line 2\n")
	write(filepath.Join(dir, "jm", "secret"), "jm secret")
	write(filepath.Join(dir, "tm", "gofl.log"), "tm line\n")
	write(filepath.Join(dir, "tm", "secret"), "tm secret")
	write(filepath.Join(dir, "tm", "work", "jobs", logJobID, logs.RunnerOutFile), "marker 1\nmarker 2\n")
	write(filepath.Join(dir, "tm", "work", "jobs", logJobID, logs.RunnerLogFile), "marker 1\npanic: boom\n")

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterLogServiceServer(srv, logs.NewService(logs.Source{Own: filepath.Join(dir, "tm", "gofl.log"), OwnName: logs.TaskManagerLog,
		RunnerDir: filepath.Join(dir, "tm", "work", "jobs")}))
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return newEnv(t, rest.Options{Logs: fakeLogs{jm: logs.Source{Own: filepath.Join(dir, "jm", "gofl.log"), OwnName: logs.JobManagerLog},
		addr: lis.Addr().String()}})
}

func getRaw(t *testing.T, e *env, path string) response {
	t.Helper()
	resp, err := e.srv.Client().Get(e.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

func TestLogEndpoints(t *testing.T) {
	e := newLogEnv(t)
	text := func(path, want string) http.Header {
		t.Helper()
		r := getRaw(t, e, path)
		if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
			t.Errorf("GET %s: Content-Type %q", path, ct)
		}
		if r.status != http.StatusOK || string(r.body) != want {
			t.Fatalf("GET %s = %d %q, want %q", path, r.status, r.body, want)
		}
		return r.header
	}
	text("/jobmanager/log", "jm line 1\njm line 2\n")
	text("/jobmanager/stdout", "jm line 1\njm line 2\n")
	if h := text("/v1/jobmanager/logs/jobmanager.log?tail=1", "jm line 2\n"); h.Get(rest.LogSizeHeader) != "20" {
		t.Fatalf("size header %q", h.Get(rest.LogSizeHeader))
	}
	text("/jobmanager/log?offset=10", "jm line 2\n")
	text("/jobmanager/log?offset=20", "")
	text("/taskmanagers/tm-1/log", "tm line\n")
	text("/taskmanagers/tm-1/stdout", "tm line\n")
	text("/taskmanagers/tm-1/logs/runner-"+logJobID+".out", "marker 1\nmarker 2\n")
	text("/taskmanagers/tm-1/logs/runner-"+logJobID+".log?tail=1", "panic: boom\n")
	text("/taskmanagers/tm-1/logs/runner-"+logJobID+".out?offset=9&length=6", "marker")

	var list restapi.LogListInfo
	r := e.do(t, "GET", "/taskmanagers/tm-1/logs", "")
	if err := json.Unmarshal(r.body, &list); err != nil || r.status != 200 || len(list.Logs) != 3 || list.Logs[0].Name != "taskmanager.log" {
		t.Fatalf("TaskManager log list = %d %s", r.status, r.body)
	}
	r = e.do(t, "GET", "/jobmanager/logs", "")
	if err := json.Unmarshal(r.body, &list); err != nil || len(list.Logs) != 1 || list.Logs[0].Name != "jobmanager.log" || list.Logs[0].Size != 20 {
		t.Fatalf("JobManager log list = %d %s", r.status, r.body)
	}
	var jl restapi.JobLogs
	r = e.do(t, "GET", "/jobs/"+logJobID+"/logs", "")
	if err := json.Unmarshal(r.body, &jl); err != nil || len(jl.Logs) != 2 || jl.Logs[0].TaskManager != "tm-1" {
		t.Fatalf("job logs = %d %s", r.status, r.body)
	}
}

// Nothing outside the listed files is ever served, however the name is
// spelled.
func TestLogEndpointsRefuseTraversal(t *testing.T) {
	e := newLogEnv(t)
	for _, p := range []string{
		"/jobmanager/logs/secret", "/jobmanager/logs/..%2fsecret", "/jobmanager/logs/%2e%2e%2fjm%2fsecret",
		"/jobmanager/logs/..", "/jobmanager/logs/.secret", "/jobmanager/logs/%2fetc%2fpasswd",
		"/taskmanagers/tm-1/logs/secret", "/taskmanagers/tm-1/logs/..%2f..%2fjm%2fsecret", "/taskmanagers/tm-1/logs/..",
		"/taskmanagers/tm-1/logs/work%2fjobs%2f" + logJobID + "%2frunner.out", "/taskmanagers/..%2ftm/logs/secret",
		"/taskmanagers/tm-2/log", "/jobmanager/log?tail=-1", "/jobmanager/log?tail=1&offset=2",
	} {
		r := getRaw(t, e, p)
		if r.status == http.StatusOK || strings.Contains(string(r.body), "secret") && !strings.Contains(string(r.body), "errors") {
			t.Errorf("GET %s = %d %q", p, r.status, r.body)
		}
		if r.status >= 500 {
			t.Errorf("GET %s = %d %q, want a 4xx", p, r.status, r.body)
		}
	}
	// Without LogFiles there are no log routes.
	plain := newEnv(t, rest.Options{})
	if r := plain.do(t, "GET", "/jobmanager/log", ""); r.status != http.StatusNotFound {
		t.Fatalf("without logs: %d %s", r.status, r.body)
	}
}
