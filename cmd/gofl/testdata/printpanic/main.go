// Command printpanic is a test job for the log tests: an unbounded,
// rate-limited generator whose records a Print() sink writes as
// "logs-e2e-marker <i>". Once the file --gate exists, the one subtask that
// manages to remove it panics with "logs-e2e-panic" (so exactly one task
// panics, once); the job then restarts per its restart strategy.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/gofl/gofl/stream"
)

func init() { stream.RegisterJob("printpanic", build) }

func main() { stream.Main() }

func build(env *stream.Environment, args []string) error {
	fs := flag.NewFlagSet("printpanic", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	gate := fs.String("gate", "", "file whose removal makes a task panic")
	if err := fs.Parse(args); err != nil || *gate == "" {
		return errors.New("usage: printpanic --gate FILE")
	}
	g := *gate
	nums := stream.Generate(env, -1, func(i int64) int64 { return i }, stream.RateLimit(20))
	stream.Map(nums, func(i int64) string {
		if os.Remove(g) == nil {
			panic(fmt.Sprintf("logs-e2e-panic at record %d", i))
		}
		return fmt.Sprintf("logs-e2e-marker %d", i)
	}).Print()
	return nil
}
