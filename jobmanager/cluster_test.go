package jobmanager_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/internal/clustertest"
	"github.com/gofl/gofl/internal/version"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/jobmanager"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/rpc/restapi"
	"github.com/gofl/gofl/stream"
	"github.com/gofl/gofl/taskmanager"
	"github.com/gofl/gofl/taskmanager/invokable"
)

var goflBinary, testRunnerBinary, wordcountBinary, testJobBinary string

// gateInvokable runs until the test opens its gate (the task's config names
// it) or the task is cancelled: tests wait for a state and then let the tasks
// end, instead of guessing how long a task must sleep for the state to be
// seen on a loaded machine. It runs only on TaskManagers in this process.
const gateInvokable = "test-gate"

var (
	gates   sync.Map // gate name → chan struct{}
	idCount atomic.Int64
)

// newGate names a new closed-for-now gate (unique, also under -count).
func newGate() string { return uniqueID("gate") }

// uniqueID is prefix made unique among this process's tests and other
// test processes: cluster IDs name processes and ZooKeeper paths.
func uniqueID(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), idCount.Add(1))
}

func gate(name string) chan struct{} {
	ch, _ := gates.LoadOrStore(name, make(chan struct{}))
	return ch.(chan struct{})
}

// openGate lets the tasks waiting at the gate named name finish.
func openGate(name string) { close(gate(name)) }

