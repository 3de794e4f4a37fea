// Command crashjob is a test job whose runner process dies in the middle
// of the job: with --mode panic a goroutine of the job panics (a panic the
// task runtime cannot recover), with --mode exit it prints a line to stderr
// and calls os.Exit(3). --print writes its marker line with Print() before
// that, so a test can look for where Print() goes. A keyed exchange
// follows, so at parallelism above 1 the consumers on other TaskManagers
// see the dead runner's connection reset. The client must see the
// panic message (or the stderr line) in the job's failure, every time.
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

func init() { stream.RegisterJob("crashjob", build) }

func main() { stream.Main() }

func build(env *stream.Environment, args []string) error {
	fs := flag.NewFlagSet("crashjob", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	mode := fs.String("mode", "panic", "panic | exit | none (just print)")
	marker := fs.String("print", "", "a line the job Print()s first")
	if err := fs.Parse(args); err != nil {
		return errors.New("usage: crashjob [--mode panic|exit|none] [--print LINE]")
	}
	m, line := *mode, *marker
	env.SetRuntimeMode(stream.Batch)
	nums := stream.Generate(env, 100, func(i int64) int64 { return i })
	out := stream.Map(nums, func(i int64) string {
		if i == 50 {
			switch m {
			case "panic":
				go func() { panic(fmt.Sprintf("crashjob: boom at record %d", i)) }()
				time.Sleep(time.Minute) // the process dies first
			case "exit":
				fmt.Fprintln(os.Stderr, "crashjob: giving up with exit status 3")
				os.Exit(3)
			}
		}
		if i == 0 && line != "" {
			return line
		}
		return fmt.Sprint(i)
	})
	// Print the marker (if any) before the exchange, then a keyed exchange
	// so the subtasks downstream of the dying runner, on other
	// TaskManagers, lose their connection to it.
	stream.Filter(out, func(s string) bool { return line != "" && s == line }).Print()
	sums := stream.KeyBy(out, func(s string) int { return len(s) % 4 }).
		Reduce(func(a, b string) string { return a })
	stream.Filter(sums, func(string) bool { return false }).Print()
	return nil
}
