package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/rpc/restapi"
)

const flagJobManager = "jobmanager"

// jobManagerFlag is Flink's -m/--jobmanager: the REST endpoint to talk to.
func jobManagerFlag() cli.Flag {
	return &cli.StringFlag{Name: flagJobManager, Aliases: []string{"m"},
		Usage: "JobManager REST endpoint `HOST:PORT` or http(s) URL (default: rest.address:rest.port from the configuration)"}
}

func listCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list the jobs of a running cluster",
		Description: `Asks the JobManager's REST API (GET /jobs/overview) for every job it knows,
running and finished (the bounded history), and prints a table, newest
first: job ID, name, state, start time, duration, and tasks as running/total.

Examples:
   gofl list
   gofl list --jobmanager jm.example:8081
   gofl list -m https://proxy.example/gofl
   gofl list -D rest.port=9091
   gofl list -c session-3f1c5a8e0b7d`,
		Flags:  []cli.Flag{jobManagerFlag(), clusterFlag(), targetFlag()},
		Action: runList,
	}
}

func infoCommand() *cli.Command {
	return &cli.Command{
		Name:      "info",
		Usage:     "show a job's state, vertices and latest exceptions",
		ArgsUsage: "JOBID",
		Description: `Prints one job's details from the JobManager's REST API: its state, type,
start time and duration; each vertex with its parallelism, status and how
many subtasks are in each execution state; and the newest entries of its
exception history.

Examples:
   gofl info 3f1c5a8e0b7d4e2a9c6f1b0d8e7a5c43
   gofl info --exceptions 20 3f1c5a8e0b7d4e2a9c6f1b0d8e7a5c43
   gofl info -m jm.example:8081 3f1c5a8e0b7d4e2a9c6f1b0d8e7a5c43`,
		Flags: []cli.Flag{
			jobManagerFlag(), clusterFlag(), targetFlag(),
			&cli.IntFlag{Name: "exceptions", Value: 5, Usage: "show at most `N` of the newest exceptions"},
		},
		Action: runInfo,
	}
}

func cancelCommand() *cli.Command {
	return &cli.Command{
		Name:      "cancel",
		Usage:     "cancel a running job",
		ArgsUsage: "JOBID",
		Description: `Asks the JobManager to cancel the job (PATCH /jobs/JOBID?mode=cancel) and
returns once cancelling started. With --wait it waits until the job is
CANCELED (or otherwise terminal). Cancelling a job that is already
cancelling is fine; a finished, failed or cancelled job cannot be cancelled.

Examples:
   gofl cancel 3f1c5a8e0b7d4e2a9c6f1b0d8e7a5c43
   gofl cancel --wait --timeout 1m 3f1c5a8e0b7d4e2a9c6f1b0d8e7a5c43
   gofl cancel -m jm.example:8081 3f1c5a8e0b7d4e2a9c6f1b0d8e7a5c43`,
		Flags: []cli.Flag{
			jobManagerFlag(), clusterFlag(), targetFlag(),
			&cli.BoolFlag{Name: "wait", Usage: "wait until the job is CANCELED"},
			&cli.DurationFlag{Name: "timeout", Value: time.Minute, Usage: "give up waiting after `DURATION` (with --wait)"},
		},
		Action: runCancel,
	}
}

// restClient builds the REST client for --jobmanager, or for rest.address
// and rest.port from the configuration.
func restClient(c *cli.Context) (*client.Client, error) {
	cfg, _, err := setup(c)
	if err != nil {
		return nil, err
	}
	addr := c.String(flagJobManager)
	if id := c.String(flagCluster); id != "" && addr == "" {
		_, log, _ := setup(c)
		if addr, err = clusterRESTAddress(c, cfg, log, id); err != nil {
			return nil, err
		}
	}
	if addr == "" {
		addr = net.JoinHostPort(conf.RestAddress.Get(cfg), strconv.Itoa(conf.RestPort.Get(cfg)))
	}
	opts, err := client.ConfigOptions(cfg)
	if err != nil {
		return nil, err
	}
	return client.New(addr, opts...)
}

// jobIDArg returns the single JOBID argument.
func jobIDArg(c *cli.Context) (string, error) {
	if c.NArg() != 1 || strings.TrimSpace(c.Args().First()) == "" {
		return "", fmt.Errorf("%s: want exactly one JOBID argument, got %d; see --help", c.Command.Name, c.NArg())
	}
	return c.Args().First(), nil
}

// jobError turns the client's not-found error into the plain message users
// expect, keeping the sentinel for errors.Is.
func jobError(jobID string, err error) error {
	switch {
	case errors.Is(err, restapi.ErrJobNotFound):
		return &messageError{msg: fmt.Sprintf("job %s not found", jobID), err: err}
	case errors.Is(err, restapi.ErrJobNotCancellable):
		msg := fmt.Sprintf("job %s cannot be cancelled", jobID)
		if ae := (*client.Error)(nil); errors.As(err, &ae) && len(ae.Messages) > 0 {
			msg += ": " + strings.Join(ae.Messages, "; ")
		}
		return &messageError{msg: msg, err: err}
	}
	return err
}

// messageError shows msg but unwraps to err.
type messageError struct {
	msg string
	err error
}

func (e *messageError) Error() string { return e.msg }
func (e *messageError) Unwrap() error { return e.err }

