package nomad_test

import (
	"errors"
	"os"
	"path/filepath"
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
		eventually(t, time.Minute, jobID+": "+what, func() bool {
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
