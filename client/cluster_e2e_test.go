package client_test

// The submission flows through the library, without the gofl CLI: real
// JobManager, TaskManager and runner processes started by the local
// provider, file:// staging, examples/wordcount as the job. Each test has
// its own $HOME (the provider's records, the staging area).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/providers"
	_ "github.com/gofl/gofl/providers/local" // the library's user registers its providers
)

var bins struct {
	once     sync.Once
	gofl, wc string
	err      error
}

// TestMain removes the binaries the end-to-end tests built (about 80 MB).
func TestMain(m *testing.M) {
	code := m.Run()
	if bins.gofl != "" {
		os.RemoveAll(filepath.Dir(bins.gofl))
	}
	os.Exit(code)
}

func binaries(t *testing.T) (gofl, wordcount string) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end deployment test; skipped with -short")
	}
	bins.once.Do(func() {
		dir, err := os.MkdirTemp("", "gofl-client-e2e-")
		if err != nil {
			bins.err = err
			return
		}
		bins.gofl, bins.wc = filepath.Join(dir, "gofl"), filepath.Join(dir, "wordcount")
		for _, b := range [][2]string{{bins.gofl, "../cmd/gofl"}, {bins.wc, "../examples/wordcount"}} {
			if out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput(); err != nil {
				bins.err = fmt.Errorf("building %s: %v\n%s", b[1], err, out)
				return
			}
		}
	})
	if bins.err != nil {
		t.Fatal(bins.err)
	}
	return bins.gofl, bins.wc
}

// world is one test's $HOME, input and descriptor.
type world struct {
	home, input, wc string
	desc            *client.ClusterDescriptor
}

func newWorld(t *testing.T) *world {
	gofl, wc := binaries(t)
	home := t.TempDir()
	t.Setenv("HOME", home) // the processes the provider starts inherit it
	input := filepath.Join(home, "input.txt")
	if err := os.WriteFile(input, []byte("to be or not to be\nthat is the question\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := conf.Load(conf.LoadOptions{Env: []string{}, Dynamic: []string{
		"deployment.binary=" + gofl, "staging.dir=file://" + home, "provider.local.dir=" + filepath.Join(home, "clusters"),
		"heartbeat.interval=500ms", "log.level=warn",
	}})
	if err != nil {
		t.Fatal(err)
	}
	desc, err := client.NewClusterDescriptor(cfg, "local", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	w := &world{home: home, input: input, wc: wc, desc: desc}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		infos, _ := desc.ListClusters(ctx)
		for _, i := range infos {
			if i.Status != providers.StatusTerminated {
				t.Errorf("cluster %s (%s) left %s", i.ClusterID, i.Mode, i.Status)
			}
			_ = desc.KillCluster(ctx, i.ClusterID)
		}
	})
	return w
}

func (w *world) checkCounts(t *testing.T, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "part-*"))
	var lines []string
	for _, f := range files {
		b, _ := os.ReadFile(f)
		lines = append(lines, strings.Fields(strings.ReplaceAll(string(b), " ", "="))...)
	}
	sort.Strings(lines)
	want := "be=2,is=1,not=1,or=1,question=1,that=1,the=1,to=2"
	if strings.Join(lines, ",") != want {
		t.Fatalf("counts in %s = %q, want %s", dir, lines, want)
	}
}

// stagingDirs lists the cluster directories of the staging area.
func (w *world) stagingDirs() []string {
	ents, _ := os.ReadDir(filepath.Join(w.home, ".gofl"))
	var out []string
	for _, e := range ents {
		if e.Name() == "blobs" {
			continue
		}
		// A removed cluster keeps only its archived logs (gofl logs).
		sub, _ := os.ReadDir(filepath.Join(w.home, ".gofl", e.Name()))
		if len(sub) == 1 && sub[0].Name() == "logs" {
			continue
		}
		out = append(out, e.Name())
	}
	return out
}