func runList(c *cli.Context) error {
	if c.Args().Present() {
		return fmt.Errorf("list: unexpected argument %q; see --help", c.Args().First())
	}
	cl, err := restClient(c)
	if err != nil {
		return err
	}
	jobs, err := cl.JobsOverview(c.Context)
	if err != nil {
		return err
	}
	if len(jobs.Jobs) == 0 {
		fmt.Fprintln(c.App.Writer, "No jobs.")
		return nil
	}
	slices.SortStableFunc(jobs.Jobs, func(a, b restapi.JobOverview) int {
		return cmp.Or(cmp.Compare(b.StartTime, a.StartTime), cmp.Compare(a.ID, b.ID))
	})
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB ID\tNAME\tSTATE\tSTART\tDURATION\tTASKS")
	for _, j := range jobs.Jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d\n", j.ID, j.Name, j.State, formatTime(j.StartTime),
			formatDuration(j.Duration), j.Tasks.Running, j.Tasks.Total)
	}
	return tw.Flush()
}

func runInfo(c *cli.Context) error {
	id, err := jobIDArg(c)
	if err != nil {
		return err
	}
	if c.Int("exceptions") < 0 {
		return errors.New("info: --exceptions must not be negative")
	}
	cl, err := restClient(c)
	if err != nil {
		return err
	}
	d, err := cl.JobDetails(c.Context, id)
	if err != nil {
		return jobError(id, err)
	}
	ex, err := cl.JobExceptions(c.Context, id)
	if err != nil {
		return jobError(id, err)
	}
	w := c.App.Writer
	fmt.Fprintf(w, "Job %s (%s)\n", d.ID, d.Name)
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "  State:\t%s\n", d.State)
	fmt.Fprintf(tw, "  Type:\t%s\n", d.JobType)
	fmt.Fprintf(tw, "  Started:\t%s\n", formatTime(d.StartTime))
	if d.EndTime > 0 {
		fmt.Fprintf(tw, "  Ended:\t%s\n", formatTime(d.EndTime))
	}
	fmt.Fprintf(tw, "  Duration:\t%s\n", formatDuration(d.Duration))
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VERTEX ID\tNAME\tPARALLELISM\tSTATUS\tTASKS")
	for _, v := range d.Vertices {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", v.ID, v.Name, v.Parallelism, v.Status, formatTaskCounts(v.Tasks))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	printExceptions(w, ex, c.Int("exceptions"))
	return nil
}

// executionStates orders task counts as an execution's life goes.
var executionStates = []string{"CREATED", "SCHEDULED", "DEPLOYING", "INITIALIZING", "RUNNING", "FINISHED",
	"CANCELING", "CANCELED", "FAILED", "RECONCILING"}

// formatTaskCounts prints the non-zero counts, e.g. "RUNNING 3, FINISHED 1".
func formatTaskCounts(tasks map[string]int) string {
	states := slices.Clone(executionStates)
	var other []string
	for s := range tasks {
		if !slices.Contains(states, s) {
			other = append(other, s)
		}
	}
	slices.Sort(other)
	var parts []string
	for _, s := range append(states, other...) {
		if n := tasks[s]; n != 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, n))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func printExceptions(w io.Writer, ex restapi.JobExceptions, limit int) {
	entries := ex.ExceptionHistory.Entries
	if len(entries) == 0 {
		if ex.RootException != "" {
			fmt.Fprintf(w, "Root exception (%s):\n%s\n", formatTime(ex.Timestamp), indent(ex.RootException))
			return
		}
		fmt.Fprintln(w, "No exceptions.")
		return
	}
	more := ""
	if ex.ExceptionHistory.Truncated {
		more = "+" // the server kept only part of the history
	}
	shown := min(limit, len(entries))
	fmt.Fprintf(w, "Exceptions (newest %d of %d%s):\n", shown, len(entries), more)
	for _, e := range entries[:shown] {
		where := ""
		if e.TaskName != "" {
			where = " in " + e.TaskName
		}
		if e.Location != "" {
			where += " at " + e.Location
		}
		fmt.Fprintf(w, "  %s  %s%s", formatTime(e.Timestamp), e.ExceptionName, where)
		if e.FailureType != "" {
			fmt.Fprintf(w, " [%s]", e.FailureType)
		}
		fmt.Fprintln(w)
		if e.Stacktrace != "" {
			fmt.Fprintln(w, indent(e.Stacktrace))
		}
	}
}

func indent(s string) string {
	return "      " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n      ")
}

func runCancel(c *cli.Context) error {
	id, err := jobIDArg(c)
	if err != nil {
		return err
	}
	cl, err := restClient(c)
	if err != nil {
		return err
	}
	if err := cl.CancelJob(c.Context, id); err != nil {
		return jobError(id, err)
	}
	fmt.Fprintf(c.App.Writer, "Cancelling job %s\n", id)
	if !c.Bool("wait") {
		return nil
	}
	ctx, cancel := withTimeout(c)
	defer cancel()
	d, err := cl.WaitForJobStatus(ctx, id, "CANCELED")
	if err != nil {
		return jobError(id, err)
	}
	fmt.Fprintf(c.App.Writer, "Cancelled job %s\n", d.ID)
	return nil
}

// formatTime shows epoch milliseconds in local time; 0 or less is unknown.
func formatTime(ms int64) string {
	if ms <= 0 {
		return "-"
	}
	return time.UnixMilli(ms).Local().Format("2006-01-02 15:04:05")
}

// formatDuration shows milliseconds as 1h2m3s, or 250ms below a second.
func formatDuration(ms int64) string {
	if ms < 0 {
		return "-"
	}
	d := time.Duration(ms) * time.Millisecond
	if d >= time.Second {
		d = d.Round(time.Second)
	}
	return d.String()
}
