package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/rpc/restapi"
)

// A per-job cluster archives its job when it ends; once the cluster is
// gone, gofl historyserver serves the job's REST JSON and / answers.
func TestHistoryServerServesFinishedJobAfterClusterIsGone(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	archive := "file://" + filepath.Join(e.home, "completed-jobs")
	e.extraArg = []string{"-D", "jobmanager.archive.fs.dir=" + archive}
	out := filepath.Join(e.home, "out")
	r := e.run("run", "-m", "per-job", "-t", "local", e.wc, "--input", e.input, "--output", out)
	expectOK(t, r, "run per-job")
	j := regexp.MustCompile(`Job ([0-9a-f]{32})`).FindStringSubmatch(r.stdout)
	if j == nil {
		t.Fatalf("no job ID in %q", r.stdout)
	}
	jobID := j[1]
	if err := e.waitClean(time.Minute); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.gofl, "historyserver", "-D", "historyserver.archive.fs.dir="+archive,
		"-D", "historyserver.web.port=0", "-D", "historyserver.archive.fs.refresh-interval=200ms")
	cmd.Env = append(os.Environ(), "HOME="+e.home)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		if err := cmd.Wait(); err != nil {
			t.Errorf("historyserver exit: %v", err)
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	m := regexp.MustCompile(`History server at (http://\S+)`).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("historyserver said %q, %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	base := m[1]
	get := func(p string) (int, []byte) {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	waitFor(t, time.Minute, func() error {
		code, b := get("/jobs/overview")
		var o restapi.MultipleJobsDetails
		if code != 200 || json.Unmarshal(b, &o) != nil || len(o.Jobs) != 1 || o.Jobs[0].ID != jobID || o.Jobs[0].State != "FINISHED" {
			return fmt.Errorf("/jobs/overview = %d %s", code, b)
		}
		return nil
	})
	code, b := get("/jobs/" + jobID)
	var d restapi.JobDetails
	if err := json.Unmarshal(b, &d); code != 200 || err != nil || d.State != "FINISHED" || len(d.Vertices) == 0 {
		t.Fatalf("/jobs/%s = %d %s", jobID, code, b)
	}
	for _, v := range d.Vertices {
		if code, b := get("/jobs/" + jobID + "/vertices/" + v.ID); code != 200 || !strings.Contains(string(b), `"subtasks"`) {
			t.Errorf("vertex %s: %d %s", v.ID, code, b)
		}
	}
	for _, p := range []string{"/jobs/" + jobID + "/exceptions", "/jobs/" + jobID + "/config", "/jobs/" + jobID + "/checkpoints/config", "/overview", "/config"} {
		if code, b := get(p); code != 200 || !json.Valid(b) {
			t.Errorf("GET %s = %d %s", p, code, b)
		}
	}
	// The web dashboard, which reads the same REST paths.
	if code, b := get("/"); code != 200 || !strings.Contains(string(b), "gofl dashboard") {
		t.Errorf("GET / = %d %s", code, b)
	}
}
