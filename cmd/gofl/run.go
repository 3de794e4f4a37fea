package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/storage"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run a job written with the SDK: on a session, or on a per-job or application cluster of its own",
		ArgsUsage: "JOB [job args...]",
		Description: `JOB is a job binary built with gofl's SDK (its main calls stream.Main) or the
directory of its Go package, which is built first. Everything after JOB goes
to the job. TaskManagers start JOB as the job's runner in their own working
directory: give the job absolute paths (relative ones are rejected).

-m selects the deployment mode (Flink's execution.target):
   session (default)  plan locally (JOB with GOFL_ROLE=plan), upload JOB to the
                      JobManager's blob store (skipped when it is there) and
                      submit, to --jobmanager, to -c CLUSTER_ID, else to the
                      remembered session (gofl session start), else to
                      rest.address:rest.port. -m HOST:PORT is session mode on
                      that JobManager, as Flink's -m.
   per-job            plan locally, stage gofl (not for -t local, which runs
                      it in place), JOB (content-addressed blob
                      cache <staging.dir>/.gofl/blobs/), the configuration and
                      the JobGraph (<staging.dir>/.gofl/<cluster-id>/), deploy a
                      cluster through the provider (-t) that runs only this job
                      and goes away, staging included, when it ends.
   application        stage gofl, JOB and the configuration only (no local
                      plan); the JobManager runs JOB in application-driver
                      role, which builds and submits its job(s); the cluster
                      ends with the last of them.
Unless --detached, gofl follows the job(s) until they end; the exit code is
non-zero unless every job FINISHED.

` + progressHelp + `

Ctrl-C (or --timeout expiring) detaches: the job and its per-job or
application cluster go on, and gofl prints how to cancel them; the exit code
is 130 (1 after --timeout). With -sae (--shutdownOnAttachedExit) it cancels
the job(s) and shuts down a per-job or application cluster instead. A second
Ctrl-C exits at once.

The job's default parallelism is -p, else parallelism.default (-D, the
configuration, or the session's own when it was started with one). To run
locally at parallelism N without a cluster, run the binary itself:
GOFL_PARALLELISM=N JOB [job args...].

Print() writes to the runner's stdout on the TaskManagers, which goes to the
TaskManager's log and the runner's logs; gofl logs -c CLUSTER --job JOBID
reads them, also after the cluster is gone (archived; the local provider also
keeps each process's log under logs/<cluster-id>/ in provider.local.dir, which
gofl prints); Collect() or WriteAsText bring results back. WriteAsText refuses a
non-empty output directory unless the
job asks for stream.Overwrite. Relative paths in job arguments are rejected:
give absolute paths or URIs.

To join two inputs in batch mode: stream.InnerJoin, stream.LeftOuterJoin or
stream.CoGroup over two KeyBy streams (stream.Join is the windowed join). They
sort both sides in managed memory (taskmanager.memory.managed.size) and spill
to io.tmp.dirs past it.

Examples:
   gofl run ./examples/wordcount --input /data/text --output /tmp/counts
   gofl run -m localhost:8081 -p 4 --detached bin/wordcount --input /data/text --output /tmp/counts
   gofl run -m session -c session-3f1c5a8e0b7d bin/wordcount --input /data/text --output /tmp/counts
   gofl run -m per-job -t local bin/wordcount --input /data/text --output /tmp/counts
   gofl run -m application -t local bin/wordcount --input /data/text --output /tmp/counts
   gofl run -m application -s hdfs://nn:9000/savepoints/savepoint-3f1c5a-0a1b2c3d4e5f bin/counter-v2`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "mode", Aliases: []string{"m"}, Value: conf.ModeSession,
				Usage: "deployment `MODE`: session, per-job or application; or a JobManager HOST:PORT (session mode there)"},
			&cli.StringFlag{Name: flagJobManager, Usage: "session mode: JobManager REST endpoint `HOST:PORT` or http(s) URL"},
			clusterFlag(),
			targetFlag(),
			&cli.IntFlag{Name: "parallelism", Aliases: []string{"p"}, Usage: "default parallelism of the job's operators (`N`; default: parallelism.default when set, else the job's own)"},
			&cli.BoolFlag{Name: "detached", Aliases: []string{"d"}, Usage: "return once the job is submitted (the cluster deployed)"},
			&cli.BoolFlag{Name: flagQuiet, Aliases: []string{"q"}, Usage: "attached: no progress display (records, rates, progress bars); only state changes and the result"},
			&cli.DurationFlag{Name: "timeout", Value: 24 * time.Hour, Usage: "unless --detached, stop following the job after `DURATION`: detach, or with -sae cancel it"},
			&cli.BoolFlag{Name: flagShutdownOnAttachedExit, Aliases: []string{"sae"},
				Usage: "attached: on Ctrl-C or --timeout cancel the job(s) and shut a per-job or application cluster down, instead of detaching"},
			&cli.StringFlag{Name: "fromSavepoint", Aliases: []string{"s"}, Usage: "restore the job's state from the savepoint or retained checkpoint at `PATH` (execution.savepoint.path)"},
			&cli.BoolFlag{Name: "allowNonRestoredState", Aliases: []string{"n"}, Usage: "with -s: skip savepoint state of operators the job no longer has (execution.savepoint.ignore-unclaimed-state)"},
		},
		Action: runRun,
	}
}

