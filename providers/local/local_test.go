package local_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/internal/clustertest"
	"github.com/gofl/gofl/jobmanager"
	"github.com/gofl/gofl/providers"
	"github.com/gofl/gofl/providers/local"
	"github.com/gofl/gofl/rpc/restapi"
)

var goflBinary string

func TestMain(m *testing.M) { clustertest.Main(m, "../../cmd/gofl", &goflBinary, nil) }

// processesOf lists the pids of live processes started for the cluster
// (their environment has GOFL_CLUSTER_ID=id), zombies excluded.
func processesOf(t *testing.T, clusterID string) []int {
	t.Helper()
	out, err := clustertest.ClusterProcesses(clusterID)
	if err != nil {
		t.Skip(err)
	}
	return out
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	clustertest.Eventually(t, timeout, what, cond)
}

func getJSON(_ *testing.T, url string, v any) bool { return clustertest.GetJSON(url, v) }

func taskManagerIDs(_ *testing.T, rest string) []string { return clustertest.TaskManagerIDs(rest) }

func newDeployer(t *testing.T, base string) *local.Deployer {
	return local.NewDeployer(local.Options{Dir: base, Binary: goflBinary, GracePeriod: 5 * time.Second, Log: zerolog.New(zerolog.NewTestWriter(t))})
}

func ctxT(t *testing.T, d time.Duration) context.Context { return clustertest.Ctx(t, d) }

// fastCluster is the configuration of a test cluster: quick heartbeats, a
// heartbeat timeout long enough that only the provider's events explain a
// prompt removal.
func fastCluster() map[string]string { return clustertest.FastCluster() }

