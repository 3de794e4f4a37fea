package jobmanager_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gofl/gofl/client"
)

// BenchmarkInternalTLSPaired measures what internal TLS costs, in paired
// runs on two standalone clusters of real processes that live side by side
// (a JobManager and two TaskManagers with two slots each; one with internal
// TLS on every link, one without): each pair runs the same job on both, in
// alternating order, and the medians are reported.
//   - start: `gofl run` of wordcount over a tiny input (a few lines), from
//     the command to FINISHED: what a job's start (submission, scheduling,
//     blob fetches, runner start, data-plane connections) costs;
//   - MB/s: wordcount over GOFL_BENCH_WORDCOUNT_MB (default 20) MB at
//     parallelism 4.
//
// GOFL_BENCH_TLS_PAIRS sets the number of pairs (default 5).
func BenchmarkInternalTLSPaired(b *testing.B) {
	pairs, mb := 5, 20
	if v, err := strconv.Atoi(os.Getenv("GOFL_BENCH_TLS_PAIRS")); err == nil && v > 0 {
		pairs = v
	}
	if v, err := strconv.Atoi(os.Getenv("GOFL_BENCH_WORDCOUNT_MB")); err == nil && v > 0 {
		mb = v
	}
	dir := b.TempDir()
	tiny := filepath.Join(dir, "tiny.txt")
	if err := os.WriteFile(tiny, []byte("to be or not to be\nthat is the question\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	big := filepath.Join(dir, "big.txt")
	writeText(b, big, mb<<20)
	rest := map[bool]string{false: startBenchCluster(b, false), true: startBenchCluster(b, true)}

	var start, thr [2][]float64 // [tls] -> samples
	run := func(tls bool, input string, p, i int) time.Duration {
		out := filepath.Join(dir, fmt.Sprintf("out-%v-%d-%d", tls, p, i))
		began := time.Now()
		cmd := exec.Command(goflBinary, "run", "-m", rest[tls], "-p", strconv.Itoa(p), wordcountBinary, "--input", input, "--output", out)
		if o, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("gofl run (tls %v): %v\n%s", tls, err, o)
		}
		d := time.Since(began)
		_ = os.RemoveAll(out)
		return d
	}
	idx := map[bool]int{false: 0, true: 1}
	for i := 0; i < pairs; i++ {
		order := []bool{false, true}
		if i%2 == 1 {
			order = []bool{true, false}
		}
		for _, tls := range order {
			start[idx[tls]] = append(start[idx[tls]], float64(run(tls, tiny, 2, i).Milliseconds()))
		}
		for _, tls := range order {
			thr[idx[tls]] = append(thr[idx[tls]], float64(mb)/run(tls, big, 4, i).Seconds())
		}
	}
	med := func(s []float64) float64 {
		s = slices.Clone(s)
		slices.Sort(s)
		return s[len(s)/2]
	}
	b.ReportMetric(med(start[0]), "ms-start-tls-off")
	b.ReportMetric(med(start[1]), "ms-start-tls-on")
	b.ReportMetric(med(thr[0]), "MB/s-tls-off")
	b.ReportMetric(med(thr[1]), "MB/s-tls-on")
	b.Logf("start ms off %v on %v; MB/s off %v on %v", start[0], start[1], thr[0], thr[1])
}

// startBenchCluster starts a JobManager and two TaskManagers (two slots
// each), with internal TLS or not, waits until both TaskManagers are
// registered and returns the REST address; the processes are killed at
// cleanup.
func startBenchCluster(b *testing.B, internalTLS bool) string {
	b.Helper()
	rest, rpc := freePort(b), freePort(b)
	logDir := b.TempDir()
	common := benchClusterArgs(b, rpc, internalTLS, logDir)
	for i, args := range [][]string{
		{"jobmanager", "-D", "rest.port=" + strconv.Itoa(rest), "-D", "rest.address=127.0.0.1"},
		{"taskmanager", "-D", "taskmanager.numberOfTaskSlots=2", "-D", "taskmanager.rpc.port=0"},
		{"taskmanager", "-D", "taskmanager.numberOfTaskSlots=2", "-D", "taskmanager.rpc.port=0"},
	} {
		cmd := exec.Command(goflBinary, append(args, common...)...)
		f, _ := os.Create(filepath.Join(logDir, fmt.Sprintf("p%d.log", i)))
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); f.Close() })
	}
	addr := fmt.Sprintf("127.0.0.1:%d", rest)
	cl, err := client.New(addr)
	if err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ov, err := cl.Overview(context.Background())
		if err == nil && ov.TaskManagers == 2 {
			return addr
		}
		if time.Now().After(deadline) {
			b.Fatalf("cluster (tls %v) did not come up: %v %+v", internalTLS, err, ov)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