func runRun(c *cli.Context) error {
	if c.NArg() == 0 {
		return errors.New("run: expected JOB, a job binary or the directory of its Go package")
	}
	if c.IsSet("parallelism") && c.Int("parallelism") < 1 {
		return fmt.Errorf("run: parallelism %d must be at least 1", c.Int("parallelism"))
	}
	if err := checkJobArgs(c.Args().Tail()); err != nil {
		return err
	}
	ctx, release := watchInterrupts(c.Context, c.App.ErrWriter)
	defer release()
	c.Context = ctx
	switch mode := c.String("mode"); mode {
	case conf.ModePerJob, conf.ModeApplication:
		return runOwnCluster(c, mode)
	case conf.ModeSession, "":
		return runSession(c, "")
	default:
		if strings.ContainsAny(mode, ":/") {
			return runSession(c, mode) // Flink's -m HOST:PORT
		}
		return fmt.Errorf("run: -m %q: want session, per-job, application or a JobManager HOST:PORT", mode)
	}
}

// sessionClient finds the session: --jobmanager, -m HOST:PORT, -c, the
// remembered session, else the configured REST address.
func sessionClient(c *cli.Context, addr string) (*client.Client, error) {
	if addr == "" {
		addr = c.String(flagJobManager)
	}
	if addr == "" && c.String(flagCluster) == "" {
		if st, err := loadSessions(c); err == nil && st.Latest != "" {
			if rec, ok := st.find(st.Latest); ok {
				cfg, log, err := setup(c)
				if err != nil {
					return nil, err
				}
				if a, err := clusterRESTAddress(c, cfg, log, rec.ClusterID); err == nil {
					addr = a
				}
			}
		}
	}
	if addr != "" {
		cfg, _, err := setup(c)
		if err != nil {
			return nil, err
		}
		opts, err := client.ConfigOptions(cfg)
		if err != nil {
			return nil, err
		}
		return client.New(addr, opts...)
	}
	return restClient(c)
}

