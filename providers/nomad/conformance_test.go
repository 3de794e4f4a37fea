package nomad_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/gofl/gofl/providers/nomad/testagent"
)

// TestConformance is the Nomad API conformance suite: the endpoints,
// status codes, fields, state transitions, task event sequences and env
// vars the provider relies on, run against the test agent and the real
// agent. It is the test agent's specification: where the two differ, the
// test agent is wrong.
func TestConformance(t *testing.T) {
	forAgents(t, testagent.Config{}, testConformance)
}

// shJob is a one-task raw_exec job running sh -c script (args follow).
func shJob(id, typ, script string, args ...string) *api.Job {
	return &api.Job{
		ID: ptr(id), Name: ptr(id), Type: ptr(typ), Datacenters: []string{"dc1"},
		Meta: map[string]string{"gofl.cluster-id": "conf"},
		TaskGroups: []*api.TaskGroup{{
			Name: ptr("g"), Count: ptr(1),
			Networks:         []*api.NetworkResource{{DynamicPorts: []api.Port{{Label: "rpc"}}}},
			RestartPolicy:    &api.RestartPolicy{Attempts: ptr(0), Mode: ptr("fail")},
			ReschedulePolicy: &api.ReschedulePolicy{Attempts: ptr(0), Unlimited: ptr(false)},
			Tasks: []*api.Task{{
				Name: "t", Driver: "raw_exec", KillTimeout: ptr(2 * time.Second),
				Resources: &api.Resources{CPU: ptr(100), MemoryMB: ptr(64)},
				Config:    map[string]any{"command": "/bin/sh", "args": append([]string{"-c", script}, args...)},
			}},
		}},
	}
}

func ptr[T any](v T) *T { return &v }

