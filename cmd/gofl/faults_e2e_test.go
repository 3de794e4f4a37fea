package main

// End-to-end fault injection on a provider (issue #9): a TaskManager that
// Nomad stops gracefully mid-job. The job is paced-numbers of
// stream/internal/testjob (a rate-limited source), so the stop lands while
// it runs; the test ends by checking its output exactly.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/rpc/restapi"
)

var faultJob struct {
	once sync.Once
	path string
	err  error
}

// faultTestJob builds stream/internal/testjob next to the e2e binaries.
func faultTestJob(t *testing.T, e *e2e) string {
	t.Helper()
	faultJob.once.Do(func() {
		faultJob.path = filepath.Join(filepath.Dir(e.gofl), "testjob")
		if out, err := exec.Command("go", "build", "-o", faultJob.path, "../../stream/internal/testjob").CombinedOutput(); err != nil {
			faultJob.err = fmt.Errorf("building the test job: %v\n%s", err, out)
		}
	})
	if faultJob.err != nil {
		t.Fatal(faultJob.err)
	}
	return faultJob.path
}

// checkNumberParts checks paced-numbers' part files in dir: every number
// in [0, n) exactly once, nothing else.
func checkNumberParts(t *testing.T, dir string, n int64) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "part-*"))
	if len(files) == 0 {
		t.Fatalf("no part files in %s", dir)
	}
	seen := make([]int, n)
	bad := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			v, err := strconv.ParseInt(l, 10, 64)
			if err != nil || v < 0 || v >= n {
				if bad++; bad <= 10 {
					t.Errorf("%s: bad line %q", f, l)
				}
				continue
			}
			seen[v]++
		}
	}
	missing, dups := 0, 0
	for v, k := range seen {
		switch {
		case k == 0:
			if missing++; missing <= 5 {
				t.Errorf("%d is missing", v)
			}
		case k > 1:
			if dups++; dups <= 5 {
				t.Errorf("%d written %d times", v, k)
			}
		}
	}
	if bad+missing+dups > 0 {
		t.Fatalf("output of %d numbers: %d bad lines, %d missing, %d duplicated", n, bad, missing, dups)
	}
}

// nomadAgentAddress is the test agent's address startNomadAgent put into
// e's flags.
func nomadAgentAddress(t *testing.T, e *e2e) string {
	t.Helper()
	for _, a := range e.extraArg {
		if v, ok := strings.CutPrefix(a, "provider.nomad.address="); ok {
			return v
		}
	}
	t.Fatal("no provider.nomad.address")
	return ""
}

// stopNomadAllocation stops the running allocation of a Nomad job, as
// `nomad alloc stop` does.
func stopNomadAllocation(t *testing.T, agent, jobID string) string {
	t.Helper()
	resp, err := http.Get(agent + "/v1/job/" + jobID + "/allocations")
	if err != nil {
		t.Fatal(err)
	}
	var allocs []struct{ ID, ClientStatus string }
	err = json.NewDecoder(resp.Body).Decode(&allocs)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("allocations of %s: %d, %v", jobID, resp.StatusCode, err)
	}
	for _, a := range allocs {
		if a.ClientStatus == "running" {
			resp, err := http.Post(agent+"/v1/allocation/"+a.ID+"/stop", "application/json", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("stopping allocation %s: %d", a.ID, resp.StatusCode)
			}
			return a.ID
		}
	}
	t.Fatalf("no running allocation of %s: %+v", jobID, allocs)
	return ""
}

