package main

// End-to-end tests of the nomad provider through the CLI on both Nomad
// agents: gofl's test agent (startNomadAgent) and the real v1.6.1 agent in
// $NOMAD_ADDR (scripts/nomad/with-nomad.sh; providers/nomad/nomadtest
// skips, or under CI=true fails, when there is none). Processes the real
// agent starts run with its environment, not the test's $HOME, so what is
// left of a cluster is checked on the agent (its Nomad jobs) and by the
// GOFL_CLUSTER_ID in the processes' environment.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/providers/nomad"
	"github.com/gofl/gofl/providers/nomad/nomadtest"
	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/storage/storagetest"
)

// nomadAgent is the Nomad agent an e2e test runs its clusters on.
type nomadAgent struct {
	addr string
	real bool
	api  *api.Client
}

// name makes a cluster name unique on the real agent, which every test
// process shares.
func (na nomadAgent) name(base string) string {
	if !na.real {
		return base
	}
	return base + "-r" + strconv.Itoa(os.Getpid())
}

// forNomadAgents runs f as subtest "testagent" (a test agent of its own,
// startNomadAgent) and "nomad" (the real agent), each in a world of its
// own (newE2E), like providers/nomad's forAgents.
func forNomadAgents(t *testing.T, f func(t *testing.T, e *e2e, na nomadAgent)) {
	t.Run("testagent", func(t *testing.T) {
		t.Parallel()
		e := newE2E(t)
		startNomadAgent(t, e)
		f(t, e, newNomadAgent(t, strings.TrimPrefix(e.extraArg[len(e.extraArg)-1], "provider.nomad.address="), false))
	})
	t.Run("nomad", func(t *testing.T) {
		t.Parallel()
		e, na := newRealNomadE2E(t)
		f(t, e, na)
	})
}

// realNomadSlots bounds the tests deploying on the real agent at once: a
// dev agent on this machine's 2 cores offers about 4 cores' worth of MHz,
// and each cluster asks 1000 MHz per process (more at once: "cpu
// exhausted"). Taken after t.Parallel, never before: a paused parallel
// test holding one would block the serial tests.
var realNomadSlots = make(chan struct{}, 2)

// newRealNomadE2E is a world whose clusters run on the real agent.
func newRealNomadE2E(t *testing.T) (*e2e, nomadAgent) {
	t.Helper()
	addr := nomadtest.RealAgent(t)
	realNomadSlots <- struct{}{}
	t.Cleanup(func() { <-realNomadSlots }) // after the world's own cleanups
	e := newE2E(t)
	e.extraArg = append(e.extraArg, "-D", "provider.nomad.address="+addr)
	return e, newNomadAgent(t, addr, true)
}