func testConformance(t *testing.T, a agentT) {
	nc := apiClient(t, a, "")
	pfx := "conf-" + a.id("x") + "-"
	purge := func(id string) { _, _, _ = nc.Jobs().Deregister(id, true, nil) }
	register := func(t *testing.T, j *api.Job) string {
		t.Helper()
		resp, _, err := nc.Jobs().Register(j, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { purge(*j.ID) })
		return resp.EvalID
	}
	// alloc waits for the job's first allocation to satisfy cond.
	alloc := func(t *testing.T, jobID, what string, cond func(*api.Allocation) bool) *api.Allocation {
		t.Helper()
		var got *api.Allocation
		// Generous: a real exec task builds its chroot first, which takes
		// half a minute on a loaded machine.
		eventually(t, 3*time.Minute, jobID+": "+what, func() bool {
			stubs, _, err := nc.Jobs().Allocations(jobID, true, nil)
			if err != nil || len(stubs) == 0 {
				return false
			}
			o := stubs[0]
			for _, s := range stubs {
				if s.CreateIndex < o.CreateIndex {
					o = s
				}
			}
			al, _, err := nc.Allocations().Info(o.ID, nil)
			if err != nil || !cond(al) {
				return false
			}
			got = al
			return true
		})
		return got
	}
	events := func(al *api.Allocation) []string {
		var out []string
		if ts := al.TaskStates["t"]; ts != nil {
			for _, e := range ts.Events {
				out = append(out, e.Type)
			}
		}
		return out
	}
	terminal := func(al *api.Allocation) bool {
		return al.ClientStatus == "complete" || al.ClientStatus == "failed" || al.ClientStatus == "lost"
	}

	t.Run("register-conflict-500", func(t *testing.T) {
		j := shJob(pfx+"conflict", "service", "sleep 60")
		if _, _, err := nc.Jobs().EnforceRegister(j, 0, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { purge(*j.ID) })
		_, _, err := nc.Jobs().EnforceRegister(j, 0, nil)
		if statusCode(err) != 500 || !strings.Contains(err.Error(), api.RegisterEnforceIndexErrPrefix+" 0: job already exists") {
			t.Fatalf("second EnforceRegister: %v", err)
		}
	})
	t.Run("job-not-found-404", func(t *testing.T) {
		_, _, err := nc.Jobs().Info(pfx+"nope", nil)
		if statusCode(err) != 404 || !strings.Contains(err.Error(), "job not found") {
			t.Fatalf("Info(unknown): %v", err)
		}
	})
	t.Run("alloc-not-found-404", func(t *testing.T) {
		_, _, err := nc.Allocations().Info("00000000-0000-0000-0000-000000000000", nil)
		if statusCode(err) != 404 || !strings.Contains(err.Error(), "alloc not found") {
			t.Fatalf("Allocations().Info(unknown): %v", err)
		}
	})
	t.Run("unknown-job-allocations-empty", func(t *testing.T) {
		allocs, _, err := nc.Jobs().Allocations(pfx+"nope", true, nil)
		if err != nil || len(allocs) != 0 {
			t.Fatalf("Allocations(unknown) = %v, %v", allocs, err)
		}
	})
	t.Run("purge-unknown-job-no-eval", func(t *testing.T) {
		evalID, _, err := nc.Jobs().Deregister(pfx+"nope", true, nil)
		if err != nil || evalID != "" {
			t.Fatalf("Deregister(unknown) = %q, %v; want no evaluation", evalID, err)
		}
	})
	t.Run("validation-error-500", func(t *testing.T) {
		j := shJob(pfx+"invalid", "batch", "true")
		j.TaskGroups[0].Tasks[0].Resources.MemoryMB = ptr(1)
		_, _, err := nc.Jobs().Register(j, nil)
		if statusCode(err) != 500 || !strings.Contains(err.Error(), "minimum MemoryMB value is 10") {
			t.Fatalf("Register(MemoryMB 1): %v", err)
		}
	})
	t.Run("eval-completes", func(t *testing.T) {
		evalID := register(t, shJob(pfx+"eval", "batch", "true"))
		eventually(t, time.Minute, "the evaluation completes", func() bool {
			ev, _, err := nc.Evaluations().Info(evalID, nil)
			return err == nil && ev.Status == "complete"
		})
	})
	t.Run("batch-success-events", func(t *testing.T) {
		j := shJob(pfx+"ok", "batch", "exit 0")
		register(t, j)
		al := alloc(t, *j.ID, "complete", terminal)
		if al.ClientStatus != "complete" || strings.Join(events(al), ",") != "Received,Task Setup,Started,Terminated" {
			t.Fatalf("status %s, events %v", al.ClientStatus, events(al))
		}
		if ts := al.TaskStates["t"]; ts.State != "dead" || ts.Failed || ts.Events[3].ExitCode != 0 {
			t.Fatalf("task state %+v", ts)
		}
	})
	t.Run("batch-failure-no-restarts", func(t *testing.T) {
		j := shJob(pfx+"fail", "batch", "exit 3")
		register(t, j)
		al := alloc(t, *j.ID, "failed", terminal)
		ev := events(al)
		if al.ClientStatus != "failed" || strings.Join(ev, ",") != "Received,Task Setup,Started,Terminated,Not Restarting" {
			t.Fatalf("status %s, events %v", al.ClientStatus, ev)
		}
		ts := al.TaskStates["t"]
		if ts.Events[3].ExitCode != 3 || ts.Events[4].DisplayMessage != "Policy allows no restarts" || !ts.Failed {
			t.Fatalf("exit %d, %q, failed %v", ts.Events[3].ExitCode, ts.Events[4].DisplayMessage, ts.Failed)
		}
	})
	t.Run("stop-events-killing-terminated-killed", func(t *testing.T) {
		j := shJob(pfx+"stop", "service", "exec sleep 300")
		register(t, j)
		al := alloc(t, *j.ID, "running", func(al *api.Allocation) bool { return al.ClientStatus == "running" })
		if _, _, err := nc.Jobs().Deregister(*j.ID, false, nil); err != nil {
			t.Fatal(err)
		}
		al = alloc(t, *j.ID, "stopped", terminal)
		if al.DesiredStatus != "stop" || al.ClientStatus != "complete" ||
			strings.Join(events(al), ",") != "Received,Task Setup,Started,Killing,Terminated,Killed" {
			t.Fatalf("desired %s, status %s, events %v", al.DesiredStatus, al.ClientStatus, events(al))
		}
	})
	t.Run("unknown-variable-fails-task", func(t *testing.T) {
		j := shJob(pfx+"unknownvar", "batch", "true", "${foo}")
		register(t, j)
		al := alloc(t, *j.ID, "failed", terminal)
		ts := al.TaskStates["t"]
		var ve string
		for _, e := range ts.Events {
			if e.Type == "Failed Validation" {
				ve = e.ValidationError + e.DisplayMessage
			}
		}
		if al.ClientStatus != "failed" || !strings.Contains(ve, `Unknown variable: There is no variable named "foo"`) {
			t.Fatalf("status %s, events %v, validation %q", al.ClientStatus, events(al), ve)
		}
	})
	running := func(al *api.Allocation) bool { return al.ClientStatus == "running" }
	// taskEvent is the first event of type typ (nil: none).
	taskEvent := func(al *api.Allocation, typ string) *api.TaskEvent {
		if ts := al.TaskStates["t"]; ts != nil {
			for _, e := range ts.Events {
				if e.Type == typ {
					return e
				}
			}
		}
		return nil
	}
	t.Run("register-to-running-lag", func(t *testing.T) {
		t.Parallel()
		j := shJob(pfx+"lag", "service", "exec sleep 300")
		register(t, j)
		// When the register returns, nothing runs yet: the client has still
		// to receive the allocation and set up its task.
		stubs, _, err := nc.Jobs().Allocations(*j.ID, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stubs {
			if s.ClientStatus == "running" {
				t.Fatalf("allocation %s already running when the register returned", s.ID)
			}
		}
		al := alloc(t, *j.ID, "running", running)
		recv, setup, started := taskEvent(al, "Received"), taskEvent(al, "Task Setup"), taskEvent(al, "Started")
		if recv == nil || setup == nil || started == nil || recv.Time > setup.Time || setup.Time > started.Time {
			t.Fatalf("events %v not in order Received, Task Setup, Started", events(al))
		}
		// Register to running takes a while (0.35-1 s on an idle real agent).
		if lag := time.Duration(started.Time - al.CreateTime); lag < 100*time.Millisecond {
			t.Errorf("allocation created to task started: %v, want at least 100ms", lag)
		}
	})
	t.Run("kill-timeout", func(t *testing.T) {
		t.Parallel()
		// The task ignores the kill signal (SIGINT for raw_exec: "Sent
		// interrupt"): it is force-killed after KillTimeout (2s).
		j := shJob(pfx+"killtimeout", "service", "trap '' INT TERM; while :; do sleep 0.1; done")
		register(t, j)
		alloc(t, *j.ID, "running", running)
		if _, _, err := nc.Jobs().Deregister(*j.ID, false, nil); err != nil {
			t.Fatal(err)
		}
		al := alloc(t, *j.ID, "stopped", terminal)
		killing, killed := taskEvent(al, "Killing"), taskEvent(al, "Killed")
		if killing == nil || killed == nil {
			t.Fatalf("events %v", events(al))
		}
		if killing.KillTimeout != 2*time.Second || !strings.Contains(killing.DisplayMessage, "Sent interrupt. Waiting 2s before force killing") {
			t.Errorf("Killing: timeout %v, %q", killing.KillTimeout, killing.DisplayMessage)
		}
		if d := time.Duration(killed.Time - killing.Time); d < 2*time.Second || d > 30*time.Second {
			t.Errorf("Killing to Killed: %v, want KillTimeout (2s) or a little more", d)
		}
	})
	t.Run("eval-starts-pending", func(t *testing.T) {
		t.Parallel()
		j := shJob(pfx+"evalpending", "batch", "true")
		ch, cancel := eventStream(t, nc, map[api.Topic][]string{api.TopicEvaluation: {*j.ID}})
		defer cancel()
		evalID := register(t, j)
		var statuses []string
		for ev := range ch {
			e, err := ev.Evaluation()
			if err != nil || e == nil || e.ID != evalID {
				continue
			}
			statuses = append(statuses, e.Status)
			if e.Status == "complete" {
				break
			}
		}
		if len(statuses) == 0 || statuses[0] != "pending" || statuses[len(statuses)-1] != "complete" {
			t.Fatalf("evaluation %s went %v, want pending ... complete", evalID, statuses)
		}
	})
	t.Run("event-stream", func(t *testing.T) {
		t.Parallel()
		j := shJob(pfx+"events", "service", "exec sleep 300")
		ch, cancel := eventStream(t, nc, map[api.Topic][]string{api.TopicAllocation: {*j.ID}})
		defer cancel()
		register(t, j)
		// The first allocation's events, as "Type:Desired/Client".
		var types []string
		first, stopped := "", false
		for ev := range ch {
			a, err := ev.Allocation()
			if err != nil || a == nil {
				continue
			}
			if first == "" {
				first = a.ID
			}
			if a.ID != first {
				continue
			}
			types = append(types, ev.Type+":"+a.DesiredStatus+"/"+a.ClientStatus)
			if a.ClientStatus == "running" && ev.Type == "AllocationUpdated" && !stopped {
				stopped = true
				if _, err := nc.Allocations().Stop(&api.Allocation{ID: a.ID}, nil); err != nil {
					t.Fatal(err)
				}
			}
			if a.ClientStatus == "complete" {
				break
			}
		}
		// Placed by a plan; client updates bundled (Received, Task Setup
		// and Started have no event each); alloc stop's migrate transition, then the
		// plan that stops it; the client's final update.
		got := strings.Join(types, " ")
		want := regexp.MustCompile(`^PlanResult:run/pending (AllocationUpdated:run/pending ){0,2}(AllocationUpdated:run/running ){1,2}` +
			`AllocationUpdateDesiredStatus:run/running PlanResult:stop/running (AllocationUpdated:stop/running )?AllocationUpdated:stop/complete$`)
		if !want.MatchString(got) {
			t.Fatalf("allocation events: %s", got)
		}
	})
	t.Run("purge-keeps-desired-run", func(t *testing.T) {
		t.Parallel()
		j := shJob(pfx+"purgedone", "batch", "exit 0")
		register(t, j)
		al := alloc(t, *j.ID, "complete", terminal)
		if _, _, err := nc.Jobs().Deregister(*j.ID, true, nil); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, "the job is gone", func() bool {
			_, _, err := nc.Jobs().Info(*j.ID, nil)
			return statusCode(err) == 404
		})
		got, _, err := nc.Allocations().Info(al.ID, nil)
		if err == nil && got.DesiredStatus != "run" {
			t.Errorf("a finished allocation of a purged job has DesiredStatus %q, want run", got.DesiredStatus)
		}
	})
	t.Run("alloc-stop-replacement", func(t *testing.T) {
		t.Parallel()
		j := shJob(pfx+"allocstop", "service", "exec sleep 300")
		register(t, j)
		old := alloc(t, *j.ID, "running", running)
		stoppedAt := time.Now()
		if _, err := nc.Allocations().Stop(&api.Allocation{ID: old.ID}, nil); err != nil {
			t.Fatal(err)
		}
		var repl *api.Allocation
		eventually(t, time.Minute, "a replacement runs", func() bool {
			stubs, _, err := nc.Jobs().Allocations(*j.ID, true, nil)
			if err != nil {
				return false
			}
			for _, s := range stubs {
				if s.ID != old.ID && s.ClientStatus == "running" {
					repl, _, err = nc.Allocations().Info(s.ID, nil)
					return err == nil
				}
			}
			return false
		})
		o, _, err := nc.Allocations().Info(old.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if o.DesiredStatus != "stop" || o.DesiredTransition.Migrate == nil || !*o.DesiredTransition.Migrate || o.NextAllocation != repl.ID {
			t.Errorf("stopped allocation: desired %s, transition %+v, next %q (replacement %s)", o.DesiredStatus, o.DesiredTransition, o.NextAllocation, repl.ID)
		}
		if repl.PreviousAllocation != old.ID {
			t.Errorf("replacement's PreviousAllocation %q, want %s", repl.PreviousAllocation, old.ID)
		}
		// Linked and placed after the stop; it starts after the old task
		// was told to stop (a real agent creates it at once and starts it
		// about 0.5 s later; this agent places it a second later).
		killing, started := taskEvent(o, "Killing"), taskEvent(repl, "Started")
		if repl.CreateTime < stoppedAt.Add(-time.Second).UnixNano() || killing == nil || started == nil || started.Time < killing.Time {
			t.Errorf("replacement created %v after the stop, old events %v, replacement events %v",
				time.Unix(0, repl.CreateTime).Sub(stoppedAt), events(o), events(repl))
		}
	})
	t.Run("artifact-mode-0644", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("#!/bin/sh\n"))
		}))
		defer srv.Close()
		out := filepath.Join(t.TempDir(), "mode")
		j := shJob(pfx+"artmode", "batch", `stat -c %a "$NOMAD_TASK_DIR/bin" > "$0"`, out)
		j.TaskGroups[0].Tasks[0].Artifacts = []*api.TaskArtifact{{GetterSource: ptr(srv.URL + "/bin")}}
		register(t, j)
		al := alloc(t, *j.ID, "complete", terminal)
		b, err := os.ReadFile(out)
		if err != nil || strings.TrimSpace(string(b)) != "644" {
			t.Fatalf("status %s, events %v: artifact mode %q, %v; want 644 (never made executable)", al.ClientStatus, events(al), b, err)
		}
	})
	t.Run("artifact-failure-ends-alloc", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		defer srv.Close()
		j := shJob(pfx+"artfail", "batch", "true")
		j.TaskGroups[0].Tasks[0].Artifacts = []*api.TaskArtifact{{GetterSource: ptr(srv.URL + "/missing")}}
		register(t, j)
		al := alloc(t, *j.ID, "failed", terminal)
		// A failed pre-start hook fails the task under the restart policy;
		// the getter's message is generic, whatever went wrong.
		want := "Received,Task Setup,Downloading Artifacts,Failed Artifact Download,Not Restarting"
		if al.ClientStatus != "failed" || strings.Join(events(al), ",") != want || !al.TaskStates["t"].Failed {
			t.Fatalf("status %s, events %v", al.ClientStatus, events(al))
		}
		msg := fmt.Sprintf("failed to download artifact %q: getter subprocess failed: exit status 1", srv.URL+"/missing")
		if f := taskEvent(al, "Failed Artifact Download"); f.DisplayMessage != msg || f.DownloadError != msg {
			t.Errorf("Failed Artifact Download: %q, %q; want %q", f.DisplayMessage, f.DownloadError, msg)
		}
		if nr := taskEvent(al, "Not Restarting"); nr.DisplayMessage != "Policy allows no restarts" {
			t.Errorf("Not Restarting: %q", nr.DisplayMessage)
		}
	})
	// stdout is the task's stdout, read through the client fs API.
	stdout := func(t *testing.T, al *api.Allocation) string {
		t.Helper()
		// Only the ID: through the server, not a direct client connection
		// (the api client never closes that one).
		rc, err := nc.AllocFS().Cat(&api.Allocation{ID: al.ID}, "alloc/logs/t.stdout.0", nil)
		if err != nil {
			t.Fatalf("reading the task's stdout: %v", err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	t.Run("alloc-logs-readable", func(t *testing.T) {
		t.Parallel()
		j := shJob(pfx+"logs", "batch", "echo hello; echo oops >&2")
		register(t, j)
		al := alloc(t, *j.ID, "complete", terminal)
		if got := stdout(t, al); got != "hello\n" {
			t.Errorf("stdout %q", got)
		}
		rc, err := nc.AllocFS().ReadAt(&api.Allocation{ID: al.ID}, "alloc/logs/t.stderr.0", 1, 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		if b, _ := io.ReadAll(rc); string(b) != "ops" {
			t.Errorf("stderr [1, 4) %q", b)
		}
	})
	t.Run("exec-isolates-task-dir", func(t *testing.T) {
		t.Parallel()
		if !a.real && !testagent.ExecIsolates() {
			// As Nomad's, the test agent's exec driver needs root (and
			// unshare and chroot) to isolate; without them it runs exec
			// tasks like raw_exec. CI runs as root.
			if os.Getenv("CI") == "true" {
				t.Fatal("the test agent cannot isolate exec tasks here: it needs root, unshare and chroot")
			}
			t.Skip("the test agent isolates exec tasks only as root, with unshare and chroot")
		}
		marker := filepath.Join(t.TempDir(), "host-file")
		if err := os.WriteFile(marker, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		j := shJob(pfx+"exec", "batch", `echo "dir=$NOMAD_TASK_DIR"; if [ -e "$0" ]; then echo host-visible; else echo host-hidden; fi`, marker)
		j.TaskGroups[0].Tasks[0].Driver = "exec"
		register(t, j)
		al := alloc(t, *j.ID, "complete", terminal)
		if al.ClientStatus != "complete" {
			t.Fatalf("status %s, events %v", al.ClientStatus, events(al))
		}
		if got := stdout(t, al); got != "dir=/local\nhost-hidden\n" {
			t.Errorf("exec task printed %q; want its own root: NOMAD_TASK_DIR /local, host files hidden", got)
		}
	})
	t.Run("env-and-escape", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "env")
		j := shJob(pfx+"env", "batch", `tr "\\0" "\\n" < /proc/$$/environ > "$0.tmp"; echo "ARG1=$1" >> "$0.tmp"; mv "$0.tmp" "$0"`, out, "$${x}")
		j.TaskGroups[0].Tasks[0].Env = map[string]string{"GOFL_CLUSTER_ID": "conf"}
		register(t, j)
		al := alloc(t, *j.ID, "complete", terminal)
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatalf("status %s, events %v: %v", al.ClientStatus, events(al), err)
		}
		env := map[string]string{}
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok {
				env[k] = v
			}
		}
		if env["ARG1"] != "${x}" {
			t.Errorf("$${x} reached the task as %q", env["ARG1"])
		}
		for _, k := range []string{"NOMAD_IP_rpc", "NOMAD_PORT_rpc", "NOMAD_ALLOC_ID", "NOMAD_JOB_ID", "NOMAD_TASK_DIR", "GOFL_CLUSTER_ID"} {
			if env[k] == "" {
				t.Errorf("no %s in the task env", k)
			}
		}
		if env["NOMAD_ALLOC_ID"] != al.ID || env["NOMAD_JOB_ID"] != *j.ID || env["NOMAD_IP_rpc"] != "127.0.0.1" {
			t.Errorf("NOMAD_ALLOC_ID %s NOMAD_JOB_ID %s NOMAD_IP_rpc %s", env["NOMAD_ALLOC_ID"], env["NOMAD_JOB_ID"], env["NOMAD_IP_rpc"])
		}
		if p, _ := strconv.Atoi(env["NOMAD_PORT_rpc"]); p < 20000 || p > 32000 {
			t.Errorf("dynamic port %s outside 20000-32000", env["NOMAD_PORT_rpc"])
		}
		if env["NOMAD_META_gofl.cluster_id"] != "conf" {
			var metas []string
			for k, v := range env {
				if strings.HasPrefix(k, "NOMAD_META_") {
					metas = append(metas, k+"="+v)
				}
			}
			t.Errorf("meta env: NOMAD_META_gofl.cluster_id = %q; NOMAD_META_*: %v", env["NOMAD_META_gofl.cluster_id"], metas)
		}
		for k := range env {
			if strings.HasPrefix(k, "NOMAD_ALLOC_ADDR_") || strings.HasPrefix(k, "NOMAD_ALLOC_IP_") {
				t.Errorf("%s set for a host port", k)
			}
		}
	})
}

// eventStream subscribes to the agent's event stream from now on; the
// channel closes when cancel is called or the test ends.
func eventStream(t *testing.T, nc *api.Client, topics map[api.Topic][]string) (<-chan api.Event, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	in, err := nc.EventStream().Stream(ctx, topics, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan api.Event)
	go func() {
		defer close(out)
		for evs := range in {
			if evs.Err != nil {
				if ctx.Err() == nil {
					t.Errorf("event stream: %v", evs.Err)
				}
				return
			}
			for _, e := range evs.Events {
				select {
				case out <- e:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, func() {
		cancel()
		for range out {
		}
	}
}

// statusCode is the HTTP status of a Nomad API error (0: none).
func statusCode(err error) int {
	var ue api.UnexpectedResponseError
	if errors.As(err, &ue) && ue.HasStatusCode() {
		return ue.StatusCode()
	}
	var up *api.UnexpectedResponseError
	if errors.As(err, &up) && up.HasStatusCode() {
		return up.StatusCode()
	}
	return 0
}