func runSession(c *cli.Context, addr string) error {
	start := time.Now()
	job, jobArgs := c.Args().First(), c.Args().Tail()
	bin, cleanup, err := jobBinary(c.Context, job)
	if err != nil {
		return err
	}
	defer cleanup()
	var sessionPar int
	if rec, ok := targetSession(c, addr); ok {
		sessionPar = rec.Parallelism
	}
	jg, err := planJob(c, bin, job, jobArgs, sessionPar)
	if err != nil {
		return err
	}
	cl, err := sessionClient(c, addr)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if jg.BinaryKey, err = uploadJobBinary(c, cl, bin, job); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if len(jg.ProgramArgs) == 0 {
		jg.ProgramArgs = jobArgs
	}
	if err := attachJobTokens(c, cl, jg); err != nil {
		return fmt.Errorf("run: %w", err)
	}
	id, err := cl.SubmitJob(c.Context, jg)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	fmt.Fprintf(c.App.Writer, "Job %s (%s) submitted to %s in %v\n", id, jg.Name, cl.Address(), time.Since(start).Round(time.Millisecond))
	if c.Bool("detached") {
		return nil
	}
	err = followJob(c, cl, jg, id, nil)
	if stoppedEarly(err) {
		return attachedRun{cl: cl, jobs: func(context.Context) []string { return []string{id} }}.leave(c, err)
	}
	if err != nil { // the runners' logs, while the session lives
		where := "-m " + cl.Address()
		if cid := c.String(flagCluster); cid != "" {
			where = "-c " + cid
		}
		fmt.Fprintf(c.App.ErrWriter, "Logs: gofl logs %s --job %s\n", where, id)
	}
	return err
}

// jobBinary returns the executable for JOB: JOB itself, or the package
// directory JOB built into a temporary directory (removed by cleanup).
func jobBinary(ctx context.Context, job string) (string, func(), error) {
	nop := func() {}
	fi, err := os.Stat(job)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", nop, fmt.Errorf("run: JOB %s does not exist (want a job binary or a Go package directory)", job)
		}
		return "", nop, fmt.Errorf("run: %w", err)
	}
	if !fi.IsDir() {
		if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			return "", nop, fmt.Errorf("run: JOB %s is not an executable file (want a job binary or a Go package directory)", job)
		}
		return job, nop, nil
	}
	dir, err := os.MkdirTemp("", "gofl-run-")
	if err != nil {
		return "", nop, fmt.Errorf("run: %w", err)
	}
	cleanup := func() { os.RemoveAll(dir) }
	out := filepath.Join(dir, filepath.Base(filepath.Clean(job)))
	if abs, err := filepath.Abs(job); err == nil {
		out = filepath.Join(dir, filepath.Base(abs))
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", out, ".")
	build.Dir = job
	if b, err := build.CombinedOutput(); err != nil {
		cleanup()
		return "", nop, fmt.Errorf("run: building the Go package in %s: %v\n%s", job, err, bytes.TrimSpace(b))
	}
	return out, cleanup, nil
}

// targetSession is the remembered session a session-mode run goes to: -c,
// else the latest, unless an address (-m HOST:PORT, --jobmanager) is given.
func targetSession(c *cli.Context, addr string) (sessionRecord, bool) {
	if addr != "" || c.String(flagJobManager) != "" {
		return sessionRecord{}, false
	}
	st, err := loadSessions(c)
	if err != nil {
		return sessionRecord{}, false
	}
	id := c.String(flagCluster)
	if id == "" {
		id = st.Latest
	}
	return st.find(id)
}

// defaultParallelism is the job's default parallelism: -p, else
// parallelism.default where the client's configuration sets it (-D, file,
// environment), else fallback (the session cluster's), else 0 (the job's
// own default).
func defaultParallelism(c *cli.Context, fallback int) (int, error) {
	if c.IsSet("parallelism") {
		return c.Int("parallelism"), nil
	}
	cfg, _, err := setup(c)
	if err != nil {
		return 0, err
	}
	if cfg.IsSet(conf.DefaultParallelism.Key()) {
		return conf.DefaultParallelism.Get(cfg), nil
	}
	return fallback, nil
}