func newNomadAgent(t *testing.T, addr string, real bool) nomadAgent {
	t.Helper()
	c, err := api.NewClient(&api.Config{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return nomadAgent{addr: addr, real: real, api: c}
}

var nomadClusterLine = regexp.MustCompile(`(?m)^(?:Per-job|Application) cluster (\S+) \(provider nomad\) deployed`)

// nomadClusterID is the cluster a run deployed, from its output.
func nomadClusterID(t *testing.T, r e2eResult) string {
	t.Helper()
	m := nomadClusterLine.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no nomad cluster in the output:\n%s\n%s", r.stdout, r.stderr)
	}
	return m[1]
}

// clusterLeft describes what runs of a cluster: Nomad jobs that are not
// dead and processes with its GOFL_CLUSTER_ID ("" if none).
func (na nomadAgent) clusterLeft(clusterID string) string {
	var left []string
	jobs, _, err := na.api.Jobs().PrefixList("gofl-" + clusterID + "-")
	if err != nil {
		return "listing jobs: " + err.Error()
	}
	for _, j := range jobs {
		if j.Status != "dead" {
			left = append(left, "job "+j.ID+" "+j.Status)
		}
	}
	for _, pid := range processesOfCluster(clusterID, "") {
		left = append(left, "process "+strconv.Itoa(pid))
	}
	return strings.Join(left, ", ")
}

// waitClusterGone waits until nothing of the clusters runs on the agent or
// on this machine.
func (na nomadAgent) waitClusterGone(t *testing.T, clusterIDs ...string) {
	t.Helper()
	for _, id := range clusterIDs {
		var left string
		waitFor(t, 45*time.Second, func() error {
			if left = na.clusterLeft(id); left != "" {
				return fmt.Errorf("cluster %s left: %s", id, left)
			}
			return nil
		})
	}
}

// waitStagingEmpty waits until the file:// staging dir holds only blobs.
func (e *e2e) waitStagingEmpty(t *testing.T) {
	t.Helper()
	waitFor(t, 45*time.Second, func() error {
		if d := e.stagingClusterDirs(); len(d) != 0 {
			return fmt.Errorf("staging dirs left: %v", d)
		}
		return nil
	})
}

// TestDeployNomadRealE2E runs wordcount per-job, as an application and on
// a session, through the CLI on the real agent, with file:// and hdfs://
// staging: exact output, then no Nomad job of the cluster left running and
// nothing left in staging but blobs.
func TestDeployNomadRealE2E(t *testing.T) {
	t.Parallel()
	for _, staging := range []string{"file", "hdfs"} {
		t.Run(staging, func(t *testing.T) {
			t.Parallel()
			var hdfs string
			if staging == "hdfs" {
				hdfs = storagetest.HDFS(t)
			}
			e, na := newRealNomadE2E(t)
			stagingEmpty := e.waitStagingEmpty
			if staging == "hdfs" {
				e.extraEnv = []string{"HADOOP_USER_NAME=gofltest"}
				e.staging = fmt.Sprintf("%s/gofl-nomad-real/%d", hdfs, time.Now().UnixNano())
				ctx := context.Background()
				st, err := storage.OpenStaging(ctx, e.staging, storage.Options{User: "gofltest"})
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				t.Cleanup(func() { _ = st.FileSystem().RemoveAll(context.Background(), strings.TrimSuffix(st.Root(), "/.gofl")) })
				stagingEmpty = func(t *testing.T) {
					t.Helper()
					waitFor(t, 45*time.Second, func() error {
						ids, err := st.ListClusters(ctx)
						if err != nil || len(ids) != 0 {
							return fmt.Errorf("staged clusters on HDFS left: %v, %v", ids, err)
						}
						return nil
					})
				}
			}
			session := na.name("rs" + staging)
			for _, mode := range []string{"per-job", "application", "session"} {
				out := filepath.Join(e.home, "out-"+mode)
				cluster := session
				if mode == "session" {
					expectOK(t, e.run("session", "start", "-t", "nomad", "--name", session, "-n", "1"), "session start -t nomad")
				}
				r := e.run("run", "-m", mode, "-t", "nomad", e.wc, "--input", e.input, "--output", out)
				expectOK(t, r, "run -m "+mode+" -t nomad ("+staging+" staging)")
				if mode == "session" {
					expectOK(t, e.run("session", "stop"), "session stop")
				} else {
					cluster = nomadClusterID(t, r)
				}
				e.checkCounts(out)
				na.waitClusterGone(t, cluster)
				stagingEmpty(t)
			}
		})
	}
}

// TestDeployNomadSessionNameTaken: a second `session start --name X` while
// X runs fails and leaves X's staging as it was; once X's JobManager job
// has ended (stopped behind gofl's back), a start of X replaces the debris.
func TestDeployNomadSessionNameTaken(t *testing.T) {
	t.Parallel()
	forNomadAgents(t, func(t *testing.T, e *e2e, na nomadAgent) {
		x := na.name("nx")
		expectOK(t, e.run("session", "start", "-t", "nomad", "--name", x, "-n", "1"), "session start")
		stagingDir := filepath.Join(e.home, storage.StagingSubdir, x)
		staged := snapshotDir(t, stagingDir)
		if len(staged) == 0 {
			t.Fatalf("nothing staged in %s", stagingDir)
		}
		r := e.run("session", "start", "-t", "nomad", "--name", x, "-n", "1")
		if r.code == 0 || !strings.Contains(r.stderr, "exists") {
			t.Fatalf("second session start --name %s: exit %d\n%s\n%s", x, r.code, r.stdout, r.stderr)
		}
		if now := snapshotDir(t, stagingDir); !equalSnapshots(now, staged) {
			t.Fatalf("the running session's staging changed: %v, was %v", now, staged)
		}
		out := filepath.Join(e.home, "out1")
		expectOK(t, e.run("run", "-m", "session", "-c", x, e.wc, "--input", e.input, "--output", out), "run on the session")
		e.checkCounts(out)

		// X dies: its JobManager job is stopped behind gofl's back.
		if _, _, err := na.api.Jobs().Deregister(nomad.JobManagerJobID(x), false, nil); err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, func() error {
			j, _, err := na.api.Jobs().Info(nomad.JobManagerJobID(x), nil)
			if err != nil {
				return err
			}
			if *j.Status != "dead" {
				return fmt.Errorf("JobManager job %s", *j.Status)
			}
			return nil
		})
		// Its TaskManagers may still run (until they miss the JobManager):
		// the new start cleans them up with the dead JobManager job.
		r = e.run("session", "start", "-t", "nomad", "--name", x, "-n", "1")
		expectOK(t, r, "session start of a dead session's name")
		out = filepath.Join(e.home, "out2")
		expectOK(t, e.run("run", "-m", "session", "-c", x, e.wc, "--input", e.input, "--output", out), "run on the new session")
		e.checkCounts(out)
		expectOK(t, e.run("session", "stop", x), "session stop")
		na.waitClusterGone(t, x)
		e.waitStagingEmpty(t)
	})
}

