package main

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/gofl/gofl/stream"
)

// BenchmarkTokenizeAndCombine is a job runner's hot path in the wordcount:
// a text source's lines through the example's tokeniser into the keyed
// Reduce's combiner, at parallelism 1 in the local executor (Batch mode),
// on 32 MB of the paired benchmark's text.
func BenchmarkTokenizeAndCombine(b *testing.B) {
	input := filepath.Join(b.TempDir(), "input.txt")
	words := writeZipfText(b, input, 32<<20)
	st, err := os.Stat(input)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	b.ResetTimer()
	for range b.N {
		var n atomic.Int64
		env := stream.NewEnvironment(stream.WithParallelism(1), stream.WithRuntimeMode(stream.Batch))
		ws := stream.FlatMap(stream.TextFile(env, input), func(line string, out stream.Collector[WordCount]) error {
			EachWord(line, func(w string) { out.Collect(WordCount{Word: w, Count: 1}) })
			return nil
		})
		counts := stream.KeyBy(ws, func(w WordCount) string { return w.Word }).
			Reduce(func(a, b WordCount) WordCount { return WordCount{Word: a.Word, Count: a.Count + b.Count} })
		stream.Process(counts, func(_ *stream.ProcessContext, w WordCount, _ stream.Collector[struct{}]) error {
			n.Add(w.Count)
			return nil
		})
		if _, err := env.Execute(context.Background()); err != nil {
			b.Fatal(err)
		}
		if n.Load() != words {
			b.Fatalf("counted %d words, want %d", n.Load(), words)
		}
	}
	b.ReportMetric(float64(words)*float64(b.N)/b.Elapsed().Seconds(), "words/s")
}