// TestFaultTaskManagerStoppedByNomad stops a TaskManager of a Nomad
// session cluster mid-job, gracefully as Nomad does (SIGTERM, then SIGKILL
// after the kill timeout): through the allocation stop API, and by
// SIGTERM to the process Nomad started. The job fails over at once, long
// before heartbeat.timeout, and FINISHES with the exact output instead of
// hanging.
func TestFaultTaskManagerStoppedByNomad(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"alloc stop", "SIGTERM"} {
		t.Run(strings.ReplaceAll(how, " ", "-"), func(t *testing.T) {
			e := newE2E(t)
			startNomadAgent(t, e)
			agent := nomadAgentAddress(t, e)
			job := faultTestJob(t, e)
			e.extraArg = append(e.extraArg, "-D", "taskmanager.numberOfTaskSlots=2", "-D", "heartbeat.timeout=50s",
				"-D", "restart-strategy.type=fixed-delay", "-D", "restart-strategy.fixed-delay.attempts=5",
				"-D", "restart-strategy.fixed-delay.delay=200ms")
			r := e.run("session", "start", "-t", "nomad", "--name", "nf", "-n", "2")
			expectOK(t, r, "session start -t nomad")
			defer func() { expectOK(t, e.run("session", "stop", "nf"), "session stop") }()
			m := regexp.MustCompile(`REST at http://(127\.0\.0\.1:\d+)`).FindStringSubmatch(r.stdout)
			if m == nil {
				t.Fatalf("no REST address in %q", r.stdout)
			}
			cl, err := client.New(m[1])
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(e.home, "out")
			const n = 32000 // 8000 per subtask at 800/s: 10 s
			r = e.run("run", "-m", "session", "--detached", "-p", "4", job, "paced-numbers",
				"--count", strconv.Itoa(n), "--rate", "3200", "--output", out)
			expectOK(t, r, "run -m session --detached")
			id := regexp.MustCompile(`Job ([0-9a-f]{32})`).FindStringSubmatch(r.stdout)[1]
			ctx := context.Background()
			var src string
			var sources []restapi.SubtaskInfo
			waitFor(t, 60*time.Second, func() error {
				d, err := cl.JobDetails(ctx, id)
				if err != nil {
					return err
				}
				for _, v := range d.Vertices {
					if strings.Contains(v.Name, "Paced numbers") {
						src = v.ID
					}
				}
				if src == "" {
					return fmt.Errorf("no source vertex in %+v", d.Vertices)
				}
				v, err := cl.JobVertex(ctx, id, src)
				if err != nil {
					return err
				}
				for _, s := range v.Subtasks {
					if s.Status != "RUNNING" {
						return fmt.Errorf("source %d is %s", s.Subtask, s.Status)
					}
				}
				sources = v.Subtasks
				return nil
			})
			victim := sources[0].TaskManagerID
			if how == "alloc stop" {
				alloc := stopNomadAllocation(t, agent, "gofl-nf-"+victim)
				t.Logf("stopped allocation %s of TaskManager %s", alloc, victim)
			} else {
				pid := processWith(t, e.agentHome, "taskmanager.resource-id="+victim)
				if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				t.Logf("sent SIGTERM to TaskManager %s (pid %d)", victim, pid)
			}
			// A graceful stop is no silent death: the JobMaster restarts
			// the subtasks that ran there well before the 50 s heartbeat
			// timeout.
			deadline := time.Now().Add(20 * time.Second)
			for {
				v, err := cl.JobVertex(ctx, id, src)
				stale := ""
				if err == nil {
					for _, s := range v.Subtasks {
						if s.TaskManagerID == victim && s.Attempt == 0 {
							stale = fmt.Sprintf("subtask %d is still attempt 0 on the stopped %s (%s)", s.Subtask, victim, s.Status)
						}
					}
				}
				if err == nil && stale == "" {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("no failover 20 s after the graceful stop: %s %v", stale, err)
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			d, err := cl.WaitForJobStatus(wctx, id, "FINISHED")
			if err != nil {
				ex, _ := cl.JobExceptions(ctx, id)
				t.Fatalf("job %s: %v; exceptions: %+v", d.State, err, ex.ExceptionHistory.Entries)
			}
			checkNumberParts(t, out, n)
		})
	}
}
