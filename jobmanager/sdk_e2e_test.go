package jobmanager_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/rpc/restapi"
	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/storage/storagetest"
	"github.com/gofl/gofl/stream"
	"github.com/gofl/gofl/taskmanager"
)

// runSDKJob takes the path of `gofl run`: the binary's plan role at
// parallelism p, upload, submit; it returns the job ID.
func (c *cluster) runSDKJob(bin string, p int, args ...string) string {
	c.t.Helper()
	return c.submit(c.planSDKJob(bin, p, args...))
}

// planSDKJob plans an SDK job binary at parallelism p and uploads it.
func (c *cluster) planSDKJob(bin string, p int, args ...string) *jobgraph.JobGraph {
	c.t.Helper()
	return c.planSDKJobFrom("", bin, p, args...)
}

// planSDKJobFrom is planSDKJob for a job that starts from savepoint (a
// savepoint or retained checkpoint; "" for none), as `gofl run -s` plans
// it: its sinks keep the output they committed before.
func (c *cluster) planSDKJobFrom(savepoint, bin string, p int, args ...string) *jobgraph.JobGraph {
	c.t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "GOFL_ROLE=plan", fmt.Sprintf("GOFL_PARALLELISM=%d", p))
	if savepoint != "" {
		cmd.Env = append(cmd.Env, stream.EnvSavepointPath+"="+savepoint)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("plan: %v\n%s", err, stderr.String())
	}
	var m pb.JobGraph
	if err := protojson.Unmarshal(out, &m); err != nil {
		c.t.Fatalf("plan output: %v", err)
	}
	jg := jobgraph.FromProto(&m)
	key, _, err := c.client.UploadBlob(c.ctx, bin)
	if err != nil {
		c.t.Fatal(err)
	}
	jg.BinaryKey = key
	if savepoint != "" {
		if jg.Config == nil {
			jg.Config = map[string]string{}
		}
		jg.Config["execution.savepoint.path"] = savepoint
	}
	return jg
}

// readParts reads every line of the part files in dir.
func readParts(t testing.TB, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "part-*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no part files in %s (%v)", dir, err)
	}
	var lines []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
	}
	return lines
}

// countWords is the test's own word count: maximal runs of letters or
// digits, lowercased.
func countWords(text string) map[string]int64 {
	counts := map[string]int64{}
	var w []rune
	flush := func() {
		if len(w) > 0 {
			counts[strings.ToLower(string(w))]++
			w = w[:0]
		}
	}
	for _, r := range text {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			w = append(w, r)
		} else {
			flush()
		}
	}
	flush()
	return counts
}