func TestSessionClusterLifecycle(t *testing.T) {
	base := t.TempDir()
	d := newDeployer(t, base)
	const id = "session-1"
	info, err := d.Deploy(ctxT(t, time.Minute), providers.ClusterSpec{
		ClusterID: id, Mode: providers.ModeSession, Config: fastCluster(), TaskManagers: 1,
		Artifacts: []string{"file:///staging/.gofl/session-1/gofl.yaml"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Kill(context.Background(), id) })
	if info.Status != providers.StatusRunning || info.RESTAddress == "" || info.Provider != "local" || info.Mode != providers.ModeSession {
		t.Fatalf("Deploy = %+v", info)
	}
	var overview restapi.ClusterOverview
	if !getJSON(t, "http://"+info.RESTAddress+"/overview", &overview) {
		t.Fatal("GET /overview failed after Deploy returned")
	}
	clusterDir := filepath.Join(base, "clusters", id)
	if _, err := os.Stat(filepath.Join(clusterDir, "jobmanager", "gofl.log")); err != nil {
		t.Fatalf("JobManager log: %v", err)
	}

	// The initial TaskManager: started by the JobManager's active
	// ResourceManager through the local worker driver.
	eventually(t, time.Minute, "taskmanager-1 registers", func() bool {
		return slices.Equal(taskManagerIDs(t, info.RESTAddress), []string{"taskmanager-1"})
	})
	if _, err := os.Stat(filepath.Join(clusterDir, "taskmanager-1", "gofl.log")); err != nil {
		t.Fatalf("TaskManager log: %v", err)
	}

	// List, and Retrieve from a fresh provider instance (another client).
	list, err := d.List(ctxT(t, time.Minute))
	if err != nil || len(list) != 1 || list[0].ClusterID != id || list[0].RESTAddress != info.RESTAddress {
		t.Fatalf("List = %+v, %v", list, err)
	}
	other := newDeployer(t, base)
	got, err := other.Retrieve(ctxT(t, time.Minute), id)
	if err != nil || got.RESTAddress != info.RESTAddress || got.Status != providers.StatusRunning || got.Details["pid"] != info.Details["pid"] {
		t.Fatalf("Retrieve = %+v, %v; want %+v", got, err, info)
	}
	if _, err := other.Retrieve(ctxT(t, time.Minute), "nope"); !errors.Is(err, providers.ErrClusterNotFound) {
		t.Fatalf("Retrieve(unknown) = %v", err)
	}
	// The same ID again is refused and leaves the running cluster alone.
	if _, err := other.Deploy(ctxT(t, time.Minute), providers.ClusterSpec{ClusterID: id, Mode: providers.ModeSession}); !errors.Is(err, providers.ErrClusterExists) {
		t.Fatalf("second Deploy of %s: %v", id, err)
	}

	// SIGKILL the TaskManager: the ResourceManager removes it at once (the
	// heartbeat timeout is five minutes) and starts a replacement to keep the
	// minimum.
	tmPid := readPid(t, filepath.Join(clusterDir, "taskmanager-1"))
	if err := syscall.Kill(tmPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Within a minute: well before the heartbeat timeout (five), however
	// loaded the machine.
	eventually(t, time.Minute, "taskmanager-1 is unregistered", func() bool {
		return !slices.Contains(taskManagerIDs(t, info.RESTAddress), "taskmanager-1")
	})
	eventually(t, time.Minute, "a replacement TaskManager registers", func() bool {
		return slices.Equal(taskManagerIDs(t, info.RESTAddress), []string{"taskmanager-2"})
	})

	pids := processesOf(t, id)
	if len(pids) < 2 {
		t.Fatalf("processes of %s: %v, want the JobManager and a TaskManager", id, pids)
	}
	if err := other.Kill(ctxT(t, time.Minute), id); err != nil {
		t.Fatal(err)
	}
	if left := processesOf(t, id); len(left) != 0 {
		t.Fatalf("processes left after Kill: %v (were %v)", left, pids)
	}
	if _, err := os.Stat(clusterDir); !os.IsNotExist(err) {
		t.Fatalf("cluster directory after Kill: %v", err)
	}
	if err := d.Kill(ctxT(t, time.Minute), id); !errors.Is(err, providers.ErrClusterNotFound) {
		t.Fatalf("second Kill: %v", err)
	}
	if list, err := d.List(ctxT(t, time.Minute)); err != nil || len(list) != 0 {
		t.Fatalf("List after Kill = %+v, %v", list, err)
	}
}

func readPid(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.Fields(string(b))[0])
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func TestDeployFailuresLeaveNothing(t *testing.T) {
	base := t.TempDir()
	d := newDeployer(t, base)

	// Missing binary.
	_, err := d.Deploy(ctxT(t, time.Minute), providers.ClusterSpec{ClusterID: "nobin", Mode: providers.ModeSession,
		Binary: filepath.Join(base, "no-such-gofl")})
	if err == nil || !strings.Contains(err.Error(), "no-such-gofl") {
		t.Fatalf("missing binary: %v", err)
	}
	if _, err := os.Stat(filepath.Join(base, "clusters", "nobin")); !os.IsNotExist(err) {
		t.Fatalf("directory of a failed deploy: %v", err)
	}

	// REST port taken: the JobManager exits, Deploy says why.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	cfg := fastCluster()
	cfg["rest.port"] = port
	_, err = d.Deploy(ctxT(t, time.Minute), providers.ClusterSpec{ClusterID: "taken", Mode: providers.ModeSession, Config: cfg, TaskManagers: 1})
	if err == nil || !strings.Contains(err.Error(), "rest.port") {
		t.Fatalf("port taken: %v", err)
	}
	if left := processesOf(t, "taken"); len(left) != 0 {
		t.Fatalf("processes left: %v", left)
	}
	if _, err := os.Stat(filepath.Join(base, "clusters", "taken")); !os.IsNotExist(err) {
		t.Fatalf("directory of a failed deploy: %v", err)
	}

	// A deadline before the JobManager serves.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if _, err := d.Deploy(ctx, providers.ClusterSpec{ClusterID: "late", Mode: providers.ModeSession, Config: fastCluster()}); err == nil {
		t.Fatal("Deploy with an expired deadline succeeded")
	}
	if left := processesOf(t, "late"); len(left) != 0 {
		t.Fatalf("processes left: %v", left)
	}

	// Invalid specs.
	for _, spec := range []providers.ClusterSpec{{Mode: providers.ModeSession}, {ClusterID: "x", Mode: "batch"}, {ClusterID: "../x", Mode: providers.ModeSession}} {
		if _, err := d.Deploy(ctxT(t, time.Minute), spec); err == nil {
			t.Errorf("Deploy(%+v) succeeded", spec)
		}
	}
	if list, err := d.List(ctxT(t, time.Minute)); err != nil || len(list) != 0 {
		t.Fatalf("List = %+v, %v", list, err)
	}
}

// Without high availability a JobManager killed -9 takes its cluster
// down: its TaskManager exits within heartbeat.timeout, the cluster is
// reported failed (also by List) until Kill removes what is left, while a
// JobManager that ended by itself leaves a terminated record, cleaned.
func TestKilledJobManagerLeavesAFailedCluster(t *testing.T) {
	base := t.TempDir()
	d := newDeployer(t, base)
	const id = "stale"
	cfg := fastCluster()
	cfg["heartbeat.timeout"] = "3s"
	info, err := d.Deploy(ctxT(t, time.Minute), providers.ClusterSpec{ClusterID: id, Mode: providers.ModeSession, Config: cfg, TaskManagers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Kill(context.Background(), id) })
	eventually(t, time.Minute, "a TaskManager registers", func() bool { return len(taskManagerIDs(t, info.RESTAddress)) == 1 })
	// The TaskManager has the answer too: a registration whose answer dies
	// with the JobManager is bounded by taskmanager.registration.timeout
	// (5 min) instead (TestRegistrationTimeoutStopsTheTaskManager).
	tmLogPath := filepath.Join(base, "clusters", id, "taskmanager-1", "gofl.log")
	eventually(t, time.Minute, "the TaskManager logs its registration", func() bool {
		b, _ := os.ReadFile(tmLogPath)
		return bytes.Contains(b, []byte("registered at the ResourceManager"))
	})
	exited := d.Exited(id)
	if exited == nil || newDeployer(t, base).Exited(id) != nil {
		t.Fatal("Exited: want a channel from the deploying Deployer only")
	}
	select {
	case <-exited:
		t.Fatal("Exited closed while the JobManager runs")
	default:
	}
	jmPid, _ := strconv.Atoi(info.Details["pid"])
	if err := syscall.Kill(jmPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatal("Exited did not close when the JobManager was killed")
	}
	// The TaskManager notices the silence after heartbeat.timeout (3 s);
	// slack for a loaded machine.
	eventually(t, 2*time.Minute, "the orphaned TaskManager exits", func() bool { return len(processesOf(t, id)) == 0 })
	t.Logf("processes gone %v after the kill", time.Since(killed).Round(time.Millisecond))
	tmLog, _ := os.ReadFile(tmLogPath)
	if !bytes.Contains(tmLog, []byte("without high availability nothing recovers its jobs")) {
		t.Errorf("TaskManager log lacks the reason:\n%s", tmLog)
	}
	for range 2 { // Retrieve and List keep reporting it
		got, err := newDeployer(t, base).Retrieve(context.Background(), id)
		if err != nil || got.Status != providers.StatusFailed || !strings.Contains(got.Details["error"], "killed") {
			t.Fatalf("Retrieve = %+v, %v; want failed", got, err)
		}
		list, err := d.List(ctxT(t, time.Minute))
		if err != nil || len(list) != 1 || list[0].Status != providers.StatusFailed {
			t.Fatalf("List = %+v, %v", list, err)
		}
	}
	if err := d.Kill(ctxT(t, time.Minute), id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(base, "clusters", id)); !os.IsNotExist(err) {
		t.Fatalf("directory after Kill: %v", err)
	}
	if list, err := d.List(ctxT(t, time.Minute)); err != nil || len(list) != 0 {
		t.Fatalf("List after Kill = %+v, %v", list, err)
	}
}

// TestWorkerDriver runs the worker half against a JobManager in this
// process: a requested TaskManager registers, and its SIGKILL is reported
// at once.
func TestWorkerDriver(t *testing.T) {
	base := t.TempDir()
	c, err := conf.FromMap(map[string]string{
		"jobmanager.rpc.port": "0", "rest.port": "0", "jobmanager.rpc.address": "127.0.0.1", "rest.address": "127.0.0.1",
		"heartbeat.interval": "200ms", "heartbeat.timeout": "60s",
		"provider.local.dir": base, "deployment.binary": goflBinary, "deployment.cluster-id": "drv",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	jm, err := jobmanager.Start(ctx, c, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := jm.Stop(); err != nil {
			t.Error(err)
		}
	}()
	drv, err := local.NewWorkerDriver(providers.DriverContext{Config: c, JobManagerRPCAddress: jm.RPCAddress, Log: zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []providers.WorkerEvent
	terminated := make(chan providers.WorkerTerminated, 4)
	if err := drv.Start(func(ev providers.WorkerEvent) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
		if e, ok := ev.(providers.WorkerTerminated); ok {
			terminated <- e
		}
	}); err != nil {
		t.Fatal(err)
	}
	id, err := drv.RequestWorker(ctxT(t, time.Minute), providers.WorkerSpec{Slots: 3})
	if err != nil {
		t.Fatal(err)
	}
	if id != "taskmanager-1" || drv.Dir() != filepath.Join(base, "clusters", "drv") {
		t.Fatalf("worker %s in %s", id, drv.Dir())
	}
	eventually(t, time.Minute, "the worker registers with 3 slots", func() bool {
		var tms restapi.TaskManagersInfo
		return getJSON(t, "http://"+jm.RESTAddress+"/taskmanagers", &tms) && len(tms.TaskManagers) == 1 &&
			tms.TaskManagers[0].ID == id && tms.TaskManagers[0].SlotsNumber == 3
	})
	mu.Lock()
	if len(events) != 1 || events[0].(providers.WorkerStarted).WorkerID != id {
		t.Errorf("events = %+v, want WorkerStarted %s", events, id)
	}
	mu.Unlock()

	pid := readPid(t, filepath.Join(drv.Dir(), id))
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-terminated:
		if e.WorkerID != id || e.Released || e.ExitStatus != -1 || !strings.Contains(e.Cause.Error(), "killed") {
			t.Errorf("WorkerTerminated = %+v", e)
		}
	case <-time.After(30 * time.Second): // prompt: the driver waits on the process
		t.Fatal("no WorkerTerminated within 30 s of SIGKILL")
	}

	// Release: a second worker ends with Released set.
	id2, err := drv.RequestWorker(ctxT(t, time.Minute), providers.WorkerSpec{Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := drv.ReleaseWorker(ctxT(t, time.Minute), id2); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-terminated:
		if e.WorkerID != id2 || !e.Released {
			t.Errorf("WorkerTerminated = %+v", e)
		}
	case <-time.After(time.Minute):
		t.Fatal("released worker did not end")
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
	if left := processesOf(t, "drv"); len(left) != 0 {
		t.Fatalf("processes left after Close: %v", left)
	}
	if _, err := drv.RequestWorker(ctxT(t, time.Minute), providers.WorkerSpec{Slots: 1}); !errors.Is(err, providers.ErrClosed) {
		t.Fatalf("RequestWorker after Close: %v", err)
	}
}

func TestRegistry(t *testing.T) {
	for _, name := range []string{"local", "LOCAL", "standalone"} {
		if _, err := providers.Lookup(name); err != nil {
			t.Errorf("Lookup(%q): %v", name, err)
		}
	}
	_, err := providers.Lookup("kubernetes")
	if !errors.Is(err, providers.ErrUnknownProvider) || !strings.Contains(err.Error(), strings.Join(providers.Names(), ", ")) {
		t.Fatalf("Lookup(kubernetes) = %v", err)
	}
	if _, err := providers.NewDeployer("standalone", nil, zerolog.Nop()); !errors.Is(err, providers.ErrNotSupported) {
		t.Fatalf("standalone deployer: %v", err)
	}
	if drv, err := providers.NewWorkerDriver("standalone", providers.DriverContext{}); drv != nil || err != nil {
		t.Fatalf("standalone worker driver = %v, %v", drv, err)
	}
}

// With provider.local.jobmanager.attempts 2 the supervisor restarts a
// JobManager killed -9 on its REST port; killed again, the cluster is
// failed naming the attempts, and nothing of it runs; Kill removes it.
func TestSupervisorRestartsTheJobManagerUpToTheAttempts(t *testing.T) {
	base := t.TempDir()
	d := newDeployer(t, base)
	const id = "restarts"
	info := deploySupervised(t, d, id)
	kill := func(pid string) {
		t.Helper()
		n, _ := strconv.Atoi(pid)
		if err := syscall.Kill(n, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	kill(info.Details["pid"])
	var err error
	var again providers.ClusterInfo
	eventually(t, time.Minute, "the JobManager restarted on its REST port", func() bool {
		again, err = d.Retrieve(context.Background(), id)
		var o restapi.ClusterOverview
		return err == nil && again.Status == providers.StatusRunning && again.Details["pid"] != info.Details["pid"] &&
			getJSON(t, "http://"+info.RESTAddress+"/overview", &o)
	})
	if again.RESTAddress != info.RESTAddress || again.Details["attempt"] != "2" {
		t.Errorf("after the restart: %+v", again)
	}
	kill(again.Details["pid"])
	eventually(t, time.Minute, "the cluster failed, nothing runs", func() bool {
		got, err := d.Retrieve(context.Background(), id)
		return err == nil && got.Status == providers.StatusFailed && strings.Contains(got.Details["error"], "attempt 2 of 2") &&
			len(processesOf(t, id)) == 0
	})
	if err := d.Kill(ctxT(t, time.Minute), id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(base, "clusters", id)); !os.IsNotExist(err) {
		t.Fatalf("directory after Kill: %v", err)
	}
}

// A JobManager whose ports another process took after it died (its ports
// were the kernel's pick from the ephemeral range) is restarted on new
// ones, and the record names them once it logged them, instead of the
// restart failing to bind and spending the last attempt.
func TestSupervisorRestartsOnNewPortsWhenTheOldAreTaken(t *testing.T) {
	d := newDeployer(t, t.TempDir())
	const id = "ports-taken"
	info := deploySupervised(t, d, id)
	pid, _ := strconv.Atoi(info.Details["pid"])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var squatter net.Listener
	var err error
	eventually(t, time.Minute, "the dead JobManager's REST port taken", func() bool {
		squatter, err = net.Listen("tcp", info.RESTAddress)
		return err == nil
	})
	defer squatter.Close()
	var again providers.ClusterInfo
	eventually(t, time.Minute, "the JobManager restarted on a new REST port", func() bool {
		again, err = d.Retrieve(context.Background(), id)
		var o restapi.ClusterOverview
		return err == nil && again.Status == providers.StatusRunning && again.Details["pid"] != info.Details["pid"] &&
			again.RESTAddress != "" && again.RESTAddress != info.RESTAddress && getJSON(t, "http://"+again.RESTAddress+"/overview", &o)
	})
	if again.Details["attempt"] != "2" {
		t.Errorf("after the restart: %+v", again)
	}
}

// deploySupervised deploys session cluster id with
// provider.local.jobmanager.attempts 2 (a supervisor restarts its
// JobManager once); the test's cleanup kills it.
func deploySupervised(t *testing.T, d *local.Deployer, id string) providers.ClusterInfo {
	t.Helper()
	cfg := fastCluster()
	cfg["provider.local.jobmanager.attempts"] = "2"
	info, err := d.Deploy(ctxT(t, time.Minute), providers.ClusterSpec{ClusterID: id, Mode: providers.ModeSession, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Kill(context.Background(), id) })
	return info
}
