package main

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// EnvPlainWC names the directory of the yardstick program (plainwc: plain
// Go, two goroutines with their own maps, the same tokeniser, no shuffle)
// that BenchmarkWordcountVsPlain compares gofl with.
const EnvPlainWC = "GOFL_PLAINWC"

// BenchmarkWordcountVsPlain is issue 17's paired measurement: the wordcount
// example as a per-job cluster of real processes on the local provider
// (gofl run -m per-job -t local -p 2, client included, from the command to
// its exit) against plainwc on the same deterministic input, run back to
// back. It reports both programs' wall and CPU time (user+sys of each
// process tree, up to the exit of its last process) and the ratios
// gofl/plainwc. GOFL_BENCH_WORDCOUNT_MB sets the input size (default 100);
// GOFL_PROFILE_DIR makes the job's runners write CPU and allocation
// profiles there.
func BenchmarkWordcountVsPlain(b *testing.B) {
	plainDir := os.Getenv(EnvPlainWC)
	if plainDir == "" {
		if os.Getenv("CI") == "true" {
			b.Fatalf("%s is not set: it names the plainwc yardstick's directory", EnvPlainWC)
		}
		b.Skipf("%s is not set (make bench-wordcount sets it): it names the plainwc yardstick's directory", EnvPlainWC)
	}
	mb := 100
	if v, err := strconv.Atoi(os.Getenv("GOFL_BENCH_WORDCOUNT_MB")); err == nil && v > 0 {
		mb = v
	}
	dir := b.TempDir()
	gofl, wordcount, plainwc := filepath.Join(dir, "gofl"), filepath.Join(dir, "wordcount"), filepath.Join(dir, "plainwc")
	goBuild(b, "../..", gofl, "./cmd/gofl")
	goBuild(b, ".", wordcount, ".")
	goBuild(b, plainDir, plainwc, ".")
	input := filepath.Join(dir, "input.txt")
	words := writeZipfText(b, input, mb<<20)
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		b.Fatal(err)
	}

	becomeSubreaper(b)
	var goflWall, goflCPU, plainWall, plainCPU time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out := filepath.Join(dir, fmt.Sprintf("gofl-%d", i))
		cmd := exec.Command(gofl, "-D", "deployment.binary="+gofl, "-D", "log.level=warn",
			"run", "-m", "per-job", "-t", "local", "-p", "2", wordcount, "--input", input, "--output", out)
		cmd.Env = append(os.Environ(), "HOME="+home, "XDG_STATE_HOME=")
		wall, cpu := timed(b, cmd)
		goflWall, goflCPU = goflWall+wall, goflCPU+cpu
		checkCounts(b, out, words)

		plainOut := filepath.Join(dir, fmt.Sprintf("plain-%d.txt", i))
		wall, cpu = timed(b, exec.Command(plainwc, "-input", input, "-output", plainOut, "-p", "2"))
		plainWall, plainCPU = plainWall+wall, plainCPU+cpu
		checkCounts(b, plainOut, words)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(goflWall.Seconds()/n, "gofl-wall-s")
	b.ReportMetric(goflCPU.Seconds()/n, "gofl-cpu-s")
	b.ReportMetric(plainWall.Seconds()/n, "plain-wall-s")
	b.ReportMetric(plainCPU.Seconds()/n, "plain-cpu-s")
	b.ReportMetric(goflWall.Seconds()/plainWall.Seconds(), "wall-ratio")
	b.ReportMetric(goflCPU.Seconds()/plainCPU.Seconds(), "cpu-ratio")
	b.ReportMetric(float64(words)*n/goflWall.Seconds(), "gofl-words/s")
	b.ReportMetric(0, "ns/op") // one op is a pair of runs; the metrics above say it
}

func goBuild(b *testing.B, dir, out, pkg string) {
	b.Helper()
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = dir
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build %s in %s: %v\n%s", pkg, dir, err, msg)
	}
}

// timed runs cmd and returns its wall time and CPU time (user+sys) up to
// the exit of its last descendant, which for gofl run is the whole per-job
// cluster: the JobManager, the TaskManagers and their job runners. A
// cluster process still running when the client exits (it waits only so
// long) is adopted by this process (becomeSubreaper) and waited for, so
// its time is counted too, and the run is logged.
func timed(b *testing.B, cmd *exec.Cmd) (wall, cpu time.Duration) {
	b.Helper()
	began := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		b.Fatal("no rusage for the child")
	}
	clientExit := time.Since(began)
	orphanCPU, orphans := reapAdopted(b, 2*time.Minute)
	wall = time.Since(began)
	if orphans > 0 {
		b.Logf("%d process(es) outlived the client (exit at %v, last at %v):\n%s", orphans, clientExit, wall, out)
	}
	return wall, time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) + orphanCPU
}

// writeZipfText writes about size bytes of words drawn from a Zipf-like
// vocabulary with non-ASCII words (the text of jobmanager's
// BenchmarkWordcountEndToEnd) and returns the number of words.
func writeZipfText(b *testing.B, path string, size int) int64 {
	b.Helper()
	vocab := []string{"the", "stream", "batch", "flink", "gofl", "köln", "café", "東京", "naïve", "operator", "window", "state", "checkpoint", "slot", "region"}
	for i := 0; i < 5000; i++ {
		vocab = append(vocab, fmt.Sprintf("word%d", i))
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	zipf := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.2, 1, uint64(len(vocab)-1))
	var n, words int64
	for n < int64(size) {
		line := 0
		for line < 80 {
			k, _ := w.WriteString(vocab[zipf.Uint64()])
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
	return words
}

// checkCounts sums the "word count" lines under path (a file, or a
// directory of part files) and fails unless they add up to words.
func checkCounts(b *testing.B, path string, words int64) {
	b.Helper()
	files := []string{path}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		files, _ = filepath.Glob(filepath.Join(path, "part-*"))
	}
	var total int64
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := sc.Text()
			if i := strings.LastIndexByte(line, ' '); i > 0 {
				c, _ := strconv.ParseInt(line[i+1:], 10, 64)
				total += c
			}
		}
		f.Close()
	}
	if total != words {
		b.Fatalf("%s: counted %d words, want %d", path, total, words)
	}
}
