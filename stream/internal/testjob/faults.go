package main

// Jobs for the fault-injection end-to-end tests: slow in a controlled way,
// so a fault lands while the tasks the test aims at run, and with an output
// the tests can compute independently.
//
//	slow-wordcount --input PATH --output DIR [--rate R]
//
// is examples/wordcount in Batch mode (BLOCKING exchange between the
// tokenizer and the count, which is an Aggregate: no combiner) whose count consumes at most R records per
// second in each runner process: the producers finish quickly, the
// consumers run for (words / parallelism / R) seconds.
//
//	paced-lines --input PATH --output DIR [--rate R] [--split-size B]
//
// reads the lines of PATH with TextFileSource (splits of B bytes handed
// out by the JobMaster's enumerator) at R lines per second in each runner
// process, and writes them unchanged, one region per subtask.
//
//	paced-numbers --count N --rate R --output DIR [--ledger FILE]
//
// streams 0..N-1 at R records per second in total, forwards them POINTWISE
// (one pipelined region per subtask) to a formatter and writes one number
// per line into part files. With --ledger, every attempt of a formatter
// subtask appends "open <subtask> <pid> <unix-nanos>" when it sees the
// first number of its range and "last <subtask> <pid> <unix-nanos>" when it
// sees the last one.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/gofl/gofl/stream"
)

func init() {
	stream.RegisterJob("slow-wordcount", buildSlowWordCount)
	stream.RegisterJob("paced-numbers", buildPacedNumbers)
	stream.RegisterJob("paced-lines", buildPacedLines)
}

// WordCount is a word and how often it occurred.
type WordCount struct {
	Word  string
	Count int64
}

func buildSlowWordCount(env *stream.Environment, args []string) error {
	fs := flag.NewFlagSet("slow-wordcount", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	input := fs.String("input", "", "text file or directory")
	output := fs.String("output", "", "output directory")
	rate := fs.Float64("rate", 10000, "records per second the count consumes in each runner process")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *input == "" || *output == "" || *rate <= 0 {
		return errors.New("usage: slow-wordcount --input PATH --output DIR [--rate R]")
	}
	env.SetRuntimeMode(stream.Batch)
	limit := newPacer(*rate)
	words := stream.FlatMap(stream.TextFile(env, *input), func(line string, out stream.Collector[WordCount]) error {
		for _, w := range strings.FieldsFunc(strings.ToLower(line), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
			out.Collect(WordCount{Word: w, Count: 1})
		}
		return nil
	}).Name("Tokenizer")
	// An Aggregate without a merge function: no combiner on the producers'
	// side (a Reduce's would count most words before the exchange), so the
	// consumers read every word at the paced rate.
	counts := stream.Aggregate(stream.KeyBy(words, func(w WordCount) string { return w.Word }),
		stream.Aggregator[WordCount, WordCount, WordCount]{
			Create: func() WordCount { return WordCount{} },
			Add_: func(w, acc WordCount) WordCount {
				limit.pace()
				return WordCount{Word: w.Word, Count: acc.Count + w.Count}
			},
			Result: func(acc WordCount) WordCount { return acc },
		}).Name("Slow count")
	stream.Map(counts, func(w WordCount) string { return fmt.Sprintf("%s %d", w.Word, w.Count) }).Name("Format").
		WriteAsText(*output).Name("Counts")
	return nil
}

// pacer holds its callers to rate calls per second in total. A pause of
// more than idleReset starts a new measurement, so a restarted attempt in
// the same process is paced too.
type pacer struct {
	rate  float64
	mu    sync.Mutex
	start time.Time
	last  time.Time
	n     float64
}

const idleReset = 200 * time.Millisecond

func newPacer(rate float64) *pacer { return &pacer{rate: rate} }

func (p *pacer) pace() {
	p.mu.Lock()
	now := time.Now()
	if p.start.IsZero() || now.Sub(p.last) > idleReset {
		p.start, p.n = now, 0
	}
	p.n++
	due := p.start.Add(time.Duration(p.n / p.rate * float64(time.Second)))
	p.last = now
	p.mu.Unlock()
	if d := time.Until(due); d > 2*time.Millisecond {
		time.Sleep(d)
		p.mu.Lock()
		p.last = time.Now()
		p.mu.Unlock()
	}
}

func buildPacedLines(env *stream.Environment, args []string) error {
	fs := flag.NewFlagSet("paced-lines", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	input := fs.String("input", "", "text file or directory")
	output := fs.String("output", "", "output directory")
	rate := fs.Float64("rate", 1000, "lines per second in each runner process")
	splitSize := fs.Int64("split-size", 4096, "split size in bytes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *input == "" || *output == "" || *rate <= 0 {
		return errors.New("usage: paced-lines --input PATH --output DIR [--rate R] [--split-size B]")
	}
	limit := newPacer(*rate)
	lines := stream.FromSource[string](env, &stream.TextFileSource{Path: *input, SplitSize: *splitSize},
		stream.SourceWatermarks{NoWatermarks: true}, "Lines")
	stream.Map(lines, func(l string) string { limit.pace(); return l }).Name("Paced").WriteAsText(*output).Name("Sink")
	return nil
}

func buildPacedNumbers(env *stream.Environment, args []string) error {
	fs := flag.NewFlagSet("paced-numbers", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	count := fs.Int64("count", 10000, "numbers")
	rate := fs.Float64("rate", 1000, "numbers per second in total")
	output := fs.String("output", "", "output directory")
	ledger := fs.String("ledger", "", "file the formatter's attempts append open and last lines to")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *output == "" || *count < 1 || *rate <= 0 {
		return errors.New("usage: paced-numbers --count N --rate R --output DIR [--ledger FILE]")
	}
	n, led := *count, *ledger
	nums := stream.Generate(env, n, func(i int64) int64 { return i }, stream.RateLimit(*rate)).Name("Paced numbers")
	formatted := stream.Process(nums.Forward(), func(ctx *stream.ProcessContext, v int64, out stream.Collector[string]) error {
		if led != "" {
			k, p := int64(ctx.SubtaskIndex()), int64(ctx.Parallelism())
			switch v {
			case k * n / p:
				if err := appendLedger(led, "open", k); err != nil {
					return err
				}
			case (k+1)*n/p - 1:
				if err := appendLedger(led, "last", k); err != nil {
					return err
				}
			}
		}
		out.Collect(fmt.Sprint(v))
		return nil
	}).Name("Format").StartNewChain()
	formatted.WriteAsText(*output).Name("Numbers")
	return nil
}

func appendLedger(path, what string, subtask int64) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s %d %d %d\n", what, subtask, os.Getpid(), time.Now().UnixNano())
	return errors.Join(err, f.Close())
}