// snapshotDir maps every file under dir to its size and mtime.
func snapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			out[p] = fmt.Sprint(fi.Size(), fi.ModTime().UnixNano())
		}
		return nil
	})
	return out
}

func equalSnapshots(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestNomadTaskManagerStoppedMidJob stops a per-job cluster's TaskManager
// through Nomad while wordcount runs on the real agent (`nomad alloc stop`,
// `nomad job stop`): the job restarts on a new TaskManager and finishes
// with exact output.
func TestNomadTaskManagerStoppedMidJob(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"alloc-stop", "job-stop"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			e, na := newRealNomadE2E(t)
			e.extraArg = append(e.extraArg, "-D", "restart-strategy.type=fixed-delay",
				"-D", "restart-strategy.fixed-delay.attempts=5", "-D", "restart-strategy.fixed-delay.delay=200 ms")
			gated := gatedCountBinary(t)
			gate := filepath.Join(e.home, "gate")
			out := filepath.Join(e.home, "out")
			r := e.run("run", "-m", "per-job", "-t", "nomad", "--detached", gated, "--gate", gate, "--output", out)
			expectOK(t, r, "run --detached -t nomad")
			cluster := nomadClusterID(t, r)
			m := regexp.MustCompile(`REST at http://(\S+)`).FindStringSubmatch(r.stdout)
			if m == nil {
				t.Fatalf("no REST address:\n%s", r.stdout)
			}
			defer func() {
				// Open the gate whatever happened, so the cluster can end.
				_ = os.WriteFile(gate, nil, 0o644)
				na.waitClusterGone(t, cluster)
				e.waitStagingEmpty(t)
			}()
			ctx := context.Background()
			cl, err := client.New(m[1])
			if err != nil {
				t.Fatal(err)
			}
			var jobID string
			waitFor(t, time.Minute, func() error {
				jobs, err := cl.ListJobs(ctx)
				if err != nil || len(jobs.Jobs) != 1 {
					return fmt.Errorf("jobs %v, %v", jobs, err)
				}
				jobID = jobs.Jobs[0].ID
				return nil
			})
			// The source (a batch job's first stage) runs on the victim.
			var source string
			var victim string
			waitFor(t, time.Minute, func() error {
				d, err := cl.JobDetails(ctx, jobID)
				if err != nil || len(d.Vertices) == 0 {
					return fmt.Errorf("job details %+v: %v", d, err)
				}
				source = d.Vertices[0].ID
				vi, err := cl.JobVertex(ctx, jobID, source)
				if err != nil {
					return err
				}
				if s := vi.Subtasks[0]; s.Status != "RUNNING" {
					return fmt.Errorf("the source is %s", s.Status)
				}
				victim = vi.Subtasks[0].TaskManagerID
				return nil
			})
			tmJob := nomad.TaskManagerJobID(cluster, victim)
			switch how {
			case "alloc-stop":
				allocs, _, err := na.api.Jobs().Allocations(tmJob, false, nil)
				if err != nil || len(allocs) != 1 {
					t.Fatalf("allocations of %s: %v, %v", tmJob, allocs, err)
				}
				if _, err := na.api.Allocations().Stop(&api.Allocation{ID: allocs[0].ID}, nil); err != nil {
					t.Fatal(err)
				}
			case "job-stop":
				if _, _, err := na.api.Jobs().Deregister(tmJob, false, nil); err != nil {
					t.Fatal(err)
				}
			}
			// The victim's process is gone and the source runs again
			// elsewhere before the input is fed: only the new attempt reads it.
			waitFor(t, 2*time.Minute, func() error {
				for _, p := range processesOfCluster(cluster, "taskmanager.resource-id="+victim) {
					return fmt.Errorf("the stopped TaskManager %s still runs as process %d", victim, p)
				}
				vi, err := cl.JobVertex(ctx, jobID, source)
				if err != nil {
					return err
				}
				if s := vi.Subtasks[0]; s.Status != "RUNNING" || s.TaskManagerID == victim || s.Attempt == 0 {
					return fmt.Errorf("the source is %s, attempt %d on %s", s.Status, s.Attempt, s.TaskManagerID)
				}
				return nil
			})
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			if d, err := cl.WaitForJobStatus(wctx, jobID, "FINISHED"); err != nil {
				t.Fatalf("job %s: %v", d.State, err)
			}
			checkGatedCount(t, out)
		})
	}
}