func init() {
	invokable.Register(gateInvokable, func(env invokable.Env) (invokable.Task, error) {
		ch := gate(string(env.Config))
		return invokable.TaskFunc(func(ctx context.Context) error {
			select {
			case <-ch:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}), nil
	})
}

// waitLimit bounds waits for things a cluster does within a second or two
// when idle; it only catches hangs, so it is generous for a loaded machine
// (with other tests' clusters beside it, a deployment took over a minute).
const waitLimit = 2 * time.Minute

// e2eParallel is how many tests run at once (-test.parallel) unless the
// command line says otherwise: the e2e tests mostly wait (process start-up,
// heartbeat timeouts, restart delays), so they overlap well. Not more than
// 2 (GOMAXPROCS on CI, but fixed here): the JobManagers and in-process
// TaskManagers of all of them share this race-instrumented process, and
// with 3 on a machine at load 40+ in-process TaskManagers missed a 30 s
// heartbeat timeout and job binary downloads timed out.
const e2eParallel = 2

// parallelTests holds the names of the tests that called parallel.
var parallelTests sync.Map

// parallel is t.Parallel for an e2e test. The rule for a test that calls
// it: everything it makes is its own (cluster and resource IDs, ports from
// port 0 or a free-port picker, directories from t.TempDir, HDFS paths,
// Kafka topics and ZooKeeper paths with a unique suffix), it sets no
// environment variable or package variable, and its timing assertions
// hold on a machine busy with the other tests.
func parallel(t *testing.T) {
	parallelTests.Store(t.Name(), true)
	t.Parallel()
}

// runsInParallel tells whether t or a test it is a subtest of called
// parallel: other tests' goroutines may then run next to its own.
func runsInParallel(t testing.TB) bool {
	for name := t.Name(); ; {
		if _, ok := parallelTests.Load(name); ok {
			return true
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			return false
		}
		name = name[:i]
	}
}

// findLeaks is goleak.Find, given time for connections closed last to wind
// down.
func findLeaks(opts ...goleak.Option) error {
	err := goleak.Find(opts...)
	for deadline := time.Now().Add(30 * time.Second); err != nil && time.Now().Before(deadline); err = goleak.Find(opts...) {
	}
	return err
}

// digestCacheDir is the digest cache of the clusters' clients.
var digestCacheDir string

func TestMain(m *testing.M) {
	clustertest.DefaultParallel(e2eParallel)
	stream.ServeRole() // the runner of the jobs this binary registers
	dir, err := os.MkdirTemp("", "gofl-cluster-test")
	if err != nil {
		panic(err)
	}
	goflBinary = filepath.Join(dir, "gofl")
	testRunnerBinary = filepath.Join(dir, "testrunner")
	wordcountBinary = filepath.Join(dir, "wordcount")
	testJobBinary = filepath.Join(dir, "testjob")
	// The clusters' clients remember the binaries' digests, as gofl run's
	// do (client.ConfigOptions).
	digestCacheDir = filepath.Join(dir, "digests")
	windowedCountBinary, keyedJoinBinary = filepath.Join(dir, "windowed-count"), filepath.Join(dir, "keyed-join")
	for out, pkg := range map[string]string{goflBinary: "../cmd/gofl", testRunnerBinary: "../taskmanager/runner/internal/testrunner",
		wordcountBinary: "../examples/wordcount", testJobBinary: "../stream/internal/testjob",
		windowedCountBinary: "../examples/windowed-count", keyedJoinBinary: "../examples/keyed-join"} {
		build := exec.Command("go", "build", "-o", out, pkg)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building", pkg, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	// Also the leak check of the tests that ran in parallel (their
	// clusters cannot tell their goroutines from the others').
	if code == 0 {
		if err := findLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// cluster is a JobManager in this process plus TaskManagers, in this
// process or as real child processes, all on loopback.
type cluster struct {
	t      testing.TB
	cfg    *conf.Configuration
	jm     *jobmanager.JobManager
	client *client.Client
	ctx    context.Context
	// dir holds the TaskManager processes' work directories: a killed
	// one cannot remove its own. Removed after the cluster stopped.
	dir string
	mu  sync.Mutex
	tms map[string]*tmHandle
	// handedOver: a TaskManager of this cluster lives on in another one,
	// so its goroutines outlive this cluster.
	handedOver bool
}

type tmHandle struct {
	cancel  context.CancelFunc
	done    chan error
	cmd     *exec.Cmd
	logPath string // a process's log, "" in-process
}

func testLogger(t testing.TB) zerolog.Logger {
	if os.Getenv("GOFL_TEST_LOG") != "" {
		return zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).With().Timestamp().Logger()
	}
	return zerolog.Nop()
}

func newCluster(t testing.TB, settings map[string]string) *cluster {
	t.Helper()
	c, stop := startCluster(t, settings)
	t.Cleanup(stop)
	return c
}

// startCluster starts a JobManager; stop stops it and its TaskManagers.
func startCluster(t testing.TB, settings map[string]string) (*cluster, func()) {
	t.Helper()
	dir := t.TempDir() // first: removed after stop
	base := map[string]string{
		"jobmanager.rpc.address": "127.0.0.1", "jobmanager.rpc.port": "0",
		"rest.address": "127.0.0.1", "rest.port": "0",
		// A timeout a loaded machine cannot miss by accident, also with
		// other tests' clusters in this process (10 s was missed so):
		// tests that need a hung TaskManager or JobManager noticed set a
		// shorter one. A killed one is noticed sooner anyway: its
		// heartbeat RPCs fail.
		"heartbeat.interval": "100 ms", "heartbeat.timeout": "30 s",
		"slot.idle.timeout": "1 s",
	}
	for k, v := range settings {
		base[k] = v
	}
	cfg, err := conf.FromMap(base)
	if err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()
	ctx, cancel := context.WithCancel(context.Background())
	jm, err := jobmanager.Start(ctx, cfg, testLogger(t))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c, err := client.New(jm.RESTAddress, client.WithDigestCache(digestCacheDir))
	if err != nil {
		t.Fatal(err)
	}
	cl := &cluster{t: t, cfg: cfg, jm: jm, client: c, ctx: ctx, dir: dir, tms: map[string]*tmHandle{}}
	return cl, func() {
		cl.mu.Lock()
		tms := cl.tms
		cl.tms = map[string]*tmHandle{}
		cl.mu.Unlock()
		for _, h := range tms {
			h.stop()
		}
		cancel()
		if err := jm.Wait(); err != nil {
			t.Errorf("JobManager: %v", err)
		}
		// Whatever this test's cluster started has ended with it. Next to
		// other tests (parallel) TestMain checks that, at the end.
		if cl.handedOver || runsInParallel(t) {
			return
		}
		if err := findLeaks(before); err != nil {
			t.Errorf("goroutines left by the cluster: %v", err)
		}
	}
}

func (h *tmHandle) stop() {
	if h.cmd != nil {
		_ = h.cmd.Process.Kill()
		<-h.done
		return
	}
	h.cancel()
	<-h.done
}

// startTaskManager runs a TaskExecutor in this process.
func (c *cluster) startTaskManager(id string, slots int) { c.startTaskManagerWith(id, slots, nil) }

// startTaskManagerWith starts a TaskManager in this process, its Config
// adjusted by configure (if not nil).
func (c *cluster) startTaskManagerWith(id string, slots int, configure func(*taskmanager.Config)) {
	c.t.Helper()
	cfg := taskmanager.Config{ResourceID: id, Host: "127.0.0.1", RPCBindAddress: "127.0.0.1:0",
		NumberOfSlots: slots, ResourceManagerAddress: c.jm.RPCAddress}
	if configure != nil {
		configure(&cfg)
	}
	te, err := taskmanager.New(cfg, testLogger(c.t))
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &tmHandle{cancel: cancel, done: make(chan error, 1)}
	go func() { h.done <- te.Run(ctx) }()
	c.mu.Lock()
	c.tms[id] = h
	c.mu.Unlock()
}

// startTaskManagerProcess runs `gofl taskmanager` as a child process.
func (c *cluster) startTaskManagerProcess(id string, slots int) {
	c.t.Helper()
	c.startTaskManagerProcessWith(id, slots, nil)
}

// kill9 kills a TaskManager process with SIGKILL.
func (c *cluster) kill9(id string) {
	c.mu.Lock()
	h := c.tms[id]
	delete(c.tms, id)
	c.mu.Unlock()
	if h == nil || h.cmd == nil {
		c.t.Fatalf("no TaskManager process %s", id)
	}
	_ = h.cmd.Process.Kill()
	<-h.done
}

func (c *cluster) waitForTaskManagers(n int) {
	c.t.Helper()
	c.eventually(waitLimit, func() error {
		ov, err := c.client.Overview(c.ctx)
		if err != nil {
			return err
		}
		if ov.TaskManagers != n {
			return fmt.Errorf("%d TaskManagers registered, want %d", ov.TaskManagers, n)
		}
		return nil
	})
}

func (c *cluster) eventually(timeout time.Duration, f func() error) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("after %v: %v", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *cluster) submit(jg *jobgraph.JobGraph) string {
	c.t.Helper()
	id, err := c.client.SubmitJob(c.ctx, jg)
	if err != nil {
		c.t.Fatal(err)
	}
	return id
}

func (c *cluster) waitFor(id string, timeout time.Duration, states ...string) restapi.JobDetails {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	defer cancel()
	d, err := c.client.WaitForJobStatus(ctx, id, states...)
	if err != nil {
		ex, _ := c.client.JobExceptions(c.ctx, id)
		c.t.Fatalf("job %s: %v (state %s); exceptions: %+v", id, err, d.State, ex.ExceptionHistory.Entries)
	}
	return d
}

// twoVertexJob is source → sink with test invokables.
func twoVertexJob(p int, pattern jobgraph.DistributionPattern, typ jobgraph.ResultPartitionType, invokable, taskConfig string, jobConfig map[string]string) *jobgraph.JobGraph {
	jt := jobgraph.Streaming
	if typ == jobgraph.Blocking {
		jt = jobgraph.Batch
	}
	v := func(id string) *jobgraph.Vertex {
		return &jobgraph.Vertex{ID: jobgraph.VertexID(id), Name: id, Parallelism: p, Invokable: invokable, Config: []byte(taskConfig), SlotSharingGroup: "default"}
	}
	return &jobgraph.JobGraph{Name: "two-vertex", Type: jt, Config: jobConfig,
		Vertices: []*jobgraph.Vertex{v("source"), v("sink")},
		Edges:    []*jobgraph.Edge{{Source: "source", Target: "sink", Distribution: pattern, PartitionType: typ}}}
}

func TestTwoVertexJobRunsAndFinishes(t *testing.T) {
	parallel(t)
	c := newCluster(t, nil)
	c.startTaskManager("tm-1", 2)
	c.startTaskManager("tm-2", 2)
	c.waitForTaskManagers(2)
	g := newGate()
	id := c.submit(twoVertexJob(4, jobgraph.AllToAll, jobgraph.Pipelined, gateInvokable, g, nil))
	d := c.waitFor(id, waitLimit, "RUNNING")
	c.eventually(waitLimit, func() error {
		d, err := c.client.JobDetails(c.ctx, id)
		if err != nil {
			return err
		}
		for _, v := range d.Vertices {
			if v.Tasks["RUNNING"] != 4 {
				return fmt.Errorf("vertex %s tasks %v, want 4 RUNNING", v.ID, v.Tasks)
			}
		}
		return nil
	})
	openGate(g)
	d = c.waitFor(id, waitLimit, "FINISHED")
	for _, v := range d.Vertices {
		if v.Parallelism != 4 || v.Tasks["FINISHED"] != 4 || v.Status != "FINISHED" {
			t.Errorf("vertex %+v", v)
		}
	}
	c.eventually(waitLimit, func() error {
		ov, err := c.client.Overview(c.ctx)
		if err != nil {
			return err
		}
		if ov.SlotsAvailable != 4 || ov.JobsFinished != 1 || ov.JobsRunning != 0 {
			return fmt.Errorf("overview %+v: want 4 free slots and 1 finished job", ov)
		}
		return nil
	})
}

func TestEagerFailsFastWithoutEnoughSlots(t *testing.T) {
	parallel(t)
	// The job must fail within waitLimit, long before slot.request.timeout.
	c := newCluster(t, map[string]string{"slot.request.timeout": "10 min"})
	c.startTaskManager("tm-1", 2)
	c.waitForTaskManagers(1)
	id := c.submit(twoVertexJob(4, jobgraph.AllToAll, jobgraph.Pipelined, "sleep", `{"duration":"1s"}`,
		map[string]string{"jobmanager.scheduler.scheduling-strategy": "eager"}))
	c.waitFor(id, waitLimit, "FAILED")
	ex, err := c.client.JobExceptions(c.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ex.RootException, "could not acquire the minimum required resources") || !strings.Contains(ex.RootException, "eager") {
		t.Fatalf("root exception %q does not explain the missing slots", ex.RootException)
	}
}

func TestPipelinedRegionTimesOutWithoutEnoughSlots(t *testing.T) {
	parallel(t)
	c := newCluster(t, map[string]string{"slot.request.timeout": "2 s"})
	c.startTaskManager("tm-1", 2)
	c.waitForTaskManagers(1)
	start := time.Now()
	id := c.submit(twoVertexJob(4, jobgraph.AllToAll, jobgraph.Pipelined, "sleep", `{"duration":"1s"}`, nil))
	c.waitFor(id, waitLimit, "FAILED")
	if el := time.Since(start); el < 2*time.Second {
		t.Fatalf("failed after %v, before slot.request.timeout", el)
	}
	ex, _ := c.client.JobExceptions(c.ctx, id)
	if !strings.Contains(ex.RootException, "slot.request.timeout") || !strings.Contains(ex.RootException, "4 slots requested") {
		t.Fatalf("root exception %q", ex.RootException)
	}
}

func TestBatchJobReusesSlots(t *testing.T) {
	parallel(t)
	c := newCluster(t, nil)
	c.startTaskManager("tm-1", 2)
	c.waitForTaskManagers(1)
	id := c.submit(twoVertexJob(4, jobgraph.AllToAll, jobgraph.Blocking, "sleep", `{"duration":"200ms"}`, nil))
	d := c.waitFor(id, waitLimit, "FINISHED")
	for _, v := range d.Vertices {
		if v.Tasks["FINISHED"] != 4 {
			t.Errorf("vertex %+v", v)
		}
	}
}

// A TaskManager process killed with SIGKILL is noticed through heartbeats;
// with region failover only the regions that ran there restart, and the job
// finishes on the remaining TaskManagers. The victim is noticed by its
// failing heartbeat RPCs, not by the (long) heartbeat timeout, which the
// live TaskManager in this process must not miss on a loaded machine (it
// missed 5 s with other clusters here).
func TestKilledTaskManagerRestartsOnlyItsRegions(t *testing.T) {
	parallel(t)
	c := newCluster(t, nil)
	c.startTaskManager("tm-a", 2)
	c.startTaskManagerProcess("tm-victim", 2)
	c.waitForTaskManagers(2)
	// POINTWISE PIPELINED: 4 independent regions {source#i, sink#i}. The
	// tasks sleep (the victim runs out of process, where the gate is not):
	// long enough to be seen RUNNING together however slow the deployment.
	id := c.submit(twoVertexJob(4, jobgraph.Pointwise, jobgraph.Pipelined, "sleep", `{"duration":"10s"}`,
		map[string]string{"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "3",
			"restart-strategy.fixed-delay.delay": "100 ms"}))
	var onVictim map[int]bool
	c.eventually(waitLimit, func() error {
		v, err := c.client.JobVertex(c.ctx, id, "source")
		if err != nil {
			return err
		}
		onVictim = map[int]bool{}
		for _, s := range v.Subtasks {
			if s.Status != "RUNNING" {
				return fmt.Errorf("subtask %d is %s", s.Subtask, s.Status)
			}
			if s.TaskManagerID == "tm-victim" {
				onVictim[s.Subtask] = true
			}
		}
		if len(onVictim) == 0 {
			return errors.New("nothing runs on the victim yet")
		}
		return nil
	})
	if len(onVictim) != 2 {
		t.Fatalf("regions on the victim: %v, want 2 of 4", onVictim)
	}
	c.startTaskManager("tm-b", 2) // room for the restarted regions
	c.waitForTaskManagers(3)
	c.kill9("tm-victim")
	// Noticed through the failing heartbeats.
	c.eventually(waitLimit, func() error {
		ex, err := c.client.JobExceptions(c.ctx, id)
		if err != nil {
			return err
		}
		if len(ex.ExceptionHistory.Entries) == 0 {
			return errors.New("no failure recorded yet")
		}
		return nil
	})
	// The ResourceManager unregisters the dead TaskManager and its slots.
	c.waitForTaskManagers(2)
	d := c.waitFor(id, waitLimit, "FINISHED")
	if d.State != "FINISHED" {
		t.Fatalf("job %s", d.State)
	}
	for _, vid := range []string{"source", "sink"} {
		v, err := c.client.JobVertex(c.ctx, id, vid)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range v.Subtasks {
			want := 0
			if onVictim[s.Subtask] {
				want = 1
			}
			if s.Attempt != want || s.Status != "FINISHED" {
				t.Errorf("%s#%d: attempt %d %s, want attempt %d FINISHED (restarted: %v)", vid, s.Subtask, s.Attempt, s.Status, want, onVictim)
			}
			if s.TaskManagerID == "tm-victim" {
				t.Errorf("%s#%d finished on the killed TaskManager", vid, s.Subtask)
			}
		}
	}
}

func TestCancelRunningJob(t *testing.T) {
	parallel(t)
	c := newCluster(t, nil)
	c.startTaskManager("tm-1", 2)
	c.startTaskManager("tm-2", 2)
	c.waitForTaskManagers(2)
	id := c.submit(twoVertexJob(4, jobgraph.AllToAll, jobgraph.Pipelined, "sleep", `{"duration":"1h"}`, nil))
	c.waitFor(id, waitLimit, "RUNNING")
	c.eventually(waitLimit, func() error {
		d, err := c.client.JobDetails(c.ctx, id)
		if err != nil {
			return err
		}
		if n := d.Vertices[0].Tasks["RUNNING"] + d.Vertices[1].Tasks["RUNNING"]; n != 8 {
			return fmt.Errorf("%d tasks running", n)
		}
		return nil
	})
	if err := c.client.CancelJob(c.ctx, id); err != nil {
		t.Fatal(err)
	}
	d := c.waitFor(id, waitLimit, "CANCELED")
	for _, v := range d.Vertices {
		if v.Tasks["CANCELED"] != 4 {
			t.Errorf("vertex %s tasks %v, want 4 CANCELED", v.ID, v.Tasks)
		}
	}
	c.eventually(waitLimit, func() error {
		ov, err := c.client.Overview(c.ctx)
		if err != nil {
			return err
		}
		if ov.SlotsAvailable != 4 || ov.JobsCancelled != 1 {
			return fmt.Errorf("overview %+v: want every slot free and 1 cancelled job", ov)
		}
		return nil
	})
	if err := c.client.CancelJob(c.ctx, id); !errors.Is(err, restapi.ErrJobNotCancellable) {
		t.Fatalf("cancelling a cancelled job: %v", err)
	}
}

// Bad input gets a clear error while the cluster keeps serving a running job.
func TestBadInputWhileServing(t *testing.T) {
	parallel(t)
	c := newCluster(t, nil)
	c.startTaskManager("tm-1", 2)
	c.waitForTaskManagers(1)
	// The job runs until the gate opens at the end: every probe below meets
	// a running job, however long it takes.
	g := newGate()
	id := c.submit(twoVertexJob(2, jobgraph.AllToAll, jobgraph.Pipelined, gateInvokable, g, nil))
	c.waitFor(id, waitLimit, "RUNNING")

	post := func(body string) (int, string) {
		resp, err := http.Post("http://"+c.jm.RESTAddress+"/jobs", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var er restapi.ErrorResponse
		if err := json.Unmarshal(b, &er); err != nil || len(er.Errors) == 0 {
			t.Fatalf("error body %s is not {\"errors\": [...]}", b)
		}
		return resp.StatusCode, strings.Join(er.Errors, "\n")
	}
	if code, body := post(`{"name": "x", `); code != 400 || !strings.Contains(body, "JSON") {
		t.Errorf("malformed JSON: %d %s", code, body)
	}
	code, body := post(`{"name":"bad","type":"JOB_TYPE_STREAMING","vertices":[{"id":"a","parallelism":0,"invokable":"noop"},{"id":"a","parallelism":1}],"edges":[{"source":"a","target":"zz","distribution":"DISTRIBUTION_PATTERN_ALL_TO_ALL","partitionType":"RESULT_PARTITION_TYPE_PIPELINED"}]}`)
	for _, want := range []string{"parallelism 0", `"a" is used more than once`, "has no invokable", `"zz" does not exist`} {
		if code != 400 || !strings.Contains(body, want) {
			t.Errorf("invalid JobGraph: %d %s; want 400 mentioning %q", code, body, want)
		}
	}
	if _, err := c.client.SubmitJob(c.ctx, &jobgraph.JobGraph{JobID: id, Name: "again", Type: jobgraph.Batch,
		Vertices: []*jobgraph.Vertex{{ID: "a", Parallelism: 1, Invokable: "noop"}}}); !errors.Is(err, restapi.ErrDuplicateJob) {
		t.Errorf("duplicate job ID: %v", err)
	}
	bad := twoVertexJob(1, jobgraph.AllToAll, jobgraph.Pipelined, "noop", "",
		map[string]string{"restart-strategy.type": "sometimes", "slot.request.timeout": "soon", "user.setting": "kept"})
	if _, err := c.client.SubmitJob(c.ctx, bad); !errors.Is(err, restapi.ErrBadRequest) ||
		!strings.Contains(err.Error(), "restart-strategy.type") || !strings.Contains(err.Error(), "slot.request.timeout") {
		t.Errorf("job with bad configuration: %v; want 400 naming both keys", err)
	}
	if _, err := c.client.JobDetails(c.ctx, "00000000000000000000000000000bad"); !errors.Is(err, restapi.ErrJobNotFound) {
		t.Errorf("unknown job: %v", err)
	}

	conn, err := grpc.NewClient(c.jm.RPCAddress, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rm := pb.NewResourceManagerServiceClient(conn)
	loc := &pb.TaskManagerLocation{ResourceId: "tm-old", RpcAddress: "127.0.0.1:1", Host: "127.0.0.1"}
	_, err = rm.RegisterTaskExecutor(c.ctx, &pb.RegisterTaskExecutorRequest{ProtocolVersion: version.ProtocolVersion + 41, Location: loc, NumberOfSlots: 1, InstanceId: "x"})
	if status.Code(err) != codes.FailedPrecondition || !regexp.MustCompile(`protocol`).MatchString(err.Error()) {
		t.Errorf("wrong protocol version: %v", err)
	}
	dup := &pb.TaskManagerLocation{ResourceId: "tm-1", RpcAddress: "127.0.0.1:2", Host: "127.0.0.1"}
	_, err = rm.RegisterTaskExecutor(c.ctx, &pb.RegisterTaskExecutorRequest{ProtocolVersion: version.ProtocolVersion, Location: dup, NumberOfSlots: 1, InstanceId: "impostor"})
	if status.Code(err) != codes.AlreadyExists || !strings.Contains(err.Error(), "tm-1") {
		t.Errorf("duplicate registration: %v", err)
	}
	jms := pb.NewJobMasterServiceClient(conn)
	_, err = jms.UpdateTaskExecutionState(c.ctx, &pb.UpdateTaskExecutionStateRequest{JobId: id, State: "RUNNING",
		Attempt: &pb.ExecutionAttemptID{JobVertexId: "source", SubtaskIndex: 0, AttemptNumber: 7}})
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "unknown execution attempt") {
		t.Errorf("unknown attempt: %v", err)
	}
	_, err = jms.UpdateTaskExecutionState(c.ctx, &pb.UpdateTaskExecutionStateRequest{JobId: "00000000000000000000000000000000", State: "RUNNING",
		Attempt: &pb.ExecutionAttemptID{JobVertexId: "source"}})
	if status.Code(err) != codes.NotFound {
		t.Errorf("unknown job: %v", err)
	}
	_, err = jms.UpdateTaskExecutionState(c.ctx, &pb.UpdateTaskExecutionStateRequest{JobId: "../nope", State: "RUNNING",
		Attempt: &pb.ExecutionAttemptID{JobVertexId: "source"}})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("malformed job id: %v", err)
	}

	openGate(g)
	d := c.waitFor(id, waitLimit, "FINISHED")
	if d.State != "FINISHED" {
		t.Fatalf("the running job ended %s", d.State)
	}
}

// A TaskManager whose JobManager goes away frees the job's slots and
// registers again once a JobManager is back at the same address.
func TestTaskManagerReRegistersWhenJobManagerReturns(t *testing.T) {
	// The TaskManager notices the JobManager gone by its heartbeat timeout.
	first, stopFirst := startCluster(t, map[string]string{"heartbeat.timeout": "5 s"})
	first.startTaskManager("tm-1", 2)
	first.waitForTaskManagers(1)
	id := first.submit(twoVertexJob(2, jobgraph.AllToAll, jobgraph.Pipelined, "sleep", `{"duration":"1h"}`, nil))
	first.waitFor(id, waitLimit, "RUNNING")
	rpcPort := first.jm.RPCAddress[strings.LastIndex(first.jm.RPCAddress, ":")+1:]
	// Keep the TaskManager running: stop only the JobManager.
	first.mu.Lock()
	tm := first.tms["tm-1"]
	delete(first.tms, "tm-1")
	first.handedOver = true
	first.mu.Unlock()
	stopFirst()

	second, stopSecond := startCluster(t, map[string]string{"jobmanager.rpc.port": rpcPort})
	defer stopSecond()
	second.mu.Lock()
	second.tms["tm-1"] = tm
	second.mu.Unlock()
	second.waitForTaskManagers(1)
	second.eventually(waitLimit, func() error {
		ov, err := second.client.Overview(second.ctx)
		if err != nil {
			return err
		}
		if ov.SlotsAvailable != 2 {
			return fmt.Errorf("%d of 2 slots free; the old job's slots must be freed", ov.SlotsAvailable)
		}
		return nil
	})
	// And the new JobManager can use them.
	id2 := second.submit(twoVertexJob(2, jobgraph.AllToAll, jobgraph.Pipelined, "noop", "", nil))
	second.waitFor(id2, waitLimit, "FINISHED")
}

// runnerPid finds the job runner process of a job: runners work in a
// directory named after their job.
func runnerPid(t *testing.T, jobID string) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || filepath.Base(cwd) != jobID {
			continue
		}
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err == nil {
			return pid
		}
	}
	return 0
}

// Tasks of a job with a job binary run in a runner child process per job.
// Killing one job's runner fails and restarts only that job; another job on
// the same TaskManager keeps running, and the TaskManager stays up.
func TestRunnerCrashRestartsOnlyThatJob(t *testing.T) {
	parallel(t)
	c := newCluster(t, nil)
	c.startTaskManager("tm-1", 4)
	c.waitForTaskManagers(1)
	key, uploaded, err := c.client.UploadBlob(c.ctx, goflBinary)
	if err != nil || !uploaded {
		t.Fatalf("upload: %v %v", uploaded, err)
	}
	if _, again, err := c.client.UploadBlob(c.ctx, goflBinary); err != nil || again {
		t.Fatalf("second upload of the same binary sent bytes: %v %v", again, err)
	}
	restart := map[string]string{"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "3",
		"restart-strategy.fixed-delay.delay": "100 ms"}
	// Runner processes do not know the gate: the tasks sleep long enough to
	// be still running when the victim's runner is killed, however slowly
	// both jobs start.
	victim := twoVertexJob(1, jobgraph.AllToAll, jobgraph.Pipelined, "sleep", `{"duration":"10s"}`, restart)
	victim.BinaryKey = key
	bystander := twoVertexJob(1, jobgraph.AllToAll, jobgraph.Pipelined, "sleep", `{"duration":"10s"}`, nil)
	bystander.BinaryKey = key
	victimID, bystanderID := c.submit(victim), c.submit(bystander)
	// Wait for the tasks, not just the job, to run: only then are both
	// runners past their start-up.
	for _, id := range []string{victimID, bystanderID} {
		c.eventually(waitLimit, func() error {
			for _, vid := range []string{"source", "sink"} {
				v, err := c.client.JobVertex(c.ctx, id, vid)
				if err != nil {
					return err
				}
				if st := v.Subtasks[0].Status; st != "RUNNING" {
					return fmt.Errorf("job %s %s is %s", id, vid, st)
				}
			}
			return nil
		})
	}
	var pid, otherPid int
	c.eventually(waitLimit, func() error {
		if pid, otherPid = runnerPid(t, victimID), runnerPid(t, bystanderID); pid == 0 || otherPid == 0 {
			return fmt.Errorf("runner processes: victim %d, bystander %d", pid, otherPid)
		}
		return nil
	})
	if pid == otherPid {
		t.Fatal("two jobs share one runner process")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.eventually(waitLimit, func() error {
		ex, err := c.client.JobExceptions(c.ctx, victimID)
		if err != nil {
			return err
		}
		if len(ex.ExceptionHistory.Entries) == 0 || !strings.Contains(ex.RootException, "job runner exited") {
			return fmt.Errorf("no runner failure recorded yet: %+v", ex.ExceptionHistory.Entries)
		}
		return nil
	})
	if d := c.waitFor(victimID, 2*waitLimit, "FINISHED"); d.State != "FINISHED" {
		t.Fatalf("victim ended %s", d.State)
	}
	if d := c.waitFor(bystanderID, 2*waitLimit, "FINISHED"); d.State != "FINISHED" {
		t.Fatalf("bystander ended %s", d.State)
	}
	for _, vid := range []string{"source", "sink"} {
		v, _ := c.client.JobVertex(c.ctx, bystanderID, vid)
		if v.Subtasks[0].Attempt != 0 {
			t.Errorf("bystander %s restarted (attempt %d)", vid, v.Subtasks[0].Attempt)
		}
		v, _ = c.client.JobVertex(c.ctx, victimID, vid)
		if v.Subtasks[0].Attempt != 1 {
			t.Errorf("victim %s attempt %d, want 1", vid, v.Subtasks[0].Attempt)
		}
	}
	if ex, _ := c.client.JobExceptions(c.ctx, bystanderID); len(ex.ExceptionHistory.Entries) != 0 {
		t.Errorf("the bystander saw failures: %+v", ex.ExceptionHistory.Entries)
	}
}

// A job binary built against another runner protocol version is rejected
// with a clear error, and the job fails without restarting in vain.
func TestJobBinaryWithOtherProtocolIsRejected(t *testing.T) {
	parallel(t)
	c := newCluster(t, nil)
	c.startTaskManager("tm-1", 2)
	c.waitForTaskManagers(1)
	key, _, err := c.client.UploadBlob(c.ctx, testRunnerBinary)
	if err != nil {
		t.Fatal(err)
	}
	jg := twoVertexJob(1, jobgraph.AllToAll, jobgraph.Pipelined, "noop", "",
		map[string]string{"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "5", "restart-strategy.fixed-delay.delay": "100 ms"})
	jg.BinaryKey, jg.ProgramArgs = key, []string{"-protocol", "99"}
	id := c.submit(jg)
	c.waitFor(id, waitLimit, "FAILED")
	ex, _ := c.client.JobExceptions(c.ctx, id)
	if !strings.Contains(ex.RootException, "this job binary speaks 99") || ex.ExceptionHistory.Entries[0].FailureType != "non-recoverable" {
		t.Fatalf("root exception %q (%+v)", ex.RootException, ex.ExceptionHistory.Entries)
	}
}
