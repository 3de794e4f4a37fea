package stream_test

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gofl/gofl/stream"
	"github.com/gofl/gofl/stream/runtime"
)

// BenchmarkChainedMapFilter measures one task running a chain
// generator → map → filter → discarding sink at parallelism 1: one vertex,
// so the records never leave the goroutine. One op is one generated record;
// records/s is per core. Sub-benchmarks:
//
//   - runtask: the planned chain run directly by runtime.RunTask (no
//     executor), the per-core chain throughput;
//   - execute: the same job through the local executor (Environment.Execute);
//   - plain-go: the same functions called in a loop, for reference.
func BenchmarkChainedMapFilter(b *testing.B) {
	gen := func(i int64) int64 { return i }
	mapFn := func(v int64) int64 { return 3*v + 1 }
	keep := func(v int64) bool { return v&1 == 0 } // every odd index
	build := func(n int64, kept *int64) *stream.Environment {
		env := stream.NewEnvironment()
		src := stream.Generate(env, n, gen)
		f := stream.Filter(stream.Map(src, mapFn), keep)
		stream.Process(f, func(_ *stream.ProcessContext, v int64, _ stream.Collector[struct{}]) error {
			*kept++
			return nil
		}).Name("Discard")
		return env
	}
	check := func(b *testing.B, kept int64) {
		if want := int64(b.N) / 2; kept != want {
			b.Fatalf("sink saw %d records, want %d", kept, want)
		}
	}
	report := func(b *testing.B) {
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
	}

	b.Run("runtask", func(b *testing.B) {
		b.ReportAllocs()
		var kept int64
		p, err := build(int64(b.N), &kept).Plan()
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Graph.Vertices) != 1 || len(p.Graph.Vertices[0].Operators) != 4 {
			b.Fatalf("want one vertex chaining 4 operators, got %d vertices", len(p.Graph.Vertices))
		}
		v := p.Graph.Vertices[0]
		env := runtime.TaskEnv{SubtaskIndex: 0, Parallelism: 1, MaxParallelism: v.EffectiveMaxParallelism()}
		b.ResetTimer()
		if err := runtime.RunTask(context.Background(), p.Tasks[v.ID], env); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		check(b, kept)
		report(b)
	})
	b.Run("execute", func(b *testing.B) {
		b.ReportAllocs()
		var kept int64
		env := build(int64(b.N), &kept)
		b.ResetTimer()
		if _, err := env.Execute(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		check(b, kept)
		report(b)
	})
	b.Run("plain-go", func(b *testing.B) {
		b.ReportAllocs()
		fns := []any{gen, mapFn, keep} // keep the calls indirect, as in the chain
		g, m, k := fns[0].(func(int64) int64), fns[1].(func(int64) int64), fns[2].(func(int64) bool)
		var kept int64
		for i := int64(0); i < int64(b.N); i++ {
			if k(m(g(i))) {
				kept++
			}
		}
		b.StopTimer()
		check(b, kept)
		report(b)
	})
}

var wordcountMB = flag.Int("wordcount.mb", 10, "MB (10^6 bytes) of generated text per op of BenchmarkWordcountLocal")

// wordcountText writes about mb MB of text to a file: lines of 4 to 15
// words drawn Zipf-distributed from a vocabulary of 20 000 made-up words
// (the tokenizer's words function, applied to it, returns them as is). It
// returns the file, its size, its number of words and distinct words.
func wordcountText(b *testing.B, mb int) (path string, size, nwords, distinct int64) {
	r := rand.New(rand.NewSource(1))
	syll := []string{"ka", "lo", "mi", "ne", "ru", "ta", "vo", "shi", "qu", "ber", "an", "dor", "el", "fi", "gra", "zu"}
	vocab := make([]string, 0, 20000)
	for inVocab := map[string]bool{}; len(vocab) < cap(vocab); {
		var w strings.Builder
		for n := 1 + r.Intn(4); n > 0; n-- {
			w.WriteString(syll[r.Intn(len(syll))])
		}
		w.WriteString(strconv.Itoa(r.Intn(10)))
		if s := w.String(); !inVocab[s] {
			inVocab[s] = true
			vocab = append(vocab, s)
		}
	}
	zipf := rand.NewZipf(r, 1.1, 1, uint64(len(vocab)-1))
	seen := make([]bool, len(vocab))
	path = filepath.Join(b.TempDir(), "text.txt")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var line bytes.Buffer
	for size < int64(mb)*1e6 {
		line.Reset()
		for n := 4 + r.Intn(12); n > 0; n-- {
			i := zipf.Uint64()
			if !seen[i] {
				seen[i] = true
				distinct++
			}
			if line.Len() > 0 {
				line.WriteByte(' ')
			}
			line.WriteString(vocab[i])
			nwords++
		}
		line.WriteByte('\n')
		size += int64(line.Len())
		w.Write(line.Bytes())
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return path, size, nwords, distinct
}

// resetPeakRSS frees what the heap can give back and resets the kernel's
// high-water mark of the resident set (VmHWM), so that the next reading is
// the peak of what runs in between (Linux 4.0+: "5" > clear_refs).
func resetPeakRSS() {
	goruntime.GC()
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// peakRSSMiB is the process's VmHWM in MiB, or -1.
func peakRSSMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				return -1
			}
			return kb / 1024
		}
	}
	return -1
}

// BenchmarkWordcountLocal runs word count (TextFile → FlatMap tokenizer →
// KeyBy → Reduce → discarding sink) on -wordcount.mb MB of generated text
// per op through the local executor, in Streaming mode (PIPELINED
// exchanges, one Reduce update per word) and Batch mode (BLOCKING
// exchanges held in memory, one result per distinct word), at parallelism 1
// and 2. It reports words/s ("records/s"), input MB/s and the peak RSS of
// the process during the sub-benchmark ("MiB-peak-rss", VmHWM after a
// reset; it includes the test binary's own baseline).
func BenchmarkWordcountLocal(b *testing.B) {
	path, size, nwords, distinct := wordcountText(b, *wordcountMB)
	for _, mode := range []stream.RuntimeMode{stream.Streaming, stream.Batch} {
		for _, p := range []int{1, 2} {
			b.Run(fmt.Sprintf("mode=%s/p=%d", strings.ToLower(mode.String()), p), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(size)
				resetPeakRSS()
				b.ResetTimer()
				for range b.N {
					var out atomic.Int64
					env := stream.NewEnvironment(stream.WithParallelism(p), stream.WithRuntimeMode(mode))
					ws := stream.FlatMap(stream.TextFile(env, path), func(l string, out stream.Collector[wc]) error {
						for _, w := range words(l) {
							out.Collect(wc{w, 1})
						}
						return nil
					}).Name("Tokenizer")
					counts := stream.KeyBy(ws, func(w wc) string { return w.Word }).
						Reduce(func(a, b wc) wc { return wc{a.Word, a.Count + b.Count} }).Name("Count")
					stream.Process(counts, func(_ *stream.ProcessContext, _ wc, _ stream.Collector[struct{}]) error {
						out.Add(1)
						return nil
					}).Name("Discard")
					if _, err := env.Execute(context.Background()); err != nil {
						b.Fatal(err)
					}
					want := nwords
					if mode == stream.Batch {
						want = distinct
					}
					if got := out.Load(); got != want {
						b.Fatalf("sink saw %d results, want %d", got, want)
					}
				}
				b.StopTimer()
				sec := b.Elapsed().Seconds()
				b.ReportMetric(float64(nwords)*float64(b.N)/sec, "records/s")
				b.ReportMetric(peakRSSMiB(), "MiB-peak-rss")
			})
		}
	}
}
