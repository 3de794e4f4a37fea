// Command gatedcount is a test job for the deployment e2e tests: a bounded
// generator of 0..n-1 that stops at n/2 until the file --gate exists (so a
// test can act while the job certainly runs, then let it finish), and the
// sum of the numbers per residue mod 4, written as "r sum" lines into part
// files in --output.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gofl/gofl/stream"
)

// Sum is a residue and the sum of its numbers.
type Sum struct {
	R, Sum int64
}

func init() { stream.RegisterJob("gatedcount", build) }

func main() { stream.Main() }

func build(env *stream.Environment, args []string) error {
	fs := flag.NewFlagSet("gatedcount", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	n := fs.Int64("n", 1000, "how many numbers")
	gate := fs.String("gate", "", "file whose existence lets the generator pass n/2")
	output := fs.String("output", "", "output directory")
	if err := fs.Parse(args); err != nil || *gate == "" || *output == "" {
		return errors.New("usage: gatedcount --gate FILE --output DIR [--n N]")
	}
	g, half := *gate, *n/2
	env.SetRuntimeMode(stream.Batch)
	nums := stream.Generate(env, *n, func(i int64) Sum {
		if i == half {
			for {
				if _, err := os.Stat(g); err == nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		return Sum{R: i % 4, Sum: i}
	})
	sums := stream.KeyBy(nums, func(s Sum) int64 { return s.R }).
		Reduce(func(a, b Sum) Sum { return Sum{R: a.R, Sum: a.Sum + b.Sum} })
	stream.Map(sums, func(s Sum) string { return fmt.Sprintf("%d %d", s.R, s.Sum) }).WriteAsText(*output)
	return nil
}