// gatedCountBinary builds testdata/gatedcount (once per test binary).
func gatedCountBinary(t *testing.T) string {
	return builtBinary(t, "gatedcount", "./testdata/gatedcount")
}

// builtBinary builds the main package pkg as name beside the e2e binaries,
// once per test binary.
func builtBinary(t *testing.T, name, pkg string) string {
	t.Helper()
	g, _ := e2eBinaries(t)
	bin := filepath.Join(filepath.Dir(g), name)
	builtMu.Lock()
	b := built[name]
	if b == nil {
		b = &builtOnce{}
		built[name] = b
	}
	builtMu.Unlock()
	b.once.Do(func() {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("building %s: %v\n%s", pkg, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return bin
}

type builtOnce struct {
	once sync.Once
	err  error
}

var (
	builtMu sync.Mutex
	built   = map[string]*builtOnce{}
)

// checkGatedCount checks gatedcount's output for n=1000: the sums of
// 0..999 per residue mod 4.
func checkGatedCount(t *testing.T, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	var lines []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Fields(strings.ReplaceAll(string(b), " ", "="))...)
	}
	sort.Strings(lines)
	if got, want := strings.Join(lines, ","), "0=124500,1=124750,2=125000,3=125250"; got != want {
		t.Fatalf("sums in %s = %s, want %s", dir, got, want)
	}
}

// processesOfCluster lists the live processes with the cluster's
// GOFL_CLUSTER_ID whose command line contains arg.
func processesOfCluster(clusterID, arg string) []int {
	var out []int
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("GOFL_CLUSTER_ID="+clusterID+"\x00")) {
			continue
		}
		dir := filepath.Dir(p)
		if st, _ := os.ReadFile(filepath.Join(dir, "stat")); isZombie(st) {
			continue
		}
		if cmd, _ := os.ReadFile(filepath.Join(dir, "cmdline")); !bytes.Contains(cmd, []byte(arg)) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(dir)); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

func isZombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// secondNomadClient makes sure the real agent has a second client node
// (node class and pool gofl-second, scripts/nomad/run-client.sh), starting
// one for the test if there is none.
func secondNomadClient(t *testing.T, na nomadAgent) {
	t.Helper()
	ready := func() bool {
		nodes, _, err := na.api.Nodes().List(nil)
		if err != nil {
			return false
		}
		for _, n := range nodes {
			if n.NodeClass == "gofl-second" && n.Status == "ready" {
				return true
			}
		}
		return false
	}
	if ready() {
		return
	}
	cmd := exec.Command("../../scripts/nomad/run-client.sh")
	cmd.Env = append(os.Environ(), "NOMAD_ADDR="+na.addr)
	// The dev agent's RPC port is its HTTP port + 1 (scripts/nomad/run.sh);
	// the script's default, 4647, is another agent's when this one is not
	// on 4646 (NOMAD_HTTP_PORT).
	if u, err := url.Parse(na.addr); err == nil {
		if p, err := strconv.Atoi(u.Port()); err == nil {
			cmd.Env = append(cmd.Env, fmt.Sprintf("NOMAD_SERVER=%s:%d", u.Hostname(), p+1))
		}
	}
	// A file, not a pipe: processes the agent leaves do not hold Wait.
	log, err := os.Create(filepath.Join(t.TempDir(), "client.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		<-exited
	})
	waitFor(t, 2*time.Minute, func() error {
		select {
		case <-exited:
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("scripts/nomad/run-client.sh exited:\n%s", b)
		default:
		}
		if !ready() {
			return errors.New("no ready gofl-second node yet")
		}
		return nil
	})
}

