package jobmanager_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/internal/tlsconf"
)

// BenchmarkWordcountEndToEnd runs the wordcount example on a standalone
// cluster of real processes (a JobManager and two TaskManagers with two
// slots each) over generated text, from submission to FINISHED, and reports
// the input rate and the peak RSS of every process.
// GOFL_BENCH_WORDCOUNT_MB sets the input size (default 100).
// GOFL_BENCH_METRICS=1 runs with metrics reporting on (Flink's Prometheus
// reporter on every process, each scraped every second, and the vertex
// metrics polled over REST every second, as a dashboard does); what that
// costs is BenchmarkMetricsCost's measure.
func BenchmarkWordcountEndToEnd(b *testing.B) {
	mb := 100
	if v, err := strconv.Atoi(os.Getenv("GOFL_BENCH_WORDCOUNT_MB")); err == nil && v > 0 {
		mb = v
	}
	// GOFL_BENCH_INTERNAL_TLS: 1 runs with internal TLS, compare runs
	// without and with it, and also a 1 MB input whose time is mostly the
	// job's start.
	sizes, modes := []int{mb}, []bool{os.Getenv("GOFL_BENCH_INTERNAL_TLS") == "1"}
	if os.Getenv("GOFL_BENCH_INTERNAL_TLS") == "compare" {
		sizes, modes = []int{mb, 1}, []bool{false, true}
	}
	withMetrics := os.Getenv("GOFL_BENCH_METRICS") == "1"
	dir := b.TempDir()
	for _, size := range sizes {
		input := filepath.Join(dir, fmt.Sprintf("input-%d.txt", size))
		words := writeText(b, input, size<<20)
		for _, p := range []int{1, 4} {
			for _, tls := range modes {
				name := fmt.Sprintf("%dMB/p%d", size, p)
				if len(modes) > 1 {
					name += fmt.Sprintf("/tls=%v", tls)
				}
				b.Run(name, func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						out := filepath.Join(b.TempDir(), fmt.Sprintf("out-%d-%d-%v-%v-%d", size, p, tls, withMetrics, i))
						runWordcountOnce(b, input, out, p, size, words, tls, withMetrics)
					}
				})
			}
		}
	}
}