func TestWordCountOnCluster(t *testing.T) {
	parallel(t)
	// Tiny offload threshold: every consumer's shuffle descriptors travel
	// as a blob the TaskManager fetches from the JobMaster.
	c := newCluster(t, map[string]string{"blob.offload.minsize": "1 b"})
	c.startTaskManager("tm-a", 2)
	c.startTaskManager("tm-b", 2)
	c.waitForTaskManagers(2)

	vocab := []string{"Straße", "straße", "Ärger", "ärger", "日本語", "café", "CAFÉ", "naïve", "жук", "ЖУК", "Ωmega",
		"gofl", "Flink", "flink", "42", "x2y", "déjà", "vu", "ﬁne", "İstanbul"}
	seps := []string{" ", "  ", ", ", ". ", "\t", " – ", "!", "'", "…", "—"}
	rng := rand.New(rand.NewSource(1))
	var text strings.Builder
	for l := 0; l < 20000; l++ {
		for n := rng.Intn(12); n >= 0; n-- {
			text.WriteString(vocab[rng.Intn(len(vocab))])
			text.WriteString(seps[rng.Intn(len(seps))])
		}
		text.WriteString("\n")
	}
	dir := t.TempDir()
	input := filepath.Join(dir, "input.txt")
	if err := os.WriteFile(input, []byte(text.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	want := countWords(text.String())

	for _, p := range []int{1, 4} {
		t.Run(fmt.Sprintf("p%d", p), func(t *testing.T) {
			out := filepath.Join(dir, fmt.Sprintf("out-%d", p))
			id := c.runSDKJob(wordcountBinary, p, "--input", input, "--output", out)
			c.waitFor(id, 60*time.Second, "FINISHED")
			got := map[string]int64{}
			lines := readParts(t, out)
			for _, l := range lines {
				i := strings.LastIndexByte(l, ' ')
				n, err := strconv.ParseInt(l[i+1:], 10, 64)
				if i < 0 || err != nil {
					t.Fatalf("bad output line %q", l)
				}
				if _, dup := got[l[:i]]; dup {
					t.Fatalf("word %q counted in two lines", l[:i])
				}
				got[l[:i]] = n
			}
			if len(got) != len(want) {
				t.Errorf("%d distinct words, want %d", len(got), len(want))
			}
			for w, n := range want {
				if got[w] != n {
					t.Errorf("%q: %d, want %d", w, got[w], n)
				}
			}
			if files, _ := filepath.Glob(filepath.Join(out, "part-*")); len(files) != p {
				t.Errorf("%d part files, want %d", len(files), p)
			}
			// The exchange between the tokenizer and the count is lossless:
			// every record written upstream was read downstream.
			d, err := c.client.JobDetails(c.ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			up, down := vertexNamed(t, d, "Tokenizer"), vertexNamed(t, d, "Count")
			t.Logf("%s: %+v; %s: %+v", up.Name, up.Metrics, down.Name, down.Metrics)
			if m := up.Metrics; m.WriteRecords <= 0 || !m.WriteRecordsComplete || m.WriteRecords != down.Metrics.ReadRecords || !down.Metrics.ReadRecordsComplete {
				t.Errorf("%q wrote %d records, %q read %d; want equal and > 0", up.Name, m.WriteRecords, down.Name, down.Metrics.ReadRecords)
			}
			if up.Metrics.WriteBytes != down.Metrics.ReadBytes || up.Metrics.ReadRecords != 0 || down.Metrics.WriteRecords != 0 {
				t.Errorf("bytes written %d, read %d; source reads %d, sink writes %d records",
					up.Metrics.WriteBytes, down.Metrics.ReadBytes, up.Metrics.ReadRecords, down.Metrics.WriteRecords)
			}
			var perSubtask int64
			for _, st := range c.jobVertex(id, down.ID).Subtasks {
				perSubtask += st.Metrics.ReadRecords
			}
			if perSubtask != down.Metrics.ReadRecords {
				t.Errorf("subtasks of %q read %d records, the vertex %d", down.Name, perSubtask, down.Metrics.ReadRecords)
			}
		})
	}
}

func TestPipelinedStreamingJobAcrossTaskManagers(t *testing.T) {
	parallel(t)
	c := newCluster(t, nil)
	c.startTaskManager("tm-a", 2)
	c.startTaskManager("tm-b", 2)
	c.waitForTaskManagers(2)
	const n, keys = 50000, 13
	out := filepath.Join(t.TempDir(), "out")
	id := c.runSDKJob(testJobBinary, 4, "pipelined-count", "--count", strconv.Itoa(n), "--keys", strconv.Itoa(keys), "--output", out)
	c.waitFor(id, 60*time.Second, "FINISHED")

	lines := readParts(t, out)
	if len(lines) != n {
		t.Fatalf("%d updates, want one per record (%d)", len(lines), n)
	}
	final := map[int64][2]int64{}
	for _, l := range lines {
		var k, sum, cnt int64
		if _, err := fmt.Sscanf(l, "%d %d %d", &k, &sum, &cnt); err != nil {
			t.Fatalf("bad line %q: %v", l, err)
		}
		if cnt > final[k][1] {
			final[k] = [2]int64{sum, cnt}
		}
	}
	for k := int64(0); k < keys; k++ {
		var sum, cnt int64
		for i := k; i < n; i += keys {
			sum += i
			cnt++
		}
		if final[k] != [2]int64{sum, cnt} {
			t.Errorf("key %d: sum %d count %d, want %d %d", k, final[k][0], final[k][1], sum, cnt)
		}
	}
}

// runnerPids lists the runner processes of a job (one per TaskManager).
func runnerPids(jobID string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || filepath.Base(cwd) != jobID {
			continue
		}
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// memoryKiB reads a VmRSS or VmHWM line of /proc/<pid>/status.
func memoryKiB(t *testing.T, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			var kib int
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kib)
			return kib
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// A sink far slower than its source backpressures it through the credit-based
// network exchange: the unbounded source could produce hundreds of MB per
// second, yet every runner's peak memory stays bounded.
func TestSlowSinkBackpressuresSourceWithBoundedMemory(t *testing.T) {
	parallel(t)
	c := newCluster(t, nil)
	c.startTaskManager("tm-1", 1)
	c.startTaskManager("tm-2", 1)
	c.waitForTaskManagers(2)
	out := filepath.Join(t.TempDir(), "out")
	id := c.runSDKJob(testJobBinary, 2, "slow-sink", "--delay", "1ms", "--output", out)
	c.waitFor(id, waitLimit, "RUNNING")
	running := time.Now()
	var pids []int
	c.eventually(waitLimit, func() error {
		if pids = runnerPids(id); len(pids) != 2 {
			return fmt.Errorf("runner processes %v, want one per TaskManager", pids)
		}
		return nil
	})
	// Not a wait for an event: the memory bound must hold over time.
	// Unthrottled, the source would have produced well over 400 MB by now.
	time.Sleep(4 * time.Second)
	const boundMiB = 150
	for _, pid := range pids {
		if peak := memoryKiB(t, pid, "VmHWM") / 1024; peak > boundMiB {
			t.Errorf("runner %d peaked at %d MiB; backpressure must bound it below %d MiB", pid, peak, boundMiB)
		} else {
			t.Logf("runner %d: peak RSS %d MiB", pid, peak)
		}
	}
	// The pipeline moves, at the sink's pace: about 1000 records/s per
	// subtask, so at most that (with a margin) since the job ran; a loaded
	// machine only makes it slower.
	var written int64
	c.eventually(waitLimit, func() error {
		written = 0
		parts, _ := filepath.Glob(filepath.Join(out, "part-*"))
		for _, p := range parts {
			if st, err := os.Stat(p); err == nil {
				written += st.Size()
			}
		}
		if written == 0 {
			return fmt.Errorf("the sink wrote nothing yet")
		}
		return nil
	})
	elapsed := time.Since(running)
	t.Logf("sink wrote %d bytes in %v", written, elapsed)
	if limit := int64(elapsed.Seconds()+1) * 2 * 1000 * 97 * 3; written > limit {
		t.Errorf("sink wrote %d bytes in %v, more than %d; want progress at the slow sink's pace", written, elapsed, limit)
	}
	d, err := c.client.JobDetails(c.ctx, id)
	if err != nil || d.State != "RUNNING" {
		t.Fatalf("job %s, %v; want it still running behind its slow sink", d.State, err)
	}
	// The metrics show it: the source's subtasks are highly back-pressured,
	// and the sink keeps reading.
	src, sink := vertexNamed(t, d, "Fast source"), vertexNamed(t, d, "Sink")
	c.eventually(waitLimit, func() error {
		bp := c.backPressure(id, src.ID)
		if bp.Status != "ok" || bp.BackpressureLevel != "high" || len(bp.Subtasks) != 2 {
			return fmt.Errorf("source back pressure %+v, want high", bp)
		}
		for _, st := range bp.Subtasks {
			if st.BackpressureLevel != "high" || st.Ratio <= 0.5 {
				return fmt.Errorf("source subtask back pressure %+v, want high", st)
			}
		}
		return nil
	})
	bp := c.backPressure(id, src.ID)
	t.Logf("source back pressure: %+v", bp)
	if sbp := c.backPressure(id, sink.ID); sbp.BackpressureLevel != "ok" {
		t.Errorf("the sink is back-pressured: %+v", sbp)
	}
	readRecords := func() int64 {
		d, err := c.client.JobDetails(c.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return vertexNamed(t, d, "Sink").Metrics.ReadRecords
	}
	first := readRecords()
	c.eventually(waitLimit, func() error {
		if n := readRecords(); n <= first {
			return fmt.Errorf("the sink read %d records, before %d; want growth", n, first)
		}
		return nil
	})
	if err := c.client.CancelJob(c.ctx, id); err != nil {
		t.Fatal(err)
	}
	c.waitFor(id, waitLimit, "CANCELED")
}

// vertexNamed is the job's vertex whose name contains name.
func vertexNamed(t testing.TB, d restapi.JobDetails, name string) restapi.JobVertexDetails {
	t.Helper()
	for _, v := range d.Vertices {
		if strings.Contains(v.Name, name) {
			return v
		}
	}
	t.Fatalf("job %s has no vertex named %q", d.ID, name)
	return restapi.JobVertexDetails{}
}

// jobVertex is GET /jobs/{jobid}/vertices/{vertexid}.
func (c *cluster) jobVertex(jobID, vertexID string) restapi.JobVertexInfo {
	c.t.Helper()
	v, err := c.client.JobVertex(c.ctx, jobID, vertexID)
	if err != nil {
		c.t.Fatal(err)
	}
	return v
}

// backPressure is GET /jobs/{jobid}/vertices/{vertexid}/backpressure.
func (c *cluster) backPressure(jobID, vertexID string) restapi.JobVertexBackPressureInfo {
	c.t.Helper()
	resp, err := http.Get(c.client.Address() + "/jobs/" + jobID + "/vertices/" + vertexID + "/backpressure")
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var bp restapi.JobVertexBackPressureInfo
	if err := json.NewDecoder(resp.Body).Decode(&bp); err != nil || resp.StatusCode != http.StatusOK {
		c.t.Fatalf("back pressure: %d, %v", resp.StatusCode, err)
	}
	return bp
}

// TestWordCountOnHDFS runs wordcount on the cluster with its input and
// output on HDFS (MiniDFSCluster): the runners read splits of every input
// file (seeking into them) and write one part file per subtask.
func TestWordCountOnHDFS(t *testing.T) {
	parallel(t)
	hdfs := storagetest.HDFS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fsys, _, err := storage.Open(ctx, hdfs+"/", storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	dir := fmt.Sprintf("/gofl-e2e/wordcount-%d", time.Now().UnixNano())
	t.Cleanup(func() { _ = fsys.RemoveAll(context.Background(), dir) })

	rng := rand.New(rand.NewSource(2))
	vocab := []string{"hdfs", "Straße", "日本語", "gofl", "Flink", "x2y", "naïve", "жук"}
	var all strings.Builder
	for f := 0; f < 2; f++ {
		var text strings.Builder
		for l := 0; l < 3000; l++ {
			for n := rng.Intn(9); n >= 0; n-- {
				text.WriteString(vocab[rng.Intn(len(vocab))] + " ")
			}
			text.WriteString("\n")
		}
		all.WriteString(text.String())
		if _, err := storage.WriteFileAtomic(ctx, fsys, fmt.Sprintf("%s/in/text-%d.txt", dir, f), strings.NewReader(text.String())); err != nil {
			t.Fatal(err)
		}
	}
	// Marker and hidden files are not input, as in Flink.
	for _, name := range []string{"_SUCCESS", ".hidden"} {
		if _, err := storage.WriteFileAtomic(ctx, fsys, dir+"/in/"+name, strings.NewReader("not counted\n")); err != nil {
			t.Fatal(err)
		}
	}
	want := countWords(all.String())

	// The TaskManagers' fs.hdfs.user reaches the runners: the part files
	// are written as that user.
	const user = "gofl-runner-user"
	tmConf, err := conf.FromMap(map[string]string{"fs.hdfs.user": user})
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, nil)
	for _, id := range []string{"tm-a", "tm-b"} {
		c.startTaskManagerWith(id, 2, func(cfg *taskmanager.Config) { cfg.RunnerEnv = taskmanager.ConfigFromConf(tmConf).RunnerEnv })
	}
	c.waitForTaskManagers(2)
	const p = 3
	id := c.runSDKJob(wordcountBinary, p, "--input", hdfs+dir+"/in", "--output", hdfs+dir+"/out")
	c.waitFor(id, 90*time.Second, "FINISHED")

	parts, err := fsys.ReadDir(ctx, dir+"/out")
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != p {
		t.Fatalf("%d files in the output, want %d part files: %+v", len(parts), p, parts)
	}
	got := map[string]int64{}
	for _, part := range parts {
		if part.Owner != user {
			t.Errorf("%s is owned by %q, want the TaskManagers' fs.hdfs.user %q", part.Path, part.Owner, user)
		}
		r, err := fsys.Open(ctx, part.Path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			var w string
			var n int64
			if _, err := fmt.Sscanf(sc.Text(), "%s %d", &w, &n); err != nil {
				t.Fatalf("%s: bad line %q", part.Path, sc.Text())
			}
			got[w] += n
		}
		r.Close()
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("counts from HDFS: %v\nwant %v", got, want)
	}
}
