package main

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/jobmanager/rest"
	"github.com/gofl/gofl/jobmanager/rest/resttest"
	"github.com/gofl/gofl/logs"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/rpc/restapi"
)

type jmLogsOnly struct{ src logs.Source }

func (j jmLogsOnly) JobManager() logs.Source { return j.src }
func (jmLogsOnly) TaskManager(context.Context, string) (pb.LogServiceClient, func(), error) {
	return nil, nil, restapi.ErrTaskManagerNotFound
}
func (jmLogsOnly) TaskManagers(context.Context) ([]string, error) { return nil, nil }

// --follow prints what a live log appends, each byte once, from where
// the first read ended.
func TestFollowPrintsAppendedBytesOnce(t *testing.T) {
	p := filepath.Join(t.TempDir(), "gofl.log")
	if err := os.WriteFile(p, []byte("first\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rest.NewHandler(resttest.NewDispatcher(), zerolog.Nop(),
		rest.Options{Logs: jmLogsOnly{logs.Source{Own: p, OwnName: logs.JobManagerLog}}}))
	defer srv.Close()
	cl, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	rd := liveLogs{cl}
	refs, err := rd.list(context.Background(), "", "")
	if err != nil || len(refs) != 1 {
		t.Fatalf("list = %v, %v", refs, err)
	}
	var first bytes.Buffer
	n, err := copyLog(context.Background(), &first, rd, refs[0], 0)
	if err != nil || first.String() != "first\n" || n != 6 {
		t.Fatalf("copyLog = %q, %d, %v", first.String(), n, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- followLogs(ctx, &out, rd, refs, []int64{n}) }()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, line := range []string{"second\n", "third\n"} {
		if _, err := f.WriteString(line); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(time.Minute)
		for !bytes.HasSuffix([]byte(out.String()), []byte(line)) {
			if time.Now().After(deadline) {
				t.Fatalf("followed %q, want it to end with %q", out.String(), line)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if got := out.String(); got != "second\nthird\n" {
		t.Fatalf("followed %q", got)
	}
}