// allocNodes maps the cluster's Nomad jobs to the node classes their
// allocations ran on (allocations outlive their purged jobs until the
// agent's garbage collection).
func (na nomadAgent) allocNodes(t *testing.T, clusterID string) map[string]string {
	t.Helper()
	prefix := "gofl-" + clusterID + "-"
	allocs, _, err := na.api.Allocations().List(&api.QueryOptions{Filter: fmt.Sprintf("JobID matches %q", "^"+regexp.QuoteMeta(prefix))})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, a := range allocs {
		n, _, err := na.api.Nodes().Info(a.NodeID, nil)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimPrefix(a.JobID, prefix)] = "class=" + n.NodeClass
	}
	return out
}

// TestNomadMultiNode runs per-job clusters on two Nomad nodes of one
// machine (the dev agent and a second client, node class gofl-second), the
// JobManager forced onto one and the TaskManagers onto the other: wordcount
// with hdfs:// staging, which both reach, works; file:// staging that the
// JobManager's node does not see (exec driver: its own root) fails with a
// clear error.
func TestNomadMultiNode(t *testing.T) {
	t.Parallel()
	e, na := newRealNomadE2E(t)
	secondNomadClient(t, na)
	t.Run("hdfs", func(t *testing.T) {
		hdfs := storagetest.HDFS(t)
		e.extraEnv = []string{"HADOOP_USER_NAME=gofltest"}
		e.staging = fmt.Sprintf("%s/gofl-nomad-multinode/%d", hdfs, time.Now().UnixNano())
		defer func() { e.staging, e.extraEnv = "", nil }()
		out := filepath.Join(e.home, "out-hdfs")
		r := e.run("run", "-m", "per-job", "-t", "nomad", "-D", "provider.nomad.node-pool=all",
			"-D", "provider.nomad.jobmanager.constraints=node.class != gofl-second",
			"-D", "provider.nomad.taskmanager.constraints=node.class = gofl-second",
			e.wc, "--input", e.input, "--output", out)
		expectOK(t, r, "run -m per-job on two nodes")
		cluster := nomadClusterID(t, r)
		e.checkCounts(out)
		if got := na.allocNodes(t, cluster); got["jobmanager"] != "class=" || got["taskmanager-1"] != "class=gofl-second" || len(got) != 2 {
			t.Errorf("placements %v; want the JobManager on the dev node, one TaskManager on gofl-second", got)
		}
		na.waitClusterGone(t, cluster)
	})
	t.Run("file-unseen", func(t *testing.T) {
		srv := httptest.NewServer(http.FileServer(http.Dir(filepath.Dir(e.gofl))))
		defer srv.Close()
		sum := sha256.Sum256(mustRead(t, e.gofl))
		r := e.run("run", "-m", "per-job", "-t", "nomad", "-D", "provider.nomad.node-pool=all",
			"-D", "provider.nomad.driver=exec",
			"-D", "provider.nomad.binary.url="+srv.URL+"/"+filepath.Base(e.gofl),
			"-D", "provider.nomad.binary.sha256="+hex.EncodeToString(sum[:]),
			"-D", "provider.nomad.jobmanager.constraints=node.class = gofl-second",
			"-D", "provider.nomad.taskmanager.constraints=node.class != gofl-second",
			e.wc, "--input", e.input, "--output", filepath.Join(e.home, "out-file"))
		if r.code == 0 || !strings.Contains(r.stderr, "the JobManager task of allocation") ||
			!strings.Contains(r.stderr, "storage: not found") || !strings.Contains(r.stderr, "is on the client's file system, which the JobManager's Nomad node does not see") {
			t.Fatalf("a JobManager that cannot see file:// staging: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		e.waitStagingEmpty(t)
	})
}
