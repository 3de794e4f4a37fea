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
//
// Run it with -count N: the binaries and the input are made once per
// process (the input synced to disk, so no run pays for its writeback),
// the first pair is a warm-up (gofl stages the new binaries then, as a
// user's first run of a build does), and the order within a pair
// alternates, so neither program is always the one on the warmer caches.
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
	w := prepareWordcount(b, plainDir, mb)
	becomeSubreaper(b)
	runGofl := func(out string) (time.Duration, time.Duration) {
		cmd := exec.Command(w.gofl, "-D", "deployment.binary="+w.gofl, "-D", "log.level=warn",
			"run", "-m", "per-job", "-t", "local", "-p", "2", w.wordcount, "--input", w.input, "--output", out)
		cmd.Env = append(os.Environ(), "HOME="+w.home, "XDG_STATE_HOME=")
		wall, cpu := timed(b, cmd)
		checkCounts(b, out, w.words)
		return wall, cpu
	}
	runPlain := func(out string) (time.Duration, time.Duration) {
		wall, cpu := timed(b, exec.Command(w.plainwc, "-input", w.input, "-output", out, "-p", "2"))
		checkCounts(b, out, w.words)
		return wall, cpu
	}
	if !w.warm {
		gw, gc := runGofl(filepath.Join(w.dir, "warmup-gofl"))
		pw, pc := runPlain(filepath.Join(w.dir, "warmup-plain.txt"))
		b.Logf("warm-up pair (gofl stages the new binaries): gofl %.3f s wall, %.3f s CPU; plainwc %.3f s wall, %.3f s CPU",
			gw.Seconds(), gc.Seconds(), pw.Seconds(), pc.Seconds())
		w.warm = true
	}
	var goflWall, goflCPU, plainWall, plainCPU time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w.pairs++
		gofl := func() {
			wall, cpu := runGofl(filepath.Join(w.dir, fmt.Sprintf("gofl-%d", w.pairs)))
			goflWall, goflCPU = goflWall+wall, goflCPU+cpu
		}
		plain := func() {
			wall, cpu := runPlain(filepath.Join(w.dir, fmt.Sprintf("plain-%d.txt", w.pairs)))
			plainWall, plainCPU = plainWall+wall, plainCPU+cpu
		}
		if w.pairs%2 == 1 {
			gofl()
			plain()
		} else {
			plain()
			gofl()
		}
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(goflWall.Seconds()/n, "gofl-wall-s")
	b.ReportMetric(goflCPU.Seconds()/n, "gofl-cpu-s")
	b.ReportMetric(plainWall.Seconds()/n, "plain-wall-s")
	b.ReportMetric(plainCPU.Seconds()/n, "plain-cpu-s")
	b.ReportMetric(goflWall.Seconds()/plainWall.Seconds(), "wall-ratio")
	b.ReportMetric(goflCPU.Seconds()/plainCPU.Seconds(), "cpu-ratio")
	b.ReportMetric(float64(w.words)*n/goflWall.Seconds(), "gofl-words/s")
	b.ReportMetric(0, "ns/op") // one op is a pair of runs; the metrics above say it
}

// wordcountBench is what BenchmarkWordcountVsPlain's runs share in one
// process: the built binaries, the input and the staging home.
type wordcountBench struct {
	dir, gofl, wordcount, plainwc, input, home string
	mb                                         int
	words                                      int64
	warm                                       bool // the warm-up pair ran
	pairs                                      int  // pairs run, for their order
}

var sharedWordcountBench *wordcountBench

// prepareWordcount builds the binaries and writes the input, once per
// process and input size; TestMain removes them.
func prepareWordcount(b *testing.B, plainDir string, mb int) *wordcountBench {
	b.Helper()
	if w := sharedWordcountBench; w != nil && w.mb == mb {
		return w
	}
	dir, err := os.MkdirTemp("", "gofl-bench-wordcount-")
	if err != nil {
		b.Fatal(err)
	}
	benchDirs = append(benchDirs, dir)
	w := &wordcountBench{dir: dir, mb: mb, gofl: filepath.Join(dir, "gofl"), wordcount: filepath.Join(dir, "wordcount"),
		plainwc: filepath.Join(dir, "plainwc"), input: filepath.Join(dir, "input.txt"), home: filepath.Join(dir, "home")}
	goBuild(b, "../..", w.gofl, "./cmd/gofl")
	goBuild(b, ".", w.wordcount, ".")
	goBuild(b, plainDir, w.plainwc, ".")
	w.words = writeZipfText(b, w.input, mb<<20)
	if err := os.MkdirAll(w.home, 0o755); err != nil {
		b.Fatal(err)
	}
	sharedWordcountBench = w
	return w
}

// benchDirs are the directories the benchmarks made for the whole
// process.
var benchDirs []string

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range benchDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
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
	// On disk before anything is timed: the kernel's writeback would
	// otherwise take CPU from whichever run comes first.
	if err := f.Sync(); err != nil {
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
