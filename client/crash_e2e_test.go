package client_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofl/gofl/client"
)

var crashBin struct {
	once sync.Once
	path string
	err  error
}

// crashJob builds testdata/crashjob once per test binary. Call it before
// newWorld, which moves $HOME and with it the default Go build cache.
func crashJob(t *testing.T) string {
	t.Helper()
	binaries(t)
	crashBin.once.Do(func() {
		dir := filepath.Dir(bins.wc) // the same temporary directory
		crashBin.path = filepath.Join(dir, "crashjob")
		if out, err := exec.Command("go", "build", "-o", crashBin.path, "./testdata/crashjob").CombinedOutput(); err != nil {
			crashBin.err = fmt.Errorf("building testdata/crashjob: %v\n%s", err, out)
		}
	})
	if crashBin.err != nil {
		t.Fatal(crashBin.err)
	}
	return crashBin.path
}

// A runner that dies (an unrecoverable panic, os.Exit(3)) fails its job
// with its own last words, never with only the transport error of a call
// that was in flight ("connection reset by peer", "error reading from
// server: EOF"): issue 13, bug 3. Several runs in one session, since the
// transport error came and went with timing.
func TestSessionCrashReportsThePanicEveryTime(t *testing.T) {
	crash := crashJob(t)
	w := newWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	// One slot per TaskManager: the two subtasks run in two runners, and
	// the keyed exchange crosses from the dying one to the other, whose
	// consumer sees the connection reset.
	cc, err := w.desc.DeploySessionCluster(ctx, client.SessionSpec{ClusterID: "crash-session",
		Config: map[string]string{"taskmanager.numberOfTaskSlots": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cc.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	runs := []struct{ mode, want string }{
		{"panic", "panic: crashjob: boom at record 50"},
		{"exit", "crashjob: giving up with exit status 3"},
		{"panic", "panic: crashjob: boom at record 50"},
		{"exit", "crashjob: giving up with exit status 3"},
		{"panic", "panic: crashjob: boom at record 50"},
		{"panic", "panic: crashjob: boom at record 50"},
	}
	for i, run := range runs {
		g, err := client.PlanJob(ctx, crash, []string{"--mode", run.mode}, client.PlanOptions{Parallelism: 2})
		if err != nil {
			t.Fatal(err)
		}
		if g.BinaryKey, _, err = cc.UploadBlob(ctx, crash); err != nil {
			t.Fatal(err)
		}
		id, err := cc.SubmitJob(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		r, err := cc.WaitForJobResult(ctx, id)
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if r.ApplicationStatus != "FAILED" || r.FailureCause == nil {
			t.Fatalf("run %d (%s): result %+v", i, run.mode, r)
		}
		text := r.FailureCause.StackTrace
		if !strings.Contains(text, run.want) {
			t.Errorf("run %d (%s): the failure does not carry %q:\n%s", i, run.mode, run.want, text)
		}
		for _, bad := range []string{"connection reset", "error reading from server"} {
			if strings.Contains(text, bad) {
				t.Errorf("run %d (%s): the failure names the transport (%q):\n%s", i, run.mode, bad, text)
			}
		}
		if n := strings.Count(text, "environment failure:"); n > 1 {
			t.Errorf("run %d: \"environment failure:\" %d times:\n%s", i, n, text)
		}
	}
}

// Print() on a per-job or an application cluster is found where the
// README says: the TaskManagers' logs, which the local provider keeps in
// LogDir once the cluster is gone (issue 13, bug 7).
func TestPrintOutputIsKept(t *testing.T) {
	crash := crashJob(t)
	for _, mode := range []string{"per-job", "application"} {
		t.Run(mode, func(t *testing.T) {
			w := newWorld(t)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			marker := fmt.Sprintf("print-marker-%s-%d", mode, time.Now().UnixNano())
			args := []string{"--mode", "none", "--print", marker}
			var cc *client.ClusterClient
			if mode == "per-job" {
				g, err := client.PlanJob(ctx, crash, args, client.PlanOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if cc, err = w.desc.DeployJobCluster(ctx, client.JobSpec{JobBinary: crash, Graph: g}); err != nil {
					t.Fatal(err)
				}
			} else {
				var err error
				if cc, err = w.desc.DeployApplicationCluster(ctx, client.JobSpec{JobBinary: crash, Args: args}); err != nil {
					t.Fatal(err)
				}
			}
			waitFinished(ctx, t, cc)
			if !cc.Finish(ctx, time.Minute) {
				t.Fatal("the cluster did not go away")
			}
			dir := w.desc.LogDir(cc.ClusterID())
			if dir == "" {
				t.Fatal("the local provider names no log directory")
			}
			logs, _ := filepath.Glob(filepath.Join(dir, "taskmanager-*.log"))
			if len(logs) == 0 {
				t.Fatalf("no TaskManager logs in %s", dir)
			}
			for _, f := range logs {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(b), marker) {
					return
				}
			}
			t.Errorf("no TaskManager log in %s holds the Print() line %q", dir, marker)
		})
	}
}