// planJob runs the binary in plan role and parses the JobGraph it prints.
// sessionPar is the parallelism.default of the session it goes to (0: none).
func planJob(c *cli.Context, bin, job string, args []string, sessionPar int) (*jobgraph.JobGraph, error) {
	plan, err := planner(c, bin, args, sessionPar)
	if err != nil {
		return nil, err
	}
	return plan(c.Context)
}

// planner reads what planning needs from c (the configuration, which may
// log warnings) and returns the planning itself, which touches neither c's
// writers nor its configuration: it may run on another goroutine.
func planner(c *cli.Context, bin string, args []string, sessionPar int) (func(context.Context) (*jobgraph.JobGraph, error), error) {
	par, err := defaultParallelism(c, sessionPar)
	if err != nil {
		return nil, err
	}
	cfg, _, err := setup(c)
	if err != nil {
		return nil, err
	}
	opts := client.PlanOptions{Parallelism: par, SavepointPath: c.String("fromSavepoint"), Env: storage.ClientEnv(cfg)}
	restore := restoreSettings(c)
	return func(ctx context.Context) (*jobgraph.JobGraph, error) {
		jg, err := client.PlanJob(ctx, bin, args, opts)
		if err != nil {
			return nil, fmt.Errorf("run: %w", err)
		}
		for k, v := range restore {
			if jg.Config == nil {
				jg.Config = map[string]string{}
			}
			jg.Config[k] = v
		}
		return jg, nil
	}, nil
}

// restoreSettings are -s and --allowNonRestoredState as the configuration
// keys the JobManager reads when the job starts.
func restoreSettings(c *cli.Context) map[string]string {
	m := map[string]string{}
	if p := c.String("fromSavepoint"); p != "" {
		m[conf.SavepointPath.Key()] = p
	}
	if c.Bool("allowNonRestoredState") {
		m[conf.SavepointIgnoreUnclaimedState.Key()] = "true"
	}
	return m
}

// pathFlag matches job flags that name files: --input, --output, --path,
// --dir, --file and the like (also as a suffix: --checkpoint-dir).
var pathFlag = regexp.MustCompile(`(?i)^--?(?:[a-z0-9]+[-_.])*(?:in|input|inputs|out|output|outputs|path|paths|dir|directory|file|files)$`)

// checkJobArgs rejects relative local paths among the job's arguments: the
// runners start in their TaskManagers' working directories, where a
// relative path names other files (on a per-job or application cluster,
// ones removed with the cluster). A path is an argument starting with "./"
// or "../", or the value of a path-like flag (pathFlag) that is neither
// absolute nor a URI.
func checkJobArgs(args []string) error {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			continue
		}
		name, val, inline := strings.Cut(a, "=")
		switch {
		case strings.HasPrefix(a, "-") && pathFlag.MatchString(name):
			if !inline {
				if i+1 >= len(args) {
					continue
				}
				i++
				val = args[i]
			}
		case strings.HasPrefix(a, "./") || strings.HasPrefix(a, "../"):
			name, val = "", a
		default:
			continue
		}
		if val == "" || filepath.IsAbs(val) || strings.Contains(val, "://") || strings.HasPrefix(val, "-") {
			continue
		}
		abs, _ := filepath.Abs(val)
		what := "job argument " + val
		if name != "" {
			what = fmt.Sprintf("job argument %s %s", name, val)
		}
		return fmt.Errorf("run: %s is a relative path, but the job runs in its TaskManagers' working directories, not here; give an absolute path (%s) or a URI (file://, hdfs://)", what, abs)
	}
	return nil
}

// attachJobTokens ships the caller's own HDFS delegation tokens with a job
// submitted to a session, when its configuration has a Kerberos login
// (client.AttachJobTokens).
func attachJobTokens(c *cli.Context, cl *client.Client, jg *jobgraph.JobGraph) error {
	cfg, log, err := setup(c)
	if err != nil {
		return err
	}
	return client.AttachJobTokens(c.Context, cfg, cl, jg, log)
}
