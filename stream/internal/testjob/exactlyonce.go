package main

// The job of the exactly-once end-to-end tests (issue #10):
//
//	keyed-counts --count N --keys K --rate R --output DIR [--version a|b|no-count|string-count]
//
// generates 0..N-1 at R records per second in total (a replayable source:
// its position is checkpointed), rebalances them over the network, keys
// each number by n mod K and keeps a running count per key in keyed
// ValueState, and writes "key count" for every record through the
// transactional WriteAsText. Exactly once means each key k has exactly the
// lines "k 1" .. "k c(k)", c(k) the numbers below N with n mod K = k: a
// lost state restarts a count (a duplicate "k 1"), a replay without the
// transactional sink duplicates lines, a lost record leaves a gap.
//
// --version picks a version of the job binary for the upgrade tests: b
// adds an operator (uid "annotate", which leaves the lines as they are)
// after the count; no-count drops the stateful count (uid "count"), so a
// savepoint of a or b has state for an operator it no longer has;
// string-count keeps the count (same uid and state name) as a string, a
// state type a savepoint of a cannot restore.

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/gofl/gofl/stream"
)

func init() {
	stream.RegisterJob("keyed-counts", buildKeyedCounts)
}

var (
	keyedCount       = stream.NewValueState[int64]("count")
	keyedStringCount = stream.NewValueState[string]("count")
)

func buildKeyedCounts(env *stream.Environment, args []string) error {
	fs := flag.NewFlagSet("keyed-counts", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	count := fs.Int64("count", 10000, "numbers")
	keys := fs.Int64("keys", 16, "keys")
	rate := fs.Float64("rate", 1000, "numbers per second in total")
	output := fs.String("output", "", "output directory")
	version := fs.String("version", "a", "job version: a, b (adds an operator), no-count (drops the count) or string-count (its state as a string)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *output == "" || *count < 1 || *keys < 1 || *rate <= 0 || (*version != "a" && *version != "b" && *version != "no-count" && *version != "string-count") {
		return errors.New("usage: keyed-counts --count N --keys K --rate R --output DIR [--version a|b|no-count|string-count]")
	}
	k := *keys
	nums := stream.Generate(env, *count, func(i int64) int64 { return i }, stream.RateLimit(*rate)).Name("Numbers").Uid("numbers")
	if *version == "no-count" {
		stream.Map(nums, func(n int64) string { return fmt.Sprintf("%d %d", n%k, n) }).Name("Format").Uid("format").
			WriteAsText(*output).Name("Counts").Uid("counts")
		return nil
	}
	asString := *version == "string-count"
	counted := stream.KeyedProcess(stream.KeyBy(nums.Rebalance(), func(n int64) int64 { return n % k }),
		stream.KeyedProcessFunction[int64, int64, string]{
			ProcessElement: func(ctx *stream.KeyedContext[int64], n int64, out stream.Collector[string]) error {
				if asString {
					c, _ := keyedStringCount.Value(ctx)
					c += "+"
					keyedStringCount.Update(ctx, c)
					out.Collect(fmt.Sprintf("%d %d", ctx.CurrentKey(), len(c)))
					return nil
				}
				c, _ := keyedCount.Value(ctx)
				c++
				keyedCount.Update(ctx, c)
				out.Collect(fmt.Sprintf("%d %d", ctx.CurrentKey(), c))
				return nil
			},
		}).Name("Count").Uid("count")
	if *version == "b" {
		counted = stream.Map(counted, func(line string) string { return line }).Name("Annotate").Uid("annotate")
	}
	counted.WriteAsText(*output).Name("Counts").Uid("counts")
	return nil
}
