package testagent_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/gofl/gofl/providers/nomad/testagent"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type env struct {
	t     *testing.T
	agent *testagent.Agent
	tr    *http.Transport
}

func startAgent(t *testing.T, cfg testagent.Config) *env {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	a, err := testagent.New(cfg, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, agent: a, tr: &http.Transport{}}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		e.tr.CloseIdleConnections()
	})
	return e
}

// client is the real Nomad api client pointed at the agent.
func (e *env) client(mod func(*api.Config)) *api.Client {
	e.t.Helper()
	cfg := api.DefaultConfig()
	cfg.Address = e.agent.URL()
	cfg.HttpClient = &http.Client{Transport: e.tr}
	cfg.SecretID = ""
	cfg.Namespace = ""
	cfg.Region = ""
	if mod != nil {
		mod(cfg)
	}
	c, err := api.NewClient(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func shJob(id, typ, script string) *api.Job {
	j := api.NewBatchJob(id, id, "global", 50)
	if typ == "service" {
		j = api.NewServiceJob(id, id, "global", 50)
	}
	j.Datacenters = []string{"dc1"}
	task := api.NewTask("t", "raw_exec").SetConfig("command", "/bin/sh").SetConfig("args", []string{"-c", script})
	task.Require(&api.Resources{CPU: new(100), MemoryMB: new(64)})
	tg := api.NewTaskGroup("g", 1).AddTask(task)
	j.AddTaskGroup(tg)
	return j
}

func noRestart(j *api.Job) *api.Job {
	j.TaskGroups[0].RestartPolicy = &api.RestartPolicy{Attempts: new(0), Mode: new("fail"),
		Interval: new(time.Hour), Delay: new(10 * time.Millisecond)}
	return j
}

// waitAllocs follows /v1/job/:id/allocations with blocking queries until
// ok accepts the list.
func waitAllocs(t *testing.T, c *api.Client, ns, jobID string, ok func([]*api.AllocationListStub) bool) []*api.AllocationListStub {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var idx uint64
	for time.Now().Before(deadline) {
		allocs, meta, err := c.Jobs().Allocations(jobID, true, &api.QueryOptions{Namespace: ns, WaitIndex: idx, WaitTime: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if ok(allocs) {
			return allocs
		}
		idx = meta.LastIndex
	}
	t.Fatalf("timed out waiting for allocations of %s", jobID)
	return nil
}

func oneWith(status string) func([]*api.AllocationListStub) bool {
	return func(l []*api.AllocationListStub) bool { return len(l) == 1 && l[0].ClientStatus == status }
}

func eventTypes(ts *api.TaskState) []string {
	var out []string
	for _, e := range ts.Events {
		out = append(out, e.Type)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func readFileWait(t *testing.T, p string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 && strings.HasSuffix(string(b), "\n") {
			return string(b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("file %s never written", p)
	return ""
}

func statusCode(err error) int {
	var ure api.UnexpectedResponseError
	if errors.As(err, &ure) {
		return ure.StatusCode()
	}
	return 0
}

func TestBatchJobCompletes(t *testing.T) {
	e := startAgent(t, testagent.Config{})
	c := e.client(nil)
	resp, wm, err := c.Jobs().Register(shJob("hello", "batch", "echo hi; exit 0"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.EvalID == "" || resp.JobModifyIndex == 0 || wm.LastIndex == 0 {
		t.Fatalf("register response %+v meta %+v", resp, wm)
	}
	ev, qm, err := c.Evaluations().Info(resp.EvalID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Status != "complete" || len(ev.FailedTGAllocs) != 0 || ev.TriggeredBy != "job-register" || ev.JobID != "hello" {
		t.Fatalf("eval %+v", ev)
	}
	if qm.LastIndex == 0 || !qm.KnownLeader {
		t.Fatalf("query meta %+v", qm)
	}
	stubs := waitAllocs(t, c, "", "hello", oneWith("complete"))
	al, _, err := c.Allocations().Info(stubs[0].ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := al.TaskStates["t"]
	if ts == nil || ts.State != "dead" || ts.Failed || ts.StartedAt.IsZero() || ts.FinishedAt.IsZero() {
		t.Fatalf("task state %+v", ts)
	}
	types := eventTypes(ts)
	for _, want := range []string{"Received", "Task Setup", "Started", "Terminated"} {
		if !contains(types, want) {
			t.Fatalf("events %v lack %q", types, want)
		}
	}
	last := ts.Events[len(ts.Events)-1]
	if last.Type != "Terminated" || last.ExitCode != 0 || last.Details["exit_code"] != "0" {
		t.Fatalf("last event %+v", last)
	}
	if al.Name != "hello.g[0]" || al.DesiredStatus != "run" || al.Job == nil || *al.Job.ID != "hello" || al.EvalID != resp.EvalID {
		t.Fatalf("alloc %+v", al)
	}
	out, err := os.ReadFile(filepath.Join(e.agent.DataDir(), "alloc", al.ID, "alloc", "logs", "t.stdout.0"))
	if err != nil || string(out) != "hi\n" {
		t.Fatalf("stdout %q %v", out, err)
	}
	for _, d := range []string{"alloc/data", "t/local", "t/secrets", "t/tmp"} {
		if fi, err := os.Stat(filepath.Join(e.agent.DataDir(), "alloc", al.ID, d)); err != nil || !fi.IsDir() {
			t.Fatalf("alloc dir %s: %v", d, err)
		}
	}
	job, _, err := c.Jobs().Info("hello", nil)
	if err != nil {
		t.Fatal(err)
	}
	if *job.Status != "dead" || *job.Type != "batch" || *job.TaskGroups[0].RestartPolicy.Attempts != 3 {
		t.Fatalf("job status %s type %s restart %+v", *job.Status, *job.Type, job.TaskGroups[0].RestartPolicy)
	}
	list, _, err := c.Jobs().PrefixList("hel")
	if err != nil || len(list) != 1 || list[0].ID != "hello" || list[0].JobSummary.Summary["g"].Complete != 1 {
		t.Fatalf("list %+v %v", list, err)
	}
	if list, _, _ := c.Jobs().PrefixList("nope"); len(list) != 0 {
		t.Fatalf("prefix nope listed %v", list)
	}
	nodes, _, err := c.Nodes().List(nil)
	if err != nil || len(nodes) != 1 || nodes[0].Datacenter != "dc1" || nodes[0].Status != "ready" {
		t.Fatalf("nodes %+v %v", nodes, err)
	}
	node, _, err := c.Nodes().Info(nodes[0].ID, nil)
	if err != nil || node.Attributes["driver.raw_exec"] != "1" || node.NodeResources.Memory.MemoryMB != 8192 {
		t.Fatalf("node %+v %v", node, err)
	}
	if dc, err := c.Agent().Datacenter(); err != nil || dc != "dc1" {
		t.Fatalf("agent dc %q %v", dc, err)
	}
	if reg, err := c.Agent().Region(); err != nil || reg != "global" {
		t.Fatalf("agent region %q %v", reg, err)
	}
	if l, err := c.Status().Leader(); err != nil || l == "" {
		t.Fatalf("leader %q %v", l, err)
	}
	evals, _, err := c.Jobs().Evaluations("hello", nil)
	if err != nil || len(evals) != 1 {
		t.Fatalf("evals %v %v", evals, err)
	}

	// Nomad's 404s with plain-text bodies.
	_, _, err = c.Jobs().Info("missing", nil)
	if statusCode(err) != 404 || !strings.Contains(err.Error(), "job not found") {
		t.Fatalf("missing job: %v", err)
	}
	_, _, err = c.Allocations().Info("00000000-0000-0000-0000-000000000000", nil)
	if statusCode(err) != 404 || !strings.Contains(err.Error(), "alloc not found") {
		t.Fatalf("missing alloc: %v", err)
	}
	_, _, err = c.Evaluations().Info("00000000-0000-0000-0000-000000000000", nil)
	if statusCode(err) != 404 || !strings.Contains(err.Error(), "eval not found") {
		t.Fatalf("missing eval: %v", err)
	}
	// Raw headers.
	r, err := e.tr.RoundTrip(mustReq(t, "GET", e.agent.URL()+"/v1/job/hello"))
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.Header.Get("X-Nomad-Index") == "" || r.Header.Get("X-Nomad-KnownLeader") != "true" || r.Header.Get("X-Nomad-LastContact") != "0" {
		t.Fatalf("headers %v", r.Header)
	}
}

func mustReq(t *testing.T, method, url string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestBadJobSpec(t *testing.T) {
	e := startAgent(t, testagent.Config{})
	c := e.client(nil)
	j := shJob("bad", "batch", "true")
	j.TaskGroups[0].Tasks[0].Resources.MemoryMB = new(5)
	j.TaskGroups[0].Tasks[0].Driver = ""
	_, _, err := c.Jobs().Register(j, nil)
	if statusCode(err) != 500 || !strings.Contains(err.Error(), "minimum MemoryMB value is 10") ||
		!strings.Contains(err.Error(), "Missing task driver") {
		t.Fatalf("bad job: %v", err)
	}
	// A task with an unknown driver is accepted but cannot be placed.
	j = shJob("docker", "batch", "true")
	j.TaskGroups[0].Tasks[0].Driver = "docker"
	resp, _, err := c.Jobs().Register(j, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev, _, _ := c.Evaluations().Info(resp.EvalID, nil)
	if m := ev.FailedTGAllocs["g"]; m == nil || m.ConstraintFiltered["missing drivers"] != 1 {
		t.Fatalf("eval %+v", ev)
	}
	// A raw_exec task without a command fails validation on the client.
	j = shJob("nocmd", "batch", "true")
	j.TaskGroups[0].Tasks[0].Config = map[string]any{}
	if _, _, err := c.Jobs().Register(j, nil); err != nil {
		t.Fatal(err)
	}
	allocs := waitAllocs(t, c, "", "nocmd", oneWith("failed"))
	if !contains(eventTypes(allocs[0].TaskStates["t"]), "Failed Validation") {
		t.Fatalf("events %v", eventTypes(allocs[0].TaskStates["t"]))
	}
}

func TestServiceKilledRestartsThenFails(t *testing.T) {
	e := startAgent(t, testagent.Config{})
	c := e.client(nil)
	j := shJob("svc", "service", `echo $$ >> "$NOMAD_TASK_DIR/pids"; exec sleep 300`)
	j.TaskGroups[0].RestartPolicy = &api.RestartPolicy{Attempts: new(1), Interval: new(10 * time.Minute),
		Delay: new(100 * time.Millisecond), Mode: new("fail")}
	if _, _, err := c.Jobs().Register(j, nil); err != nil {
		t.Fatal(err)
	}
	stubs := waitAllocs(t, c, "", "svc", oneWith("running"))
	pidFile := filepath.Join(e.agent.DataDir(), "alloc", stubs[0].ID, "t", "local", "pids")
	kill := func(n int) {
		lines := strings.Fields(readFileWait(t, pidFile))
		for deadline := time.Now().Add(time.Minute); len(lines) < n; {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d never written: %q", n, lines)
			}
			time.Sleep(20 * time.Millisecond)
			lines = strings.Fields(readFileWait(t, pidFile))
		}
		pid, _ := strconv.Atoi(lines[n-1])
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill %d: %v", pid, err)
		}
	}
	kill(1)
	// Restarted within policy: running again with one restart.
	waitAllocs(t, c, "", "svc", func(l []*api.AllocationListStub) bool {
		ts := l[0].TaskStates["t"]
		return ts.Restarts == 1 && ts.State == "running"
	})
	kill(2)
	stubs = waitAllocs(t, c, "", "svc", oneWith("failed"))
	ts := stubs[0].TaskStates["t"]
	if ts.State != "dead" || !ts.Failed || ts.Restarts != 1 {
		t.Fatalf("task state %+v", ts)
	}
	types := eventTypes(ts)
	if !contains(types, "Restarting") || types[len(types)-1] != "Not Restarting" {
		t.Fatalf("events %v", types)
	}
	var term *api.TaskEvent
	for _, ev := range ts.Events {
		if ev.Type == "Terminated" {
			term = ev
		}
	}
	if term == nil || term.Signal != 9 || term.ExitCode != 137 {
		t.Fatalf("terminated event %+v", term)
	}
	if !strings.Contains(ts.Events[len(ts.Events)-1].DisplayMessage, `Exceeded allowed attempts 1 in interval 10m0s and mode is "fail"`) {
		t.Fatalf("not restarting message %q", ts.Events[len(ts.Events)-1].DisplayMessage)
	}
}

func pidAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestDynamicPortsEnvAndPurge(t *testing.T) {
	e := startAgent(t, testagent.Config{})
	c := e.client(nil)
	j := shJob("ports", "service", `env > "$NOMAD_TASK_DIR/env.tmp"; mv "$NOMAD_TASK_DIR/env.tmp" "$NOMAD_TASK_DIR/env"; echo $$ > "$NOMAD_TASK_DIR/pid"; exec sleep 300`)
	j.Meta = map[string]string{"cluster": "c1"}
	j.TaskGroups[0].Networks = []*api.NetworkResource{{DynamicPorts: []api.Port{{Label: "rpc"}, {Label: "rest-api"}}}}
	j.TaskGroups[0].Tasks[0].Env = map[string]string{"GOFL_RPC": "${NOMAD_ADDR_rpc}", "GOFL_KERNEL": "${attr.kernel.name}"}
	j.TaskGroups[0].Tasks[0].KillTimeout = new(2 * time.Second)
	if _, _, err := c.Jobs().Register(j, nil); err != nil {
		t.Fatal(err)
	}
	stubs := waitAllocs(t, c, "", "ports", oneWith("running"))
	al, _, err := c.Allocations().Info(stubs[0].ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]int{}
	for _, p := range al.AllocatedResources.Shared.Ports {
		ports[p.Label] = p.Value
	}
	if ports["rpc"] == 0 || ports["rest-api"] == 0 || ports["rpc"] == ports["rest-api"] {
		t.Fatalf("ports %v", ports)
	}
	taskDir := filepath.Join(e.agent.DataDir(), "alloc", al.ID, "t")
	envText := readFileWait(t, filepath.Join(taskDir, "local", "env"))
	got := map[string]string{}
	for _, l := range strings.Split(envText, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			got[k] = v
		}
	}
	rpc := strconv.Itoa(ports["rpc"])
	want := map[string]string{
		"NOMAD_PORT_rpc":          rpc,
		"NOMAD_HOST_PORT_rpc":     rpc,
		"NOMAD_IP_rpc":            "127.0.0.1",
		"NOMAD_ADDR_rpc":          "127.0.0.1:" + rpc,
		"NOMAD_PORT_rest_api":     strconv.Itoa(ports["rest-api"]),
		"GOFL_RPC":                "127.0.0.1:" + rpc,
		"GOFL_KERNEL":             "linux",
		"NOMAD_ALLOC_ID":          al.ID,
		"NOMAD_ALLOC_INDEX":       "0",
		"NOMAD_ALLOC_NAME":        "ports.g[0]",
		"NOMAD_ALLOC_DIR":         filepath.Join(e.agent.DataDir(), "alloc", al.ID, "alloc"),
		"NOMAD_TASK_DIR":          filepath.Join(taskDir, "local"),
		"NOMAD_SECRETS_DIR":       filepath.Join(taskDir, "secrets"),
		"NOMAD_JOB_ID":            "ports",
		"NOMAD_JOB_NAME":          "ports",
		"NOMAD_GROUP_NAME":        "g",
		"NOMAD_TASK_NAME":         "t",
		"NOMAD_NAMESPACE":         "default",
		"NOMAD_REGION":            "global",
		"NOMAD_DC":                "dc1",
		"NOMAD_CPU_LIMIT":         "100",
		"NOMAD_MEMORY_LIMIT":      "64",
		"NOMAD_META_cluster":      "c1",
		"NOMAD_META_CLUSTER":      "c1",
		"PWD":                     taskDir,
		"NOMAD_SHORT_ALLOC_ID":    al.ID[:8],
		"NOMAD_HOST_ADDR_rpc":     "127.0.0.1:" + rpc,
		"NOMAD_ALLOC_PORT_rpc":    rpc,
		"NOMAD_HOST_IP_rest_api":  "127.0.0.1",
		"NOMAD_ADDR_rest_api":     "127.0.0.1:" + strconv.Itoa(ports["rest-api"]),
		"NOMAD_ALLOC_ADDR_rpc":    "", // not for host ports, as Nomad
		"NOMAD_ALLOC_IP_rest_api": "",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(readFileWait(t, filepath.Join(taskDir, "local", "pid"))))
	if !pidAlive(pid) {
		t.Fatalf("pid %d not alive", pid)
	}
	// Deregister with purge: the process is stopped and the job is gone.
	evalID, _, err := c.Jobs().Deregister("ports", true, nil)
	if err != nil || evalID == "" {
		t.Fatalf("deregister %q %v", evalID, err)
	}
	deadline := time.Now().Add(time.Minute)
	for pidAlive(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if pidAlive(pid) {
		t.Fatalf("pid %d survived purge", pid)
	}
	_, _, err = c.Jobs().Info("ports", nil)
	if statusCode(err) != 404 {
		t.Fatalf("purged job: %v", err)
	}
	// Its allocation remains queryable, stopped, until GC (as in Nomad).
	al2 := waitAllocs(t, c, "", "ports", oneWith("complete"))[0]
	if al2.DesiredStatus != "stop" || !contains(eventTypes(al2.TaskStates["t"]), "Killing") ||
		!contains(eventTypes(al2.TaskStates["t"]), "Killed") {
		t.Fatalf("purged alloc %+v events %v", al2, eventTypes(al2.TaskStates["t"]))
	}
	if err := c.System().GarbageCollect(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Allocations().Info(al.ID, nil); statusCode(err) != 404 {
		t.Fatalf("alloc after gc: %v", err)
	}
}

func TestArtifacts(t *testing.T) {
	script := []byte("#!/bin/sh\necho artifact-ran\n")
	sum := sha256.Sum256(script)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/tool.sh" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(script)
	}))
	defer srv.Close()
	e := startAgent(t, testagent.Config{})
	c := e.client(nil)

	mk := func(id, checksum, source string) *api.Job {
		j := noRestart(shJob(id, "batch", ""))
		task := j.TaskGroups[0].Tasks[0]
		task.Config = map[string]any{"command": "/bin/sh", "args": []string{"local/tool.sh"}}
		task.Artifacts = []*api.TaskArtifact{{GetterSource: new(source), RelativeDest: new("local/tool.sh"),
			GetterMode: new("file"), GetterOptions: map[string]string{"checksum": checksum}}}
		return j
	}
	good := "sha256:" + hex.EncodeToString(sum[:])
	if _, _, err := c.Jobs().Register(mk("art-ok", good, srv.URL+"/tool.sh"), nil); err != nil {
		t.Fatal(err)
	}
	bad := "sha256:" + strings.Repeat("00", 32)
	if _, _, err := c.Jobs().Register(mk("art-bad", bad, srv.URL+"/tool.sh"), nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Jobs().Register(mk("art-hdfs", good, "hdfs://namenode:8020/gofl/tool.sh"), nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Jobs().Register(mk("art-404", good, srv.URL+"/missing"), nil); err != nil {
		t.Fatal(err)
	}

	ok := waitAllocs(t, c, "", "art-ok", oneWith("complete"))[0]
	if !contains(eventTypes(ok.TaskStates["t"]), "Downloading Artifacts") {
		t.Fatalf("events %v", eventTypes(ok.TaskStates["t"]))
	}
	out, _ := os.ReadFile(filepath.Join(e.agent.DataDir(), "alloc", ok.ID, "alloc", "logs", "t.stdout.0"))
	if string(out) != "artifact-ran\n" {
		t.Fatalf("stdout %q", out)
	}
	for id, wantMsg := range map[string]string{
		"art-bad":  "getter subprocess failed: exit status 1",
		"art-hdfs": "getter subprocess failed: exit status 1",
		"art-404":  "getter subprocess failed: exit status 1",
	} {
		al := waitAllocs(t, c, "", id, oneWith("failed"))[0]
		var failed *api.TaskEvent
		for _, ev := range al.TaskStates["t"].Events {
			if ev.Type == "Failed Artifact Download" {
				failed = ev
			}
		}
		if failed == nil || !strings.Contains(failed.DisplayMessage, wantMsg) || !strings.Contains(failed.DownloadError, wantMsg) {
			t.Fatalf("%s: events %v, failed %+v", id, eventTypes(al.TaskStates["t"]), failed)
		}
		if contains(eventTypes(al.TaskStates["t"]), "Started") {
			t.Fatalf("%s started despite failed artifact", id)
		}
		if _, err := os.Stat(filepath.Join(e.agent.DataDir(), "alloc", al.ID, "t", "local", "tool.sh")); err == nil {
			t.Fatalf("%s: artifact left behind", id)
		}
	}
	// A malformed checksum is a bad job spec.
	_, _, err := c.Jobs().Register(mk("art-malformed", "sha256:xyz", srv.URL+"/tool.sh"), nil)
	if statusCode(err) != 500 {
		t.Fatalf("malformed checksum: %v", err)
	}
}

func TestPlacementFailures(t *testing.T) {
	e := startAgent(t, testagent.Config{NodeCPU: 1000, NodeMemoryMB: 1024})
	c := e.client(nil)
	check := func(j *api.Job, verify func(*api.AllocationMetric) bool) {
		t.Helper()
		resp, _, err := c.Jobs().Register(j, nil)
		if err != nil {
			t.Fatal(err)
		}
		ev, _, err := c.Evaluations().Info(resp.EvalID, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := ev.FailedTGAllocs["g"]
		if ev.Status != "complete" || m == nil || !verify(m) || ev.BlockedEval == "" {
			t.Fatalf("eval %+v metric %+v", ev, m)
		}
		bl, _, err := c.Evaluations().Info(ev.BlockedEval, nil)
		if err != nil || bl.Status != "blocked" {
			t.Fatalf("blocked eval %+v %v", bl, err)
		}
		allocs, _, _ := c.Jobs().Allocations(*j.ID, true, nil)
		if len(allocs) != 0 {
			t.Fatalf("allocations created: %v", allocs)
		}
		job, _, _ := c.Jobs().Info(*j.ID, nil)
		if *job.Status != "pending" {
			t.Fatalf("job status %s", *job.Status)
		}
	}
	big := shJob("big-cpu", "service", "sleep 300")
	big.TaskGroups[0].Tasks[0].Resources.CPU = new(2000)
	check(big, func(m *api.AllocationMetric) bool { return m.NodesExhausted == 1 && m.DimensionExhausted["cpu"] == 1 })
	bigMem := shJob("big-mem", "batch", "true")
	bigMem.TaskGroups[0].Tasks[0].Resources.MemoryMB = new(4096)
	bigMem.TaskGroups[0].Count = new(2)
	check(bigMem, func(m *api.AllocationMetric) bool {
		return m.DimensionExhausted["memory"] == 1 && m.CoalescedFailures == 1
	})
	con := shJob("windows-only", "batch", "true")
	con.Constrain(api.NewConstraint("${attr.kernel.name}", "=", "windows"))
	check(con, func(m *api.AllocationMetric) bool {
		return m.NodesFiltered == 1 && m.ConstraintFiltered["${attr.kernel.name} = windows"] == 1
	})
	dc := shJob("other-dc", "batch", "true")
	dc.Datacenters = []string{"dc9"}
	check(dc, func(m *api.AllocationMetric) bool { return m.NodesEvaluated == 0 && m.NodesAvailable["dc9"] == 0 })

	// Satisfiable constraints place.
	okc := shJob("linux", "batch", "true")
	okc.Constrain(api.NewConstraint("${attr.kernel.name}", "=", "linux"))
	okc.Constrain(api.NewConstraint("${node.datacenter}", "!=", "dc2"))
	if _, _, err := c.Jobs().Register(okc, nil); err != nil {
		t.Fatal(err)
	}
	waitAllocs(t, c, "", "linux", oneWith("complete"))

	// A blocked job is placed once capacity frees up.
	fill := shJob("fill", "service", "exec sleep 300")
	fill.TaskGroups[0].Tasks[0].Resources.MemoryMB = new(800)
	if _, _, err := c.Jobs().Register(fill, nil); err != nil {
		t.Fatal(err)
	}
	waitAllocs(t, c, "", "fill", oneWith("running"))
	waiter := shJob("waiter", "batch", "true")
	waiter.TaskGroups[0].Tasks[0].Resources.MemoryMB = new(500)
	resp, _, err := c.Jobs().Register(waiter, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ev, _, _ := c.Evaluations().Info(resp.EvalID, nil); ev.FailedTGAllocs["g"].DimensionExhausted["memory"] != 1 {
		t.Fatalf("waiter eval %+v", ev)
	}
	if _, _, err := c.Jobs().Deregister("fill", false, nil); err != nil {
		t.Fatal(err)
	}
	waitAllocs(t, c, "", "waiter", oneWith("complete"))
}

func TestBlockingQuery(t *testing.T) {
	e := startAgent(t, testagent.Config{})
	c := e.client(nil)
	if _, _, err := c.Jobs().Register(shJob("block", "service", "exec sleep 300"), nil); err != nil {
		t.Fatal(err)
	}
	stubs := waitAllocs(t, c, "", "block", oneWith("running"))
	_, meta, err := c.Jobs().Allocations("block", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing changes: returns after the wait with the same index.
	start := time.Now()
	_, meta2, err := c.Jobs().Allocations("block", false, &api.QueryOptions{WaitIndex: meta.LastIndex, WaitTime: 400 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 350*time.Millisecond || d > 30*time.Second {
		t.Fatalf("timed-out blocking query took %v", d)
	}
	if meta2.LastIndex != meta.LastIndex {
		t.Fatalf("index moved without a change: %d -> %d", meta.LastIndex, meta2.LastIndex)
	}
	// A change wakes the query promptly.
	go func() {
		time.Sleep(200 * time.Millisecond)
		_, _, _ = c.Jobs().Deregister("block", false, nil)
	}()
	start = time.Now()
	allocs, meta3, err := c.Jobs().Allocations("block", false, &api.QueryOptions{WaitIndex: meta.LastIndex, WaitTime: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 30*time.Second { // half the wait: woken, not timed out
		t.Fatalf("blocking query woke after %v", d)
	}
	if meta3.LastIndex <= meta.LastIndex || len(allocs) != 1 {
		t.Fatalf("index %d -> %d, allocs %v", meta.LastIndex, meta3.LastIndex, allocs)
	}
	// Deregister without purge: stopped job, stopped allocation.
	al := waitAllocs(t, c, "", "block", oneWith("complete"))[0]
	if al.ID != stubs[0].ID || al.DesiredStatus != "stop" {
		t.Fatalf("alloc %+v", al)
	}
	job, _, err := c.Jobs().Info("block", nil)
	if err != nil || !*job.Stop || *job.Status != "dead" {
		t.Fatalf("job %+v %v", job, err)
	}
	// Blocking read of a single allocation.
	_, qm, err := c.Allocations().Info(al.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if _, _, err := c.Allocations().Info(al.ID, &api.QueryOptions{WaitIndex: qm.LastIndex, WaitTime: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 250*time.Millisecond {
		t.Fatal("allocation blocking query returned early")
	}
}

func TestDispatch(t *testing.T) {
	e := startAgent(t, testagent.Config{})
	c := e.client(nil)
	j := shJob("tm", "batch", `cat "$NOMAD_TASK_DIR/input.txt"; echo "$NOMAD_META_who $NOMAD_JOB_PARENT_ID"`)
	j.ParameterizedJob = &api.ParameterizedJobConfig{Payload: "optional", MetaRequired: []string{"who"}}
	j.TaskGroups[0].Tasks[0].DispatchPayload = &api.DispatchPayloadConfig{File: "input.txt"}
	resp, _, err := c.Jobs().Register(j, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.EvalID != "" {
		t.Fatalf("parameterized job got eval %s", resp.EvalID)
	}
	if allocs, _, _ := c.Jobs().Allocations("tm", true, nil); len(allocs) != 0 {
		t.Fatalf("parameterized job has allocations %v", allocs)
	}
	_, _, err = c.Jobs().Dispatch("tm", nil, nil, "", nil)
	if statusCode(err) != 500 || !strings.Contains(err.Error(), "required meta keys") {
		t.Fatalf("dispatch without meta: %v", err)
	}
	_, _, err = c.Jobs().Dispatch("tm", map[string]string{"who": "x", "extra": "y"}, nil, "", nil)
	if statusCode(err) != 500 || !strings.Contains(err.Error(), "unpermitted") {
		t.Fatalf("dispatch with extra meta: %v", err)
	}
	d, _, err := c.Jobs().Dispatch("tm", map[string]string{"who": "bob"}, []byte("payload\n"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(d.DispatchedJobID, "tm/dispatch-") || d.EvalID == "" {
		t.Fatalf("dispatch %+v", d)
	}
	al := waitAllocs(t, c, "", d.DispatchedJobID, oneWith("complete"))[0]
	out, _ := os.ReadFile(filepath.Join(e.agent.DataDir(), "alloc", al.ID, "alloc", "logs", "t.stdout.0"))
	if string(out) != "payload\nbob tm\n" {
		t.Fatalf("stdout %q", out)
	}
	child, _, err := c.Jobs().Info(d.DispatchedJobID, nil)
	if err != nil || *child.ParentID != "tm" || !child.Dispatched || *child.Status != "dead" {
		t.Fatalf("child %+v %v", child, err)
	}
	list, _, _ := c.Jobs().PrefixList("tm")
	if len(list) != 2 {
		t.Fatalf("list %v", list)
	}
	plain := shJob("plain", "batch", "true")
	if _, _, err := c.Jobs().Register(plain, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Jobs().Dispatch("plain", nil, nil, "", nil); statusCode(err) != 500 {
		t.Fatalf("dispatch of plain job: %v", err)
	}
}

func TestNamespacesAndACL(t *testing.T) {
	e := startAgent(t, testagent.Config{ACLToken: "s3cret", Namespaces: []string{"team"}})
	anon := e.client(nil)
	_, _, err := anon.Jobs().List(nil)
	if statusCode(err) != 403 || !strings.Contains(err.Error(), "Permission denied") {
		t.Fatalf("anonymous: %v", err)
	}
	wrong := e.client(func(c *api.Config) { c.SecretID = "nope" })
	_, _, err = wrong.Jobs().List(nil)
	if statusCode(err) != 403 || !strings.Contains(err.Error(), "ACL token not found") {
		t.Fatalf("wrong token: %v", err)
	}
	if _, err := anon.Status().Leader(); err != nil {
		t.Fatalf("status/leader needs no token: %v", err)
	}
	team := e.client(func(c *api.Config) { c.SecretID = "s3cret"; c.Namespace = "team" })
	def := e.client(func(c *api.Config) { c.SecretID = "s3cret" })
	j := shJob("nsjob", "batch", `echo "$NOMAD_NAMESPACE"`)
	if _, _, err := team.Jobs().Register(j, nil); err != nil {
		t.Fatal(err)
	}
	al := waitAllocs(t, def, "team", "nsjob", oneWith("complete"))[0]
	if al.Namespace != "team" {
		t.Fatalf("alloc namespace %q", al.Namespace)
	}
	out, _ := os.ReadFile(filepath.Join(e.agent.DataDir(), "alloc", al.ID, "alloc", "logs", "t.stdout.0"))
	if string(out) != "team\n" {
		t.Fatalf("stdout %q", out)
	}
	if _, _, err := def.Jobs().Info("nsjob", nil); statusCode(err) != 404 {
		t.Fatalf("job visible in default namespace: %v", err)
	}
	if list, _, _ := def.Jobs().List(nil); len(list) != 0 {
		t.Fatalf("default list %v", list)
	}
	all, _, err := def.Jobs().List(&api.QueryOptions{Namespace: "*"})
	if err != nil || len(all) != 1 || all[0].Namespace != "team" {
		t.Fatalf("wildcard list %v %v", all, err)
	}
	other := e.client(func(c *api.Config) { c.SecretID = "s3cret"; c.Namespace = "nosuch" })
	if _, _, err := other.Jobs().Register(shJob("x", "batch", "true"), nil); statusCode(err) != 400 {
		t.Fatalf("nonexistent namespace: %v", err)
	}
	if _, err := def.Namespaces().Register(&api.Namespace{Name: "nosuch"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := other.Jobs().Register(shJob("x", "batch", "true"), nil); err != nil {
		t.Fatalf("after creating namespace: %v", err)
	}
	if _, _, err := def.Jobs().List(&api.QueryOptions{Region: "elsewhere"}); err == nil {
		t.Fatal("unknown region accepted")
	}
}

func TestEventStream(t *testing.T) {
	e := startAgent(t, testagent.Config{})
	c := e.client(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := c.EventStream().Stream(ctx, map[api.Topic][]string{api.TopicAllocation: {"*"}}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Jobs().Register(shJob("ev", "batch", "true"), nil); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(time.Minute)
	for {
		select {
		case evs := <-ch:
			if evs.Err != nil {
				t.Fatal(evs.Err)
			}
			for _, ev := range evs.Events {
				al, err := ev.Allocation()
				if err != nil {
					t.Fatal(err)
				}
				if al != nil && al.JobID == "ev" && al.ClientStatus == "complete" {
					cancel()
					for range ch {
					}
					return
				}
			}
		case <-timeout:
			t.Fatal("no complete allocation event")
		}
	}
}

// TestCloseKillsProcesses checks Close kills what the agent started.
func TestCloseKillsProcesses(t *testing.T) {
	e := startAgent(t, testagent.Config{})
	c := e.client(nil)
	if _, _, err := c.Jobs().Register(shJob("long", "service", `echo $$ > "$NOMAD_TASK_DIR/pid"; exec sleep 300`), nil); err != nil {
		t.Fatal(err)
	}
	al := waitAllocs(t, c, "", "long", oneWith("running"))[0]
	pid, _ := strconv.Atoi(strings.TrimSpace(readFileWait(t, filepath.Join(e.agent.DataDir(), "alloc", al.ID, "t", "local", "pid"))))
	e.tr.CloseIdleConnections()
	if err := e.agent.Close(); err != nil {
		t.Fatal(err)
	}
	if pidAlive(pid) {
		t.Fatalf("pid %d alive after Close", pid)
	}
}

var _ = bufio.NewReader
var _ = io.EOF
var _ = fmt.Sprint

// A service task that exits 0 is restarted per policy (only batch tasks
// complete on exit 0), and fails once the attempts are used up.
func TestServiceExitZeroRestarts(t *testing.T) {
	e := startAgent(t, testagent.Config{})
	c := e.client(nil)
	j := shJob("svc0", "service", "exit 0")
	j.TaskGroups[0].RestartPolicy = &api.RestartPolicy{Attempts: new(2), Interval: new(time.Hour),
		Delay: new(20 * time.Millisecond), Mode: new("fail")}
	if _, _, err := c.Jobs().Register(j, nil); err != nil {
		t.Fatal(err)
	}
	al := waitAllocs(t, c, "", "svc0", oneWith("failed"))[0]
	if ts := al.TaskStates["t"]; ts.Restarts != 2 || !ts.Failed {
		t.Fatalf("task state %+v", ts)
	}
}