func TestSessionThroughTheLibrary(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cc, err := w.desc.DeploySessionCluster(ctx, client.SessionSpec{ClusterID: "lib-session"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.desc.DeploySessionCluster(ctx, client.SessionSpec{ClusterID: "lib-session"}); !errors.Is(err, providers.ErrClusterExists) {
		t.Errorf("a second session of that ID: %v", err)
	}
	out := filepath.Join(w.home, "out")
	g, err := client.PlanJob(ctx, w.wc, []string{"--input", w.input, "--output", out}, client.PlanOptions{Parallelism: 2})
	if err != nil {
		t.Fatal(err)
	}
	if g.BinaryKey, _, err = cc.UploadBlob(ctx, w.wc); err != nil {
		t.Fatal(err)
	}
	// Another process finds the session by its ID.
	again, err := w.desc.RetrieveCluster(ctx, "lib-session")
	if err != nil || again.Info.RESTAddress != cc.Info.RESTAddress {
		t.Fatalf("retrieve: %+v, %v", again, err)
	}
	id, err := again.SubmitJob(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	r, err := again.WaitForJobResult(ctx, id)
	if err != nil || r.ApplicationStatus != "SUCCEEDED" {
		t.Fatalf("result %+v, %v", r, err)
	}
	w.checkCounts(t, out)
	if err := cc.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := w.desc.RetrieveCluster(ctx, "lib-session"); !errors.Is(err, providers.ErrClusterNotFound) {
		t.Errorf("retrieve after shutdown: %v", err)
	}
	if d := w.stagingDirs(); len(d) != 0 {
		t.Errorf("staging left: %v", d)
	}
}

func TestPerJobThroughTheLibrary(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := filepath.Join(w.home, "out")
	g, err := client.PlanJob(ctx, w.wc, []string{"--input", w.input, "--output", out}, client.PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := w.desc.DeployJobCluster(ctx, client.JobSpec{JobBinary: w.wc, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	if !cc.Staged.JobUploaded || len(w.stagingDirs()) != 1 {
		t.Errorf("staged %+v, dirs %v", cc.Staged, w.stagingDirs())
	}
	w.waitForPerJobCounts(ctx, t, cc, out)
	if d := w.stagingDirs(); len(d) != 0 {
		t.Errorf("staging left: %v", d)
	}
}

// waitForPerJobCounts waits for the one job of the per-job cluster cc to
// succeed and the cluster to go, and checks the counts it wrote to out.
func (w *world) waitForPerJobCounts(ctx context.Context, t *testing.T, cc *client.ClusterClient, out string) {
	t.Helper()
	jobs := cc.JobIDs(ctx)
	if len(jobs) != 1 || jobs[0] == "" {
		t.Fatalf("jobs %v", jobs)
	}
	r, err := cc.WaitForJobResult(ctx, jobs[0])
	if err != nil || r.ApplicationStatus != "SUCCEEDED" {
		t.Fatalf("result %+v, %v", r, err)
	}
	if !cc.Finish(ctx, time.Minute) {
		t.Error("the per-job cluster did not go away")
	}
	w.checkCounts(t, out)
}

// JobSpec.Plan plans while the binaries are staged: the job runs as with
// Graph; a failed plan fails the deployment with its own error and leaves
// nothing staged or running.
func TestPerJobPlannedWhileStaging(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	errPlan := errors.New("no plan today")
	_, err := w.desc.DeployJobCluster(ctx, client.JobSpec{JobBinary: w.wc, Plan: func(context.Context) (*jobgraph.JobGraph, error) {
		return nil, errPlan
	}})
	if !errors.Is(err, errPlan) {
		t.Fatalf("DeployJobCluster with a failing plan: %v, want the plan's error", err)
	}
	if d := w.stagingDirs(); len(d) != 0 {
		t.Errorf("a failed plan left staged: %v", d)
	}
	if infos, _ := w.desc.ListClusters(ctx); len(infos) != 0 {
		t.Errorf("a failed plan left clusters: %+v", infos)
	}

	out := filepath.Join(w.home, "out")
	cc, err := w.desc.DeployJobCluster(ctx, client.JobSpec{JobBinary: w.wc, Plan: func(ctx context.Context) (*jobgraph.JobGraph, error) {
		return client.PlanJob(ctx, w.wc, []string{"--input", w.input, "--output", out}, client.PlanOptions{})
	}})
	if err != nil {
		t.Fatal(err)
	}
	w.waitForPerJobCounts(ctx, t, cc, out)
}

// A CI job deploys an application-mode job from Go code: no CLI, no
// planning on the client; it waits for the application and cleans up.
func TestCIDeploysAnApplicationFromGoCode(t *testing.T) {
	w := newWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := filepath.Join(w.home, "out")
	cc, err := w.desc.DeployApplicationCluster(ctx, client.JobSpec{
		JobBinary: w.wc, Args: []string{"--input", w.input, "--output", out},
		Config: map[string]string{conf.DefaultParallelism.Key(): "2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	st := waitFinished(ctx, t, cc)
	if len(st.Jobs) != 1 {
		t.Errorf("jobs %v", st.Jobs)
	}
	if !cc.Finish(ctx, time.Minute) {
		t.Error("the application cluster did not go away")
	}
	w.checkCounts(t, out)
	if files, _ := filepath.Glob(filepath.Join(out, "part-*")); len(files) != 2 {
		t.Errorf("parallelism.default=2 wrote %d part files", len(files))
	}
}

// waitFinished polls the per-job or application cluster's status until it
// is FINISHED; FAILED or ctx ending fails the test.
func waitFinished(ctx context.Context, t *testing.T, cc *client.ClusterClient) client.ApplicationStatus {
	t.Helper()
	for {
		st, err := cc.Application(ctx)
		if err != nil || st.State == "FAILED" {
			t.Fatalf("application %+v, %v", st, err)
		}
		if st.State == "FINISHED" {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the application did not finish: %+v", st)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
