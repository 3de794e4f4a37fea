package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/internal/gcfloor"
	"github.com/gofl/gofl/internal/profiling"
	"github.com/gofl/gofl/internal/version"
	"github.com/gofl/gofl/taskmanager/runner"
)

func main() {
	if runner.IsRunner() {
		// Started by a TaskManager as a job runner: gofl is its own job
		// binary for jobs made of built-in tasks.
		os.Exit(serveRunner())
	}
	gcfloor.Set(controlHeapFloor) // for the process's life
	stopProfile := profiling.Start(processRole(os.Args))
	code := run(os.Args, os.Stdout, os.Stderr, os.Environ)
	stopProfile()
	os.Exit(code)
}

// processRole names the process in its profiles: the JobManager and
// TaskManager are started as "gofl jobmanager|taskmanager ..."; anything
// else is a client.
func processRole(args []string) string {
	if len(args) > 1 && (args[1] == "jobmanager" || args[1] == "taskmanager") {
		return args[1]
	}
	return "client"
}

// controlHeapFloor is the heap goal floor (gcfloor) of the client, the
// JobManager and the TaskManager: their live heap is a few MiB, which at
// the default GC percent is collected every couple of MiB allocated,
// 2-4 times in a per-job run's start-up alone (decoding the JobGraph,
// the configuration, TLS and gRPC set-up). It costs such a process up to
// ~14 MiB more heap; a live heap past half of it is paced as before.
const controlHeapFloor = 16 << 20

func serveRunner() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := zerolog.New(os.Stderr).With().Timestamp().Str("role", "runner").Logger()
	if err := runner.ServeFromEnv(ctx, runner.Info{SDKVersion: version.Version}, runner.NewBuiltinExecutor(), log); err != nil {
		log.Error().Err(err).Msg("runner failed")
		return 1
	}
	return 0
}

// run executes the CLI and returns the process exit code. Errors, including
// the full list of configuration problems, go to stderr.
func run(args []string, stdout, stderr io.Writer, environ func() []string) int {
	app := newApp()
	app.Writer, app.ErrWriter = stdout, stderr
	app.Metadata[environKey] = environ
	if err := app.Run(normalizeArgs(args)); err != nil {
		fmt.Fprintf(stderr, "gofl: %v\n", err)
		if ee := (*exitError)(nil); errors.As(err, &ee) {
			return ee.code
		}
		return 1
	}
	return 0
}

// normalizeArgs splits Flink-style "-Dkey=value" into "-D" "key=value", which
// Go's flag parser would otherwise reject as an unknown flag "-Dkey".
func normalizeArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if i > 0 && len(a) > 2 && strings.HasPrefix(a, "-D") {
			out = append(out, "-D", a[2:])
			continue
		}
		out = append(out, a)
	}
	return out
}
