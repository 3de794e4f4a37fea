// Command testjob is a job binary for the end-to-end tests: a streaming
// job whose records cross PIPELINED network exchanges between TaskManagers.
//
//	pipelined-count --count N --keys K --output DIR
//
// generates 0..N-1 at the default parallelism, rebalances, keys each
// number by n mod K, keeps a running sum and count per key (one result per
// update), and writes the final line per key plus every update into part
// files: "key sum count".
//
//	metered-numbers --count N [--rate R] --output DIR
//
// passes N numbers, R a second, with event timestamps EventTimeBase+n to
// a Process "Meter" that counts them into the user counter "seen", records
// them in the histogram "values" and shows the last in the gauge
// "lastValue", then keeps running: the source goes on, filtered out.
//
//	slow-sink [--delay D] --output DIR
//
// generates numbers as fast as it can, without end, and rebalances them to
// a sink that takes D per record: the source must be backpressured with
// bounded memory.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/gofl/gofl/stream"
)

// Sum is a running sum per key.
type Sum struct {
	Key   int64
	Sum   int64
	Count int64
}

func init() {
	stream.RegisterJob("pipelined-count", build)
	stream.RegisterJob("slow-sink", buildSlowSink)
	stream.RegisterJob("held-numbers", buildHeldNumbers)
	stream.RegisterJob("metered-numbers", buildMeteredNumbers)
}

// EventTimeBase is the event time of metered-numbers' first number.
const EventTimeBase = 1_700_000_000_000

func buildMeteredNumbers(env *stream.Environment, args []string) error {
	fs := flag.NewFlagSet("metered-numbers", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	count := fs.Int64("count", 1000, "numbers passed on")
	rate := fs.Float64("rate", 1000, "numbers a second")
	output := fs.String("output", "", "output directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *output == "" || *count < 1 {
		return errors.New("usage: metered-numbers --count N [--rate R] --output DIR")
	}
	n := *count
	// One source subtask: its watermark, the last number's time, reaches
	// every subtask downstream.
	nums := stream.Generate(env, -1, func(i int64) int64 { return i }, stream.RateLimit(*rate)).Name("Numbers").SetParallelism(1)
	passed := stream.Filter(nums, func(v int64) bool { return v < n }).Name("First numbers").SetParallelism(1).
		AssignTimestampsAndWatermarks(stream.MonotonousTimestamps(func(v int64) int64 { return EventTimeBase + v })).SetParallelism(1)
	metered := stream.Process(passed.Rebalance(), func(ctx *stream.ProcessContext, v int64, out stream.Collector[int64]) error {
		g := ctx.MetricGroup()
		g.Counter("seen").Inc()
		g.Histogram("values").Update(v)
		last := float64(v)
		g.Gauge("lastValue", func() float64 { return last })
		out.Collect(v)
		return nil
	}).Name("Meter")
	stream.Map(metered, func(v int64) string { return fmt.Sprint(v) }).Name("Format").WriteAsText(*output).Name("Sink")
	return nil
}

// buildHeldNumbers passes --count numbers to its sink and then keeps
// running (its source goes on, filtered out), so that a test reads the
// task metrics of a running job against a known record count.
func buildHeldNumbers(env *stream.Environment, args []string) error {
	fs := flag.NewFlagSet("held-numbers", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	count := fs.Int64("count", 1000, "numbers passed on")
	output := fs.String("output", "", "output directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *output == "" || *count < 1 {
		return errors.New("usage: held-numbers --count N --output DIR")
	}
	n := *count
	nums := stream.Generate(env, -1, func(i int64) int64 { return i }, stream.RateLimit(20000)).Name("Numbers")
	passed := stream.Filter(nums, func(v int64) bool { return v < n }).Name("First numbers")
	stream.Map(passed.Rebalance(), func(v int64) string { return fmt.Sprint(v) }).Name("Format").WriteAsText(*output).Name("Sink")
	return nil
}

func buildSlowSink(env *stream.Environment, args []string) error {
	fs := flag.NewFlagSet("slow-sink", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	delay := fs.Duration("delay", time.Millisecond, "time the sink takes per record")
	output := fs.String("output", "", "output directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *output == "" {
		return errors.New("usage: slow-sink [--delay D] --output DIR")
	}
	d := *delay
	fast := stream.Generate(env, -1, func(i int64) string { return fmt.Sprintf("%096d", i) }).Name("Fast source")
	slow := stream.Map(fast.Rebalance(), func(s string) string { time.Sleep(d); return s }).Name("Slow")
	slow.WriteAsText(*output).Name("Sink")
	return nil
}

func main() { stream.Main() }

func build(env *stream.Environment, args []string) error {
	fs := flag.NewFlagSet("pipelined-count", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	count := fs.Int64("count", 10000, "numbers to generate")
	keys := fs.Int64("keys", 16, "number of keys")
	output := fs.String("output", "", "output directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *output == "" || *keys < 1 {
		return errors.New("usage: pipelined-count [--count N] [--keys K] --output DIR")
	}
	k := *keys
	nums := stream.Generate(env, *count, func(i int64) Sum { return Sum{Key: i % k, Sum: i, Count: 1} }).Name("Numbers")
	// Event time, so watermarks cross the network too.
	nums = nums.AssignTimestampsAndWatermarks(stream.BoundedOutOfOrderness(time.Millisecond, func(s Sum) int64 { return s.Sum })).
		Rebalance()
	sums := stream.KeyBy(nums, func(s Sum) int64 { return s.Key }).
		Reduce(func(a, b Sum) Sum { return Sum{Key: a.Key, Sum: a.Sum + b.Sum, Count: a.Count + b.Count} }).Name("Sum")
	stream.Map(sums, func(s Sum) string { return fmt.Sprintf("%d %d %d", s.Key, s.Sum, s.Count) }).Name("Format").
		WriteAsText(*output).Name("Sums")
	return nil
}
