package nomad_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/gofl/gofl/internal/clustertest"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/jobmanager"
	"github.com/gofl/gofl/providers"
	"github.com/gofl/gofl/providers/nomad"
	"github.com/gofl/gofl/providers/nomad/nomadtest"
	"github.com/gofl/gofl/providers/nomad/testagent"
	"github.com/gofl/gofl/rpc/restapi"
)

var goflBinary string

// TestMain builds cmd/gofl with this provider linked in: an overlay adds a
// file with the blank import to package main, so the deployed JobManager
// finds deployment.provider=nomad whether or not cmd/gofl imports it yet.
func TestMain(m *testing.M) {
	clustertest.Main(m, "../../cmd/gofl", &goflBinary, func(dir string) []string {
		mainDir, err := filepath.Abs("../../cmd/gofl")
		if err != nil {
			panic(err)
		}
		imp := filepath.Join(dir, "zz_nomad_provider.go")
		if err := os.WriteFile(imp, []byte("package main\n\nimport _ \"github.com/gofl/gofl/providers/nomad\"\n"), 0o644); err != nil {
			panic(err)
		}
		overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(mainDir, "zz_nomad_provider_test_overlay.go"): imp}})
		overlayFile := filepath.Join(dir, "overlay.json")
		if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
			panic(err)
		}
		return []string{"-overlay", overlayFile}
	})
}

func testLog(t *testing.T) zerolog.Logger { return zerolog.New(zerolog.NewTestWriter(t)) }