// writeText writes about size bytes of words drawn from a Zipf-like
// vocabulary with non-ASCII words, and returns the number of words.
func writeText(b *testing.B, path string, size int) int64 {
	b.Helper()
	vocab := []string{"the", "stream", "batch", "flink", "gofl", "köln", "café", "東京", "naïve", "operator", "window", "state", "checkpoint", "slot", "region"}
	for i := 0; i < 5000; i++ {
		vocab = append(vocab, fmt.Sprintf("word%d", i))
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	r := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(r, 1.2, 1, uint64(len(vocab)-1))
	var n, words int64
	for n < int64(size) {
		line := 0
		for line < 80 {
			wd := vocab[zipf.Uint64()]
			k, _ := w.WriteString(wd)
			w.WriteByte(' ')
			line += k + 1
			words++
		}
		w.WriteByte('\n')
		n += int64(line + 1)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	return words
}

func freePort(b *testing.B) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func runWordcountOnce(b *testing.B, input, output string, p, mb int, words int64, internalTLS, withMetrics bool) {
	b.StopTimer()
	rest, rpc := freePort(b), freePort(b)
	logDir := b.TempDir()
	var procs []*exec.Cmd
	start := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(goflBinary, args...)
		f, _ := os.Create(filepath.Join(logDir, name+".log"))
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		procs = append(procs, cmd)
		return cmd
	}
	defer func() {
		for _, c := range procs {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}()
	common := benchClusterArgs(b, rpc, internalTLS, logDir)
	promBase := 0
	if withMetrics {
		promBase = promPorts(10)
		common = append(common, "-D", "metrics.reporter.prom.factory.class="+conf.PrometheusReporterFactory,
			"-D", fmt.Sprintf("metrics.reporter.prom.port=%d-%d", promBase, promBase+9))
	}
	jm := start("jobmanager", append([]string{"jobmanager", "-D", "rest.port=" + strconv.Itoa(rest), "-D", "rest.address=127.0.0.1"}, common...)...)
	tm1 := start("tm1", append([]string{"taskmanager", "-D", "taskmanager.numberOfTaskSlots=2", "-D", "taskmanager.rpc.port=0"}, common...)...)
	tm2 := start("tm2", append([]string{"taskmanager", "-D", "taskmanager.numberOfTaskSlots=2", "-D", "taskmanager.rpc.port=0"}, common...)...)
	cl, err := client.New(fmt.Sprintf("127.0.0.1:%d", rest))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ov, err := cl.Overview(ctx)
		if err == nil && ov.TaskManagers == 2 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("cluster did not come up: %v %+v", err, ov)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Plan, as `gofl run` does (not timed: it is the client's local work).
	planned := exec.Command(wordcountBinary, "--input", input, "--output", output)
	planned.Env = append(os.Environ(), "GOFL_ROLE=plan", fmt.Sprintf("GOFL_PARALLELISM=%d", p))
	graphJSON, err := planned.Output()
	if err != nil {
		b.Fatalf("plan: %v", err)
	}
	graphFile := filepath.Join(logDir, "graph.json")
	if err := os.WriteFile(graphFile, graphJSON, 0o644); err != nil {
		b.Fatal(err)
	}

	peaks := map[string]int{}
	var mu sync.Mutex
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // sample peak RSS of every process, runners included, until stopped
		defer close(sampled)
		named := map[string]int{"jobmanager": jm.Process.Pid, "taskmanager-1": tm1.Process.Pid, "taskmanager-2": tm2.Process.Pid}
		for {
			mu.Lock()
			for name, pid := range named {
				if kib := hwm(pid); kib > peaks[name] {
					peaks[name] = kib
				}
			}
			for _, pid := range runnerPidsByBinary() {
				name := "runner-" + strconv.Itoa(pid)
				if kib := hwm(pid); kib > peaks[name] {
					peaks[name] = kib
				}
			}
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	polled := make(chan struct{})
	if !withMetrics {
		close(polled)
	} else {
		go func() {
			defer close(polled)
			pollMetrics(cl, fmt.Sprintf("127.0.0.1:%d", rest), promBase, 10, stop)
		}()
	}
	b.StartTimer()
	began := time.Now()
	run := exec.Command(goflBinary, "run", "-m", fmt.Sprintf("127.0.0.1:%d", rest), "-p", strconv.Itoa(p), wordcountBinary, "--input", input, "--output", output)
	if out, err := run.CombinedOutput(); err != nil {
		b.Fatalf("gofl run: %v\n%s", err, out)
	}
	elapsed := time.Since(began)
	b.StopTimer()
	close(stop)
	<-sampled
	<-polled

	total := wordcountTotal(b, output)
	if total != words {
		b.Fatalf("counted %d words, wrote %d", total, words)
	}
	b.ReportMetric(float64(mb)/elapsed.Seconds(), "MB/s")
	b.ReportMetric(float64(words)/elapsed.Seconds(), "words/s")
	mu.Lock()
	defer mu.Unlock()
	maxRunner := 0
	for name, kib := range peaks {
		if strings.HasPrefix(name, "runner-") {
			maxRunner = max(maxRunner, kib)
			continue
		}
		b.ReportMetric(float64(kib)/1024, "MiB-peak-"+name)
	}
	b.ReportMetric(float64(maxRunner)/1024, "MiB-peak-runner-max")
}

func hwm(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kib int
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kib)
			return kib
		}
	}
	return 0
}

// runnerPidsByBinary finds the running wordcount runner processes.
func runnerPidsByBinary() []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !strings.Contains(string(cmdline), "GOFL_ROLE=runner") {
			continue
		}
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// benchClusterArgs are the -D options every process of a benchmark
// cluster shares: the JobManager's RPC address and, with internalTLS,
// internal mutual TLS with a cluster CA generated under dir.
func benchClusterArgs(b *testing.B, rpc int, internalTLS bool, dir string) []string {
	b.Helper()
	common := []string{"-D", "jobmanager.rpc.port=" + strconv.Itoa(rpc), "-D", "jobmanager.rpc.address=127.0.0.1"}
	if !internalTLS {
		return common
	}
	m, err := tlsconf.Generate("bench", nil, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	env, err := m.WriteFiles(filepath.Join(dir, "tls"))
	if err != nil {
		b.Fatal(err)
	}
	opt := map[string]string{tlsconf.EnvCert: "cert", tlsconf.EnvKey: "key", tlsconf.EnvCA: "ca"}
	common = append(common, "-D", "security.ssl.internal.enabled=true")
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		common = append(common, "-D", "security.ssl.internal."+opt[k]+"="+v)
	}
	return common
}
