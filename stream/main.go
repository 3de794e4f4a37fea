package stream

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
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gofl/gofl/internal/gcfloor"
	_ "github.com/gofl/gofl/internal/logging" // millisecond timestamps
	"github.com/gofl/gofl/internal/profiling"
	"github.com/gofl/gofl/internal/tlsconf"
	"github.com/gofl/gofl/internal/version"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/taskmanager/network"
	"github.com/gofl/gofl/taskmanager/runner"
)

// Environment variables of a job binary.
const (
	// EnvRole selects the role (see Main).
	EnvRole = runner.EnvRole
	// RolePlan prints the JobGraph; RoleDriver is the application driver.
	RolePlan   = "plan"
	RoleDriver = "driver"
	// EnvParallelism sets the default parallelism the builder starts from.
	EnvParallelism = runner.EnvParallelism
)

// Main is the entry point of a job binary; call it from main after the
// jobs are registered (RegisterJob, normally in init). It does not return.
// The arguments are [JOB] [job args...]: JOB names a registered job and may
// be left out when the binary registers exactly one. By GOFL_ROLE:
//
//   - runner (set by a TaskManager): re-plan the job from the program
//     arguments, check the fingerprint in the handshake, serve the job's
//     tasks with the network data plane on the data port the TaskManager
//     handed over;
//   - driver (set by an application cluster's JobManager): build the job
//     (every registered job when several are and none is named) and submit
//     it to that JobManager (RunDriver);
//   - plan: print the JobGraph as protobuf JSON to stdout (what `gofl run`
//     submits), ProgramArgs set to JOB and its arguments;
//   - unset: run the job in this process (Execute), for development.
//
// GOFL_PARALLELISM sets the default parallelism in every role.
func Main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// ServeRole runs the role GOFL_ROLE names and exits, as Main does; with no
// role set it returns. A program that drives its jobs itself (ExecuteOn)
// calls it first thing in main, or a test binary in TestMain, to be its own
// job binary, as bigmachine's workers are the driver's binary.
func ServeRole() {
	if os.Getenv(EnvRole) != "" {
		Main()
	}
}

func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	switch role := os.Getenv(EnvRole); role {
	case runner.RoleRunner:
		err = serveRunner(ctx, args, stderr)
	case RolePlan:
		err = printPlan(args, stdout)
	case RoleDriver:
		err = runDriverFromEnv(ctx, args, stderr)
	case "":
		var name string
		if name, args, err = selectJob(args); err == nil {
			var res *JobResult
			if res, err = RunJob(ctx, name, args); err == nil {
				fmt.Fprintf(stderr, "job %q finished in %v\n", res.Name, res.Duration.Round(1e6))
			}
		}
	default:
		err = fmt.Errorf("unknown %s %q (want %s, %s or none)", EnvRole, role, runner.RoleRunner, RolePlan)
	}
	if err != nil {
		fmt.Fprintf(stderr, "gofl job: %v\n", err)
		return 1
	}
	return 0
}

// selectJob splits the arguments into the job's name and its arguments.
func selectJob(args []string) (string, []string, error) {
	jobs := Jobs()
	if len(args) > 0 {
		for _, j := range jobs {
			if j == args[0] {
				return j, args[1:], nil
			}
		}
	}
	switch len(jobs) {
	case 0:
		return "", nil, errors.New("this binary registers no job (call stream.RegisterJob in an init function)")
	case 1:
		return jobs[0], args, nil
	}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return "", nil, fmt.Errorf("unknown job %q: this binary registers %s", args[0], strings.Join(jobs, ", "))
	}
	return "", nil, fmt.Errorf("this binary registers several jobs (%s); name one as the first argument", strings.Join(jobs, ", "))
}

// printPlan writes the job's JobGraph as protobuf JSON.
func printPlan(args []string, stdout io.Writer) error {
	name, rest, err := selectJob(args)
	if err != nil {
		return err
	}
	p, err := PlanJob(name, rest)
	if err != nil {
		return err
	}
	// The plan role runs once, as `gofl run` submits the job.
	if err := p.prepareOutputs(context.Background()); err != nil {
		return err
	}
	g := *p.Graph
	g.ProgramArgs = append([]string{name}, rest...)
	b, err := protojson.MarshalOptions{Multiline: true}.Marshal(jobgraph.ToProto(&g))
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
}

// runnerHeapFloor is the heap goal floor of a runner (gcfloor): a task
// turns its input into short-lived values (every line a string, every
// Kafka record a record and its bytes) while its live heap stays small
// (a batch job's managed memory is off the heap; a streaming job's keyed
// state often is small), so at the default GC percent it would collect
// every few megabytes: about a sixth of the runners' CPU in wordcount, a
// tenth in kafka-counts. It costs a runner up to ~30 MiB more heap; a
// live heap past half of it (large keyed state) is paced as before.
const runnerHeapFloor = 32 << 20

// serveRunner is the runner role: args are the JobGraph's ProgramArgs.
func serveRunner(ctx context.Context, args []string, stderr io.Writer) error {
	log := zerolog.New(stderr).With().Timestamp().Str("role", "runner").Logger()
	name, rest, err := selectJob(args)
	if err != nil {
		return err
	}
	p, err := PlanJob(name, rest)
	if err != nil {
		return err
	}
	lis, addr, err := runner.DataListener()
	if err != nil {
		return err
	}
	cfg := network.DefaultConfig()
	// Internal TLS: the TaskManager hands its certificate over as private
	// files (tlsconf.WriteFiles).
	if m, err := tlsconf.FromEnv(); err != nil {
		return err
	} else if m != nil {
		if cfg.TLS, err = m.Config(); err != nil {
			return fmt.Errorf("runner: internal TLS: %w", err)
		}
	}
	localDir := ""
	if wd, err := os.Getwd(); err == nil {
		cfg.SpillDir = wd // the runner's directory under the TaskManager's work dir
		localDir = wd
	}
	shuffle, err := network.NewShuffleEnvironment(cfg, log)
	if err != nil {
		return err
	}
	if lis != nil {
		err = shuffle.StartListener(lis)
	} else {
		err = shuffle.Start("127.0.0.1:0")
		addr = shuffle.Addr()
	}
	if err != nil {
		shuffle.Close()
		return err
	}
	log.Info().Str("job", name).Str("fingerprint", p.Graph.Fingerprint).Str("data_address", addr).Msg("serving the job's tasks")
	defer profiling.Start("runner")()
	defer gcfloor.Set(runnerHeapFloor)()
	ex := newClusterExecutor(p, shuffle, addr, log)
	ex.localDir = localDir // LSM state backends live under the runner's directory too
	return runner.ServeFromEnv(ctx, runner.Info{Fingerprint: p.Graph.Fingerprint, SDKVersion: version.Version}, ex, log)
}