// startAgent starts a test agent on a free port; it is closed (every
// process it started killed) when the test ends.
func startAgent(t *testing.T, cfg testagent.Config) *testagent.Agent {
	t.Helper()
	cfg.Addr = "127.0.0.1:0"
	a, err := testagent.New(cfg, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// agentT is the Nomad agent a test runs against: a test agent of its own
// or the real one in NOMAD_ADDR (shared, so cluster IDs get a suffix).
type agentT struct {
	url  string
	real bool
	ta   *testagent.Agent // nil for the real agent
}

// URL is the agent's HTTP address.
func (a agentT) URL() string { return a.url }

// id returns a cluster ID unique to this test process on the real agent.
func (a agentT) id(base string) string {
	// Unique per test process: other packages' tests (the local
	// provider's "session-1") run at the same time, and processes are
	// found by their cluster ID.
	if !a.real {
		return base + "-t" + strconv.Itoa(os.Getpid())
	}
	return base + "-r" + strconv.Itoa(os.Getpid())
}

// forAgents runs f as subtest "testagent" (a test agent started with cfg)
// and "nomad" (the real agent: nomadtest.RealAgent skips or, under CI,
// fails when there is none). One suite, two agents.
func forAgents(t *testing.T, cfg testagent.Config, f func(t *testing.T, a agentT)) {
	t.Run("testagent", func(t *testing.T) {
		ta := startAgent(t, cfg)
		f(t, agentT{url: ta.URL(), ta: ta})
	})
	t.Run("nomad", func(t *testing.T) {
		f(t, agentT{url: nomadtest.RealAgent(t), real: true})
	})
}

// realAgent returns the real agent (or skips/fails as nomadtest does).
func realAgent(t *testing.T) agentT { return agentT{url: nomadtest.RealAgent(t), real: true} }

// testAgent starts a test agent.
func testAgent(t *testing.T, cfg testagent.Config) agentT {
	ta := startAgent(t, cfg)
	return agentT{url: ta.URL(), ta: ta}
}

type urler interface{ URL() string }

func apiClient(t *testing.T, a urler, token string) *api.Client {
	t.Helper()
	c, err := api.NewClient(&api.Config{Address: a.URL(), SecretID: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// goflJobs lists the IDs of the jobs the provider registered for the
// cluster.
func goflJobs(t *testing.T, c *api.Client, clusterID string) []string {
	t.Helper()
	jobs, _, err := c.Jobs().PrefixList("gofl-" + clusterID + "-")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	slices.Sort(ids)
	return ids
}

func options(a urler) nomad.Options {
	return nomad.Options{
		Address: a.URL(), BinaryPath: goflBinary, KillTimeout: 5 * time.Second,
		JobManagerCPU: 200, JobManagerMemoryMB: 256, TaskManagerCPU: 200, TaskManagerMemoryMB: 256,
	}
}

func newDeployer(t *testing.T, o nomad.Options) *nomad.Deployer {
	t.Helper()
	d, err := nomad.NewDeployer(o, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

func ctxT(t *testing.T, d time.Duration) context.Context { return clustertest.Ctx(t, d) }

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	clustertest.Eventually(t, timeout, what, cond)
}

func getJSON(url string, v any) bool { return clustertest.GetJSON(url, v) }

func taskManagers(rest string) []restapi.TaskManagerInfo { return clustertest.TaskManagers(rest) }

func taskManagerIDs(rest string) []string { return clustertest.TaskManagerIDs(rest) }

// processesOf lists live processes started for the cluster (their
// environment has GOFL_CLUSTER_ID=id) whose command line contains all of
// match, zombies excluded.
func processesOf(t *testing.T, clusterID string, match ...string) []int {
	t.Helper()
	out, err := clustertest.ClusterProcesses(clusterID, match...)
	if err != nil {
		t.Skip(err)
	}
	return out
}

func fastCluster() map[string]string {
	c := clustertest.FastCluster()
	// These tests deploy without the client, which would stage a
	// per-cluster CA: the bind rule needs the override.
	c["security.insecure"] = "true"
	return c
}

// TestSessionCluster deploys a session cluster whose JobManager starts its
// TaskManager through the nomad worker driver, replaces a SIGKILLed
// TaskManager at once, and is killed without leftovers.
func TestSessionCluster(t *testing.T) {
	forAgents(t, testagent.Config{}, testSessionCluster)
}

func testSessionCluster(t *testing.T, a agentT) {
	nc := apiClient(t, a, "")
	d := newDeployer(t, options(a))
	id := a.id("session-1")
	jmJob, tmJob := nomad.JobManagerJobID(id), func(n string) string { return nomad.TaskManagerJobID(id, "taskmanager-"+n) }
	cfg := fastCluster()
	// A value with ${...} Nomad does not know reaches the JobManager as
	// it is (a real agent fails the task on an unknown variable).
	const passThrough = "file:///tmp/${meta.gofl.cluster-id}/$${x}/${foo}"
	cfg["state.savepoints.dir"] = passThrough
	info, err := d.Deploy(ctxT(t, 2*time.Minute), providers.ClusterSpec{
		ClusterID: id, Mode: providers.ModeSession, Config: cfg, TaskManagers: 1,
		Artifacts: []string{"file:///staging/.gofl/" + id + "/gofl.yaml"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if jms := processesOf(t, id, "\x00jobmanager\x00"); len(jms) != 1 {
		t.Errorf("JobManager processes: %v", jms)
	} else if cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(jms[0]), "cmdline")); !bytes.Contains(cmdline, []byte("\x00state.savepoints.dir="+passThrough+"\x00")) {
		t.Errorf("the JobManager's command line lacks %q: %q", passThrough, cmdline)
	}
	t.Cleanup(func() { _ = d.Kill(context.Background(), id) })
	if info.Status != providers.StatusRunning || info.RESTAddress == "" || info.RPCAddress == "" || info.Provider != "nomad" ||
		info.Mode != providers.ModeSession || info.Details["job_id"] != jmJob {
		t.Fatalf("Deploy = %+v", info)
	}
	var overview restapi.ClusterOverview
	if !getJSON("http://"+info.RESTAddress+"/overview", &overview) {
		t.Fatal("GET /overview failed after Deploy returned")
	}
	job, _, err := nc.Jobs().Info(jmJob, nil)
	if err != nil || *job.Type != "service" || job.Meta["gofl.cluster-id"] != id {
		t.Fatalf("JobManager job: %+v, %v", job, err)
	}

	// The initial TaskManager, started by the JobManager's active
	// ResourceManager through the nomad worker driver.
	eventually(t, time.Minute, "taskmanager-1 registers", func() bool {
		return slices.Equal(taskManagerIDs(info.RESTAddress), []string{"taskmanager-1"})
	})
	if got := goflJobs(t, nc, id); !slices.Equal(got, []string{jmJob, tmJob("1")}) {
		t.Fatalf("jobs = %v", got)
	}

	// Retrieve and List from another client.
	other := newDeployer(t, options(a))
	got, err := other.Retrieve(ctxT(t, time.Minute), id)
	if err != nil || got.RESTAddress != info.RESTAddress || got.Status != providers.StatusRunning || got.Details["alloc_id"] != info.Details["alloc_id"] {
		t.Fatalf("Retrieve = %+v, %v; want %+v", got, err, info)
	}
	list, err := other.List(ctxT(t, time.Minute))
	if err != nil || len(list) != 1 || list[0].ClusterID != id || list[0].RESTAddress != info.RESTAddress {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if _, err := other.Retrieve(ctxT(t, time.Minute), "nope"); !errors.Is(err, providers.ErrClusterNotFound) {
		t.Fatalf("Retrieve(unknown) = %v", err)
	}
	if _, err := other.Deploy(ctxT(t, time.Minute), providers.ClusterSpec{ClusterID: id, Mode: providers.ModeSession, Config: insecure()}); !errors.Is(err, providers.ErrClusterExists) {
		t.Fatalf("second Deploy of %s: %v", id, err)
	}
	if got, err := other.Retrieve(ctxT(t, time.Minute), id); err != nil || got.Status != providers.StatusRunning {
		t.Fatalf("after a refused Deploy: %+v, %v", got, err)
	}

	// SIGKILL the TaskManager: the allocation fails, the ResourceManager
	// hears it at once (the heartbeat timeout is five minutes) and asks for a
	// replacement.
	tms := processesOf(t, id, "taskmanager.resource-id=taskmanager-1")
	if len(tms) != 1 {
		t.Fatalf("TaskManager processes: %v", tms)
	}
	if err := syscall.Kill(tms[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Within a minute: well before the heartbeat timeout (five), however
	// loaded the machine.
	eventually(t, time.Minute, "taskmanager-1 is unregistered", func() bool {
		return !slices.Contains(taskManagerIDs(info.RESTAddress), "taskmanager-1")
	})
	eventually(t, time.Minute, "a replacement TaskManager registers", func() bool {
		return slices.Equal(taskManagerIDs(info.RESTAddress), []string{"taskmanager-2"})
	})
	eventually(t, time.Minute, "the failed TaskManager's job is purged", func() bool {
		return slices.Equal(goflJobs(t, nc, id), []string{jmJob, tmJob("2")})
	})

	pids := processesOf(t, id)
	if len(pids) < 2 {
		t.Fatalf("processes of %s: %v, want the JobManager and a TaskManager", id, pids)
	}
	if err := other.Kill(ctxT(t, time.Minute), id); err != nil {
		t.Fatal(err)
	}
	if left := processesOf(t, id); len(left) != 0 {
		out, _ := exec.Command("ps", "-o", "pid,ppid,stat,args", "-p", fmt.Sprint(left[0])).CombinedOutput()
		t.Fatalf("processes left after Kill: %v (were %v): %s", left, pids, out)
	}
	if jobs := goflJobs(t, nc, id); len(jobs) != 0 {
		t.Fatalf("jobs left after Kill: %v", jobs)
	}
	if err := d.Kill(ctxT(t, time.Minute), id); !errors.Is(err, providers.ErrClusterNotFound) {
		t.Fatalf("second Kill: %v", err)
	}
	if _, err := d.Retrieve(ctxT(t, time.Minute), id); !errors.Is(err, providers.ErrClusterNotFound) {
		t.Fatalf("Retrieve after Kill: %v", err)
	}
	if list, err := d.List(ctxT(t, time.Minute)); err != nil || len(list) != 0 {
		t.Fatalf("List after Kill = %+v, %v", list, err)
	}
}

// startJobManager runs a standalone JobManager in this process and
// returns the configuration a nomad worker driver of cluster id uses.
func startJobManager(t *testing.T, a urler, id string) (*jobmanager.JobManager, *conf.Configuration) {
	t.Helper()
	c, err := conf.FromMap(map[string]string{
		"jobmanager.rpc.port": "0", "rest.port": "0", "jobmanager.rpc.address": "127.0.0.1", "rest.address": "127.0.0.1",
		"heartbeat.interval": "200ms", "heartbeat.timeout": "5 min", "deployment.cluster-id": id,
		"provider.nomad.address": a.URL(), "provider.nomad.binary.path": goflBinary, "provider.nomad.kill-timeout": "5s",
		"provider.nomad.taskmanager.cpu": "200", "provider.nomad.taskmanager.memory": "256m",
		"security.insecure": "true",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	jm, err := jobmanager.Start(ctx, c, testLog(t).Level(zerolog.InfoLevel))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := jm.Stop(); err != nil {
			t.Error(err)
		}
	})
	return jm, c
}

type recorder struct {
	mu         sync.Mutex
	events     []providers.WorkerEvent
	started    chan providers.WorkerStarted
	terminated chan providers.WorkerTerminated
}

func newRecorder() *recorder {
	return &recorder{started: make(chan providers.WorkerStarted, 16), terminated: make(chan providers.WorkerTerminated, 16)}
}

func (r *recorder) handle(ev providers.WorkerEvent) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
	switch e := ev.(type) {
	case providers.WorkerStarted:
		r.started <- e
	case providers.WorkerTerminated:
		r.terminated <- e
	}
}

// TestWorkerDriver runs the worker half for a JobManager in this process:
// a requested TaskManager registers, its SIGKILL is reported at once,
// release and Close purge.
func TestWorkerDriver(t *testing.T) {
	forAgents(t, testagent.Config{}, testWorkerDriver)
}

func testWorkerDriver(t *testing.T, a agentT) {
	nc := apiClient(t, a, "")
	cid := a.id("drv")
	jm, c := startJobManager(t, a, cid)
	drv, err := nomad.NewWorkerDriver(providers.DriverContext{Config: c, JobManagerRPCAddress: jm.RPCAddress, Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.Close(context.Background()) })
	rec := newRecorder()
	if err := drv.Start(rec.handle); err != nil {
		t.Fatal(err)
	}
	id, err := drv.RequestWorker(ctxT(t, time.Minute), providers.WorkerSpec{Slots: 3})
	if err != nil {
		t.Fatal(err)
	}
	if id != "taskmanager-1" {
		t.Fatalf("worker ID %s", id)
	}
	job, _, err := nc.Jobs().Info(nomad.TaskManagerJobID(cid, "taskmanager-1"), nil)
	if err != nil || *job.Type != "service" || job.Meta["gofl.worker-id"] != id || *job.TaskGroups[0].RestartPolicy.Attempts != 0 ||
		*job.TaskGroups[0].ReschedulePolicy.Attempts != 0 || *job.TaskGroups[0].Tasks[0].Resources.MemoryMB != 256 {
		t.Fatalf("TaskManager job: %+v, %v", job, err)
	}
	select {
	case e := <-rec.started:
		if e.WorkerID != id {
			t.Fatalf("WorkerStarted = %+v", e)
		}
	case <-time.After(time.Minute):
		t.Fatal("no WorkerStarted")
	}
	eventually(t, time.Minute, "the worker registers with 3 slots", func() bool {
		tms := taskManagers(jm.RESTAddress)
		return len(tms) == 1 && tms[0].ID == id && tms[0].SlotsNumber == 3
	})

	pids := processesOf(t, cid, "taskmanager.resource-id="+id)
	if len(pids) != 1 {
		t.Fatalf("TaskManager processes: %v", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-rec.terminated:
		if e.WorkerID != id || e.Released || e.ExitStatus != -1 || !strings.Contains(e.Cause.Error(), "signal 9") {
			t.Errorf("WorkerTerminated = %+v", e)
		}
	case <-time.After(30 * time.Second): // prompt: the driver watches the allocation
		t.Fatal("no WorkerTerminated within 30 s of SIGKILL")
	}
	eventually(t, time.Minute, "the failed worker's job is purged", func() bool { return len(goflJobs(t, nc, cid)) == 0 })

	// Release: a second worker ends with Released set; its job is purged.
	id2, err := drv.RequestWorker(ctxT(t, time.Minute), providers.WorkerSpec{Slots: 1, CPU: 0.25, Memory: 300 * conf.Mebibyte})
	if err != nil {
		t.Fatal(err)
	}
	if id2 != "taskmanager-2" {
		t.Fatalf("second worker ID %s", id2)
	}
	job, _, err = nc.Jobs().Info(nomad.TaskManagerJobID(cid, "taskmanager-2"), nil)
	if err != nil || *job.TaskGroups[0].Tasks[0].Resources.CPU != 250 || *job.TaskGroups[0].Tasks[0].Resources.MemoryMB != 300 {
		t.Fatalf("TaskManager job resources: %+v, %v", job.TaskGroups[0].Tasks[0].Resources, err)
	}
	// (The in-process JobManager is standalone: taskmanager-1 stays listed
	// until its heartbeat times out.)
	eventually(t, time.Minute, "the second worker registers", func() bool { return slices.Contains(taskManagerIDs(jm.RESTAddress), id2) })
	if err := drv.ReleaseWorker(ctxT(t, time.Minute), id2); err != nil {
		t.Fatal(err)
	}
	if jobs := goflJobs(t, nc, cid); len(jobs) != 0 {
		t.Fatalf("jobs after release: %v", jobs)
	}
	select {
	case e := <-rec.terminated:
		if e.WorkerID != id2 || !e.Released {
			t.Errorf("WorkerTerminated = %+v", e)
		}
	case <-time.After(time.Minute):
		t.Fatal("released worker did not end")
	}
	// It registered, so it started: a WorkerStarted precedes the end even
	// when the allocation was already over when the driver first saw it
	// (register to running takes up to a second on a real agent).
	rec.mu.Lock()
	sawStart := slices.ContainsFunc(rec.events, func(e providers.WorkerEvent) bool {
		s, ok := e.(providers.WorkerStarted)
		return ok && s.WorkerID == id2
	})
	rec.mu.Unlock()
	if !sawStart {
		t.Errorf("no WorkerStarted for %s, which registered: %+v", id2, rec.events)
	}
	if left := processesOf(t, cid, "resource-id="+id2); len(left) != 0 {
		t.Fatalf("released worker still runs: %v", left)
	}
	if err := drv.ReleaseWorker(ctxT(t, time.Minute), id2); err != nil {
		t.Errorf("releasing an ended worker again: %v", err)
	}
	if err := drv.ReleaseWorker(ctxT(t, time.Minute), "taskmanager-99"); !errors.Is(err, providers.ErrWorkerNotFound) {
		t.Errorf("releasing an unknown worker: %v", err)
	}

	// Close stops the rest and reports nothing more.
	if _, err := drv.RequestWorker(ctxT(t, time.Minute), providers.WorkerSpec{Slots: 1}); err != nil {
		t.Fatal(err)
	}
	if err := drv.Close(ctxT(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	if left := processesOf(t, cid); len(left) != 0 {
		t.Fatalf("processes left after Close: %v", left)
	}
	if jobs := goflJobs(t, nc, cid); len(jobs) != 0 {
		t.Fatalf("jobs left after Close: %v", jobs)
	}
	if _, err := drv.RequestWorker(ctxT(t, time.Minute), providers.WorkerSpec{Slots: 1}); !errors.Is(err, providers.ErrClosed) {
		t.Fatalf("RequestWorker after Close: %v", err)
	}
	rec.mu.Lock()
	n := len(rec.events)
	rec.mu.Unlock()
	if n != 4 && n != 5 { // started 1, terminated 1, started 2, terminated 2, maybe started 3
		t.Errorf("%d events: %+v", n, rec.events)
	}
}

func TestUnreachable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + lis.Addr().String()
	lis.Close()
	d := newDeployer(t, nomad.Options{Address: addr, BinaryPath: goflBinary})
	start := time.Now()
	_, err = d.Deploy(ctxT(t, time.Minute), providers.ClusterSpec{ClusterID: "x", Mode: providers.ModeSession, Config: insecure()})
	if !errors.Is(err, nomad.ErrUnreachable) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Deploy against a closed port: %v", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("took %s", took)
	}
	for name, f := range map[string]func() error{
		"List":     func() error { _, err := d.List(ctxT(t, time.Minute)); return err },
		"Retrieve": func() error { _, err := d.Retrieve(ctxT(t, time.Minute), "x"); return err },
		"Kill":     func() error { return d.Kill(ctxT(t, time.Minute), "x") },
	} {
		if err := f(); !errors.Is(err, nomad.ErrUnreachable) || !strings.Contains(err.Error(), addr) {
			t.Errorf("%s: %v", name, err)
		}
	}
	c, _ := conf.FromMap(map[string]string{"provider.nomad.address": addr, "provider.nomad.binary.path": goflBinary, "deployment.cluster-id": "x", "security.insecure": "true"})
	drv, err := nomad.NewWorkerDriver(providers.DriverContext{Config: c, JobManagerRPCAddress: "127.0.0.1:1", Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	_ = drv.Start(func(providers.WorkerEvent) {})
	if _, err := drv.RequestWorker(ctxT(t, time.Minute), providers.WorkerSpec{Slots: 1}); !errors.Is(err, nomad.ErrUnreachable) {
		t.Errorf("RequestWorker: %v", err)
	}
	if err := drv.Close(ctxT(t, time.Minute)); err != nil {
		t.Error(err)
	}
}

func TestACLDenied(t *testing.T) {
	a := startAgent(t, testagent.Config{ACLToken: "s3cret-token"})
	d := newDeployer(t, options(a))
	_, err := d.Deploy(ctxT(t, time.Minute), providers.ClusterSpec{ClusterID: "acl", Mode: providers.ModeSession, Config: insecure()})
	if !errors.Is(err, nomad.ErrPermissionDenied) || !strings.Contains(err.Error(), "token") {
		t.Fatalf("Deploy without a token: %v", err)
	}
	o := options(a)
	o.Token = "wrong"
	if _, err := newDeployer(t, o).List(ctxT(t, time.Minute)); !errors.Is(err, nomad.ErrPermissionDenied) || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("List with a wrong token: %v", err)
	}
}

// TestPlacementFailures: what the node cannot run fails Deploy with the
// reason and leaves no job behind.
func TestPlacementFailures(t *testing.T) {
	forAgents(t, testagent.Config{NodeMemoryMB: 2048}, testPlacementFailures)
}

func testPlacementFailures(t *testing.T, a agentT) {
	nc := apiClient(t, a, "")
	big, wbig := a.id("big"), a.id("wbig")
	for _, tc := range []struct {
		name string
		edit func(*nomad.Options)
		want string
	}{
		{"memory", func(o *nomad.Options) { o.JobManagerMemoryMB = 100000 }, "memory exhausted"},
		{"constraint", func(o *nomad.Options) {
			o.Constraints, _ = nomad.ParseConstraints("attr.kernel.name = windows")
		}, "attr.kernel.name"},
		{"datacenter", func(o *nomad.Options) { o.Datacenters = []string{"mars"} }, "mars"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options(a)
			tc.edit(&o)
			start := time.Now()
			_, err := newDeployer(t, o).Deploy(ctxT(t, time.Minute), providers.ClusterSpec{ClusterID: big, Mode: providers.ModePerJob, Config: insecure()})
			if !errors.Is(err, nomad.ErrPlacement) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Deploy: %v", err)
			}
			t.Log(err)
			if took := time.Since(start); took > 30*time.Second {
				t.Errorf("took %s", took)
			}
			if jobs := goflJobs(t, nc, big); len(jobs) != 0 {
				t.Fatalf("jobs left: %v", jobs)
			}
		})
	}
	// The worker half too.
	jm, c := startJobManager(t, a, wbig)
	drv, err := nomad.NewWorkerDriver(providers.DriverContext{Config: c, JobManagerRPCAddress: jm.RPCAddress, Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	_ = drv.Start(rec.handle)
	if _, err := drv.RequestWorker(ctxT(t, time.Minute), providers.WorkerSpec{Slots: 1, Memory: 64 * conf.Gibibyte}); !errors.Is(err, nomad.ErrPlacement) || !strings.Contains(err.Error(), "memory") {
		t.Fatalf("RequestWorker: %v", err)
	}
	if jobs := goflJobs(t, nc, wbig); len(jobs) != 0 {
		t.Fatalf("jobs left: %v", jobs)
	}
	if err := drv.Close(ctxT(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	if len(rec.events) != 0 {
		t.Fatalf("events for a worker that never existed: %+v", rec.events)
	}
}

// serveBinary serves the gofl binary over HTTP and returns its URL and
// sha256.
func serveBinary(t *testing.T) (string, string) {
	t.Helper()
	b, err := os.ReadFile(goflBinary)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/webhdfs/v1/gofl/bin/gofl" || r.URL.Query().Get("op") != "OPEN" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/webhdfs/v1/gofl/bin/gofl?op=OPEN", hex.EncodeToString(sum[:])
}

// TestArtifactBinary deploys with the binary fetched through an artifact
// stanza with a checksum (a WebHDFS-style URL); the JobManager's
// TaskManagers fetch it too. A wrong checksum fails Deploy, leaving nothing.
func TestArtifactBinary(t *testing.T) {
	forAgents(t, testagent.Config{}, testArtifactBinary)
}

func testArtifactBinary(t *testing.T, a agentT) {
	nc := apiClient(t, a, "")
	badsum := a.id("badsum")
	url, sum := serveBinary(t)

	bad := options(a)
	bad.BinaryPath, bad.BinaryURL, bad.BinarySHA256 = "", url, strings.Repeat("0", 64)
	start := time.Now()
	_, err := newDeployer(t, bad).Deploy(ctxT(t, time.Minute), providers.ClusterSpec{ClusterID: badsum, Mode: providers.ModeSession, Config: insecure()})
	if !errors.Is(err, nomad.ErrTaskFailed) || !strings.Contains(err.Error(), "Failed Artifact Download") ||
		!strings.Contains(err.Error(), "provider.nomad.binary.sha256") {
		t.Fatalf("Deploy with a wrong checksum: %v", err)
	}
	t.Log(err)
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("took %s", took)
	}
	if jobs := goflJobs(t, nc, badsum); len(jobs) != 0 {
		t.Fatalf("jobs left: %v", jobs)
	}
	if left := processesOf(t, badsum); len(left) != 0 {
		t.Fatalf("processes left: %v", left)
	}

	o := options(a)
	o.BinaryPath, o.BinaryURL, o.BinarySHA256 = "", url, sum
	d := newDeployer(t, o)
	id := a.id("fetched")
	// Binary is the client's own path, as gofl run passes it: the configured
	// URL still wins, for the JobManager too (bug 6).
	info, err := d.Deploy(ctxT(t, 2*time.Minute), providers.ClusterSpec{ClusterID: id, Mode: providers.ModePerJob, Config: fastCluster(), TaskManagers: 1, Binary: goflBinary})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Kill(context.Background(), id) })
	job, _, err := nc.Jobs().Info(nomad.JobManagerJobID(id), nil)
	if err != nil || *job.Type != "batch" || len(job.TaskGroups[0].Tasks[0].Artifacts) != 1 {
		t.Fatalf("JobManager job: %+v, %v", job, err)
	}
	eventually(t, time.Minute, "the fetched TaskManager registers", func() bool {
		return slices.Equal(taskManagerIDs(info.RESTAddress), []string{"taskmanager-1"})
	})
	if err := d.Kill(ctxT(t, time.Minute), id); err != nil {
		t.Fatal(err)
	}
	if left := processesOf(t, id); len(left) != 0 {
		out, _ := exec.Command("ps", "-o", "pid,ppid,stat,args", "-p", fmt.Sprint(left[0])).CombinedOutput()
		t.Fatalf("processes left after Kill: %v: %s", left, out)
	}
	if jobs := goflJobs(t, nc, id); len(jobs) != 0 {
		t.Fatalf("jobs left: %v", jobs)
	}
}

func TestOptionsFromConfig(t *testing.T) {
	t.Setenv("NOMAD_ADDR", "http://nomad.example:4646")
	t.Setenv("NOMAD_TOKEN", "from-env")
	c, err := conf.FromMap(map[string]string{
		"provider.nomad.datacenters": "dc1, dc2", "provider.nomad.constraints": "${attr.kernel.name} = linux; meta.rack != r1",
		"provider.nomad.taskmanager.memory": "2g", "provider.nomad.driver": "exec",
	})
	if err != nil {
		t.Fatal(err)
	}
	o, err := nomad.OptionsFromConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	if o.Address != "http://nomad.example:4646" || o.Token != "from-env" || !slices.Equal(o.Datacenters, []string{"dc1", "dc2"}) ||
		o.TaskManagerMemoryMB != 2048 || o.Driver != "exec" || len(o.Constraints) != 2 ||
		o.Constraints[1].LTarget != "${meta.rack}" || o.Constraints[1].Operand != "!=" || o.Constraints[1].RTarget != "r1" {
		t.Fatalf("options = %+v", o)
	}
	if got := nomad.FormatConstraints(o.Constraints); got != "attr.kernel.name = linux; meta.rack != r1" {
		t.Fatalf("FormatConstraints = %q", got)
	}
	// Per-role constraints and the node pool.
	c, _ = conf.FromMap(map[string]string{"provider.nomad.node-pool": "all",
		"provider.nomad.jobmanager.constraints": "node.class != gofl-second", "provider.nomad.taskmanager.constraints": "node.class = gofl-second"})
	if o, err = nomad.OptionsFromConfig(c); err != nil || o.NodePool != "all" ||
		nomad.FormatConstraints(o.JobManagerConstraints) != "node.class != gofl-second" || nomad.FormatConstraints(o.TaskManagerConstraints) != "node.class = gofl-second" {
		t.Fatalf("options = %+v, %v", o, err)
	}
	c, _ = conf.FromMap(map[string]string{"provider.nomad.taskmanager.constraints": "x"})
	if _, err := nomad.OptionsFromConfig(c); err == nil || !strings.Contains(err.Error(), "provider.nomad.taskmanager.constraints") {
		t.Fatalf("a bad TaskManager constraint: %v", err)
	}
	c, _ = conf.FromMap(map[string]string{"provider.nomad.binary.url": "hdfs://nn/gofl"})
	if _, err := nomad.OptionsFromConfig(c); err == nil || !strings.Contains(err.Error(), "WebHDFS") {
		t.Fatalf("hdfs URL: %v", err)
	}
	if _, err := providers.Lookup("nomad"); err != nil {
		t.Fatal(err)
	}
}

// TestACLToken: with the token, a deployed JobManager's worker driver
// reaches the agent through NOMAD_TOKEN in its task environment (the token
// is on no command line).
func TestACLToken(t *testing.T) {
	const token = "s3cret-token"
	a := startAgent(t, testagent.Config{ACLToken: token})
	nc := apiClient(t, a, token)
	o := options(a)
	o.Token = token
	d := newDeployer(t, o)
	const id = "acl-ok"
	info, err := d.Deploy(ctxT(t, 2*time.Minute), providers.ClusterSpec{ClusterID: id, Mode: providers.ModeSession, Config: fastCluster(), TaskManagers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Kill(context.Background(), id) })
	eventually(t, time.Minute, "the TaskManager registers", func() bool {
		return slices.Equal(taskManagerIDs(info.RESTAddress), []string{"taskmanager-1"})
	})
	for _, pid := range processesOf(t, id) {
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if bytes.Contains(cmdline, []byte(token)) {
			t.Fatalf("the token is on the command line of %d: %q", pid, cmdline)
		}
	}
	job, _, err := nc.Jobs().Info(nomad.JobManagerJobID(id), nil)
	if err != nil {
		t.Fatal(err)
	}
	if args := fmt.Sprint(job.TaskGroups[0].Tasks[0].Config["args"]); strings.Contains(args, token) {
		t.Fatalf("the token is in the job's args: %s", args)
	}
	if err := d.Kill(ctxT(t, time.Minute), id); err != nil {
		t.Fatal(err)
	}
	if jobs := goflJobs(t, nc, id); len(jobs) != 0 {
		t.Fatalf("jobs left: %v", jobs)
	}
}

// TestEndedClusterIsCleaned: a per-job cluster whose JobManager died is
// reported terminated, and List purges it with its TaskManagers.
func TestEndedClusterIsCleaned(t *testing.T) {
	forAgents(t, testagent.Config{}, testEndedClusterIsCleaned)
}

func testEndedClusterIsCleaned(t *testing.T, a agentT) {
	nc := apiClient(t, a, "")
	d := newDeployer(t, options(a))
	id := a.id("ended")
	info, err := d.Deploy(ctxT(t, 2*time.Minute), providers.ClusterSpec{ClusterID: id, Mode: providers.ModePerJob, Config: fastCluster(), TaskManagers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Kill(context.Background(), id) })
	eventually(t, time.Minute, "a TaskManager registers", func() bool { return len(taskManagerIDs(info.RESTAddress)) == 1 })
	jms := processesOf(t, id, "\x00jobmanager\x00")
	if len(jms) != 1 {
		t.Fatalf("JobManager processes: %v", jms)
	}
	if err := syscall.Kill(jms[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the cluster is reported terminated", func() bool {
		got, err := d.Retrieve(context.Background(), id)
		return err == nil && got.Status == providers.StatusTerminated
	})
	if list, err := d.List(ctxT(t, time.Minute)); err != nil || len(list) != 0 {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if jobs := goflJobs(t, nc, id); len(jobs) != 0 {
		t.Fatalf("jobs left: %v", jobs)
	}
	if left := processesOf(t, id); len(left) != 0 {
		t.Fatalf("processes left: %v", left)
	}
	// The ID is free again.
	if _, err := d.Retrieve(ctxT(t, time.Minute), id); !errors.Is(err, providers.ErrClusterNotFound) {
		t.Fatalf("Retrieve after cleaning: %v", err)
	}
}

// TestDeployDeadline: a deadline before the JobManager serves rolls back.
func TestDeployDeadline(t *testing.T) {
	forAgents(t, testagent.Config{}, testDeployDeadline)
}

func testDeployDeadline(t *testing.T, a agentT) {
	nc := apiClient(t, a, "")
	d := newDeployer(t, options(a))
	late := a.id("late")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := d.Deploy(ctx, providers.ClusterSpec{ClusterID: late, Mode: providers.ModeSession, Config: fastCluster()}); err == nil {
		t.Fatal("Deploy with an expired deadline succeeded")
	}
	if jobs := goflJobs(t, nc, late); len(jobs) != 0 {
		t.Fatalf("jobs left: %v", jobs)
	}
	if left := processesOf(t, late); len(left) != 0 {
		t.Fatalf("processes left: %v", left)
	}
}

// TestWorkerAllocStop: `nomad alloc stop` of a TaskManager's allocation
// ends the worker (reported once, not released) and no replacement
// allocation ever runs a second TaskManager with the same ID (a real agent
// places one about a second after the stop).
func TestWorkerAllocStop(t *testing.T) {
	forAgents(t, testagent.Config{}, testWorkerAllocStop)
}

func testWorkerAllocStop(t *testing.T, a agentT) {
	nc := apiClient(t, a, "")
	cid := a.id("astop")
	jm, c := startJobManager(t, a, cid)
	drv, err := nomad.NewWorkerDriver(providers.DriverContext{Config: c, JobManagerRPCAddress: jm.RPCAddress, Log: testLog(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.Close(context.Background()) })
	rec := newRecorder()
	if err := drv.Start(rec.handle); err != nil {
		t.Fatal(err)
	}
	id, err := drv.RequestWorker(ctxT(t, time.Minute), providers.WorkerSpec{Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-rec.started:
	case <-time.After(time.Minute):
		t.Fatal("no WorkerStarted")
	}
	eventually(t, time.Minute, "the worker registers", func() bool { return slices.Contains(taskManagerIDs(jm.RESTAddress), id) })
	allocs, _, err := nc.Jobs().Allocations(nomad.TaskManagerJobID(cid, id), false, nil)
	if err != nil || len(allocs) != 1 {
		t.Fatalf("allocations: %v, %v", allocs, err)
	}
	if _, err := nc.Allocations().Stop(&api.Allocation{ID: allocs[0].ID}, nil); err != nil {
		t.Fatal(err)
	}
	// Until the job is gone and a few seconds more (a replacement is
	// placed about a second after the stop), at most one TaskManager
	// process with this ID may exist, and it must end.
	most := 0
	deadline := time.Now().Add(time.Minute)
	var quietSince time.Time
	for {
		n := len(processesOf(t, cid, "taskmanager.resource-id="+id))
		most = max(most, n)
		gone := n == 0 && len(goflJobs(t, nc, cid)) == 0
		if !gone {
			quietSince = time.Time{}
		} else if quietSince.IsZero() {
			quietSince = time.Now()
		} else if time.Since(quietSince) > 3*time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after alloc stop: %d TaskManager process(es) %s, jobs %v", n, id, goflJobs(t, nc, cid))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if most > 1 {
		t.Errorf("%d TaskManager processes with ID %s ran at once", most, id)
	}
	select {
	case e := <-rec.terminated:
		if e.WorkerID != id || e.Released {
			t.Errorf("WorkerTerminated = %+v", e)
		}
	case <-time.After(time.Minute):
		t.Fatal("no WorkerTerminated after alloc stop")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.events) != 2 {
		t.Errorf("events: %+v, want one start and one end", rec.events)
	}
}

// TestJobManagerStartupFailure: a JobManager that exits during startup
// fails Deploy with the last line of its stderr, and with a hint when it
// could not find what file:// staging holds (visible on the client's
// machine only).
func TestJobManagerStartupFailure(t *testing.T) {
	forAgents(t, testagent.Config{}, testJobManagerStartupFailure)
}

func testJobManagerStartupFailure(t *testing.T, a agentT) {
	bin := filepath.Join(t.TempDir(), "failing-gofl")
	script := "#!/bin/sh\necho starting >&2\necho 'gofl: jobmanager: the staged job binary: storage: not found: open file:///nowhere/.gofl/blobs/x' >&2\nexit 1\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	o := options(a)
	o.BinaryPath = bin
	d := newDeployer(t, o)
	for i, tc := range []struct {
		staging string
		hint    bool
	}{{"file:///nowhere", true}, {"hdfs://namenode:8020/gofl", false}} {
		id := a.id("jmfail" + strconv.Itoa(i))
		_, err := d.Deploy(ctxT(t, 2*time.Minute), providers.ClusterSpec{ClusterID: id, Mode: providers.ModePerJob,
			Config: map[string]string{"staging.dir": tc.staging, "security.insecure": "true"}})
		if !errors.Is(err, nomad.ErrTaskFailed) || !strings.Contains(err.Error(), "Exit Code: 1: gofl: jobmanager: the staged job binary: storage: not found") {
			t.Fatalf("staging %s: Deploy = %v", tc.staging, err)
		}
		if hint := strings.Contains(err.Error(), "which the JobManager's Nomad node does not see"); hint != tc.hint {
			t.Errorf("staging %s: hint %v, want %v: %v", tc.staging, hint, tc.hint, err)
		}
	}
}

// insecure is the configuration of a deployment that only tests a failure
// before anything runs.
func insecure() map[string]string { return map[string]string{"security.insecure": "true"} }

// With provider.nomad.jobmanager.attempts 2 the JobManager job's restart
// policy lets the (test) agent restart a killed JobManager in place, on
// its ports, and the provider counts the attempt; killed again, the task
// fails for good and the cluster is terminated.
func TestJobManagerRestartedInPlace(t *testing.T) {
	a := testAgent(t, testagent.Config{})
	nc := apiClient(t, a, "")
	d := newDeployer(t, options(a))
	id := a.id("restarts")
	cfg := fastCluster()
	cfg["provider.nomad.jobmanager.attempts"] = "2"
	info, err := d.Deploy(ctxT(t, 2*time.Minute), providers.ClusterSpec{ClusterID: id, Mode: providers.ModeSession, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Kill(context.Background(), id) })
	job, _, err := nc.Jobs().Info(nomad.JobManagerJobID(id), nil)
	if err != nil || *job.TaskGroups[0].RestartPolicy.Attempts != 1 || *job.TaskGroups[0].RestartPolicy.Mode != "fail" ||
		*job.TaskGroups[0].ReschedulePolicy.Attempts != 0 {
		t.Fatalf("JobManager job's policies: %+v, %v", job.TaskGroups[0], err)
	}
	kill := func() {
		t.Helper()
		jms := processesOf(t, id, "\x00jobmanager\x00")
		if len(jms) != 1 {
			t.Fatalf("JobManager processes: %v", jms)
		}
		if err := syscall.Kill(jms[0], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	if info.Details["attempt"] != "1" || info.Details["attempts"] != "2" {
		t.Errorf("attempt counter after Deploy: %v", info.Details)
	}
	kill()
	var again providers.ClusterInfo
	eventually(t, time.Minute, "the JobManager restarted in place", func() bool {
		again, err = d.Retrieve(context.Background(), id)
		var o restapi.ClusterOverview
		return err == nil && again.Status == providers.StatusRunning && again.Details["attempt"] == "2" &&
			getJSON("http://"+info.RESTAddress+"/overview", &o)
	})
	if again.RESTAddress != info.RESTAddress || again.Details["alloc_id"] != info.Details["alloc_id"] {
		t.Errorf("after the restart: %+v, was %+v", again, info)
	}
	kill()
	eventually(t, time.Minute, "the cluster ended after its last attempt", func() bool {
		got, err := d.Retrieve(context.Background(), id)
		return err == nil && got.Status == providers.StatusTerminated && len(processesOf(t, id, "\x00jobmanager\x00")) == 0
	})
}
