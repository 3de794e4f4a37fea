package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/stream"
)

func submitCommand() *cli.Command {
	return &cli.Command{
		Name:      "submit",
		Usage:     "submit a JobGraph file (protobuf JSON) to a running cluster",
		ArgsUsage: "JOBGRAPH.json",
		Description: `Submits a prepared JobGraph, written as protobuf JSON (the body POST /jobs
takes), to the cluster's Dispatcher, and with --wait follows the job until it
ends, printing each state change; the exit code is non-zero unless the job
FINISHED. Job binaries written with the SDK are run with 'gofl run' instead.

Examples:
   gofl submit -m localhost:8081 scripts/jobs/wordcount-shape.json
   gofl submit --wait scripts/jobs/wordcount-shape.json
   gofl submit --wait --binary bin/gofl scripts/jobs/wordcount-shape.json`,
		Flags: []cli.Flag{
			jobManagerFlag(),
			&cli.BoolFlag{Name: "wait", Usage: "follow the job until it ends"},
			&cli.StringFlag{Name: "binary", TakesFile: true, Usage: "job binary whose runner role runs the tasks, uploaded to the JobManager's blob store unless already there (`PATH`; bin/gofl runs the built-in tasks)"},
			&cli.DurationFlag{Name: "timeout", Value: 10 * time.Minute, Usage: "with --wait, give up after `DURATION`"},
		},
		Action: runSubmit,
	}
}

func runSubmit(c *cli.Context) error {
	if c.NArg() != 1 {
		return errors.New("submit: expected exactly one JOBGRAPH.json argument")
	}
	path := c.Args().First()
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	var m pb.JobGraph
	if err := protojson.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("submit: %s is not a JobGraph in protobuf JSON: %w", path, err)
	}
	jg := jobgraph.FromProto(&m)
	if err := jg.Validate(); err != nil {
		return fmt.Errorf("submit: %s: %w", path, err)
	}
	cl, err := restClient(c)
	if err != nil {
		return err
	}
	if bin := c.String("binary"); bin != "" {
		if jg.BinaryKey, err = uploadJobBinary(c, cl, bin, bin); err != nil {
			return fmt.Errorf("submit: %w", err)
		}
	}
	if err := attachJobTokens(c, cl, jg); err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	id, err := cl.SubmitJob(c.Context, jg)
	if err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	fmt.Fprintf(c.App.Writer, "Job %s (%s) submitted\n", id, jg.Name)
	if !c.Bool("wait") {
		return nil
	}
	return followJob(c, cl, jg, id, nil)
}

// followJob prints the job's state and task counts whenever they change,
// until the job ends, and then its result (printResult). jg, the graph
// submitted, names the operators in the result. It polls every 100 ms, and
// at once when ended closes (a per-job cluster's work is over:
// client.WatchEnd); nil: polls only. With ended to wake it at the end, a
// poll that saw no change doubles the wait, up to what the progress
// display needs (followPollMax): each poll costs the client and the
// JobManager CPU, about 1 ms a poll between them.
//
// Ctrl-C (when the command watches for it) or --timeout end following
// early with an error wrapping errInterrupted or errFollowTimeout.
func followJob(c *cli.Context, cl *client.Client, jg *jobgraph.JobGraph, id string, ended <-chan struct{}) error {
	ctx, cancel := context.WithTimeoutCause(c.Context, c.Duration("timeout"), errFollowTimeout)
	defer cancel()
	last := ""
	var lastFailure int64
	pv := newProgressView(c)
	poll, maxPoll := followPoll, followPoll
	if ended != nil {
		maxPoll = min(max(pv.interval, followPoll), followPollMax)
	}
	for {
		d, err := cl.JobDetails(ctx, id)
		if ctx.Err() != nil {
			return fmt.Errorf("job %s: %w", id, context.Cause(ctx))
		}
		if err != nil {
			return jobError(id, err)
		}
		var parts []string
		for _, v := range d.Vertices {
			var states []string
			for _, s := range []string{"CREATED", "SCHEDULED", "DEPLOYING", "INITIALIZING", "RUNNING", "FINISHED", "CANCELING", "CANCELED", "FAILED"} {
				if n := v.Tasks[s]; n > 0 {
					states = append(states, fmt.Sprintf("%d %s", n, s))
				}
			}
			parts = append(parts, fmt.Sprintf("%s: %s", v.Name, strings.Join(states, ", ")))
		}
		line := fmt.Sprintf("%s | %s", d.State, strings.Join(parts, " | "))
		if line != last {
			pv.clear() // a terminal's progress block goes below the new lines
			fmt.Fprintf(c.App.Writer, "[%s] %s\n", time.Now().Format("15:04:05.000"), line)
			last = line
			lastFailure = printNewFailures(c, cl, id, lastFailure)
			pv.redraw()
			poll = followPoll
		} else {
			poll = min(2*poll, maxPoll)
		}
		if client.IsGloballyTerminal(d.State) {
			pv.finish(d)
			if d.State != "FINISHED" {
				if ex, err := cl.JobExceptions(c.Context, id); err == nil && ex.RootException != "" {
					fmt.Fprintf(c.App.ErrWriter, "root cause: %s\n", ex.RootException)
				}
				return fmt.Errorf("%s: job %s ended %s", c.Command.Name, id, d.State)
			}
			printResult(c, cl, jg, id)
			return nil
		}
		pv.update(d, time.Now())
		select {
		case <-ctx.Done():
			return fmt.Errorf("job %s still %s: %w", id, d.State, context.Cause(ctx))
		case <-ended:
			ended = nil // once
		case <-time.After(poll):
		}
	}
}

// followJob's polls: every followPoll while the job's state changes,
// backing off to at most followPollMax while it does not (when the end
// wakes it).
const (
	followPoll    = 100 * time.Millisecond
	followPollMax = time.Second
)

// printNewFailures prints the failures of the job newer than after (a
// timestamp), so a job that keeps restarting shows why while it runs, and
// returns the newest one's timestamp.
func printNewFailures(c *cli.Context, cl *client.Client, id string, after int64) int64 {
	ex, err := cl.JobExceptions(c.Context, id)
	if err != nil {
		return after
	}
	newest := after
	entries := ex.ExceptionHistory.Entries
	for i := len(entries) - 1; i >= 0; i-- { // oldest first
		e := entries[i]
		if e.Timestamp <= after {
			continue
		}
		msg, _, _ := strings.Cut(strings.TrimSpace(e.Stacktrace), "\n")
		where := e.TaskName
		if e.Location != "" {
			where += " on " + e.Location
		}
		fmt.Fprintf(c.App.ErrWriter, "[%s] failure in %s: %s\n", time.UnixMilli(e.Timestamp).Format("15:04:05.000"), where, msg)
		newest = max(newest, e.Timestamp)
	}
	return newest
}

// uploadJobBinary uploads a job binary to the JobManager's blob store unless
// it is already there, says which (naming it as the user did), and returns
// its blob key.
func uploadJobBinary(c *cli.Context, cl *client.Client, bin, name string) (string, error) {
	key, uploaded, err := cl.UploadBlob(c.Context, bin)
	if err != nil {
		return "", fmt.Errorf("uploading the job binary: %w", err)
	}
	what := "already on the JobManager"
	if uploaded {
		what = "uploaded"
	}
	fmt.Fprintf(c.App.Writer, "Job binary %s %s (%s)\n", name, what, key)
	return key, nil
}

// printResult prints what Flink's CLI prints once a job finished: its
// runtime and its accumulator results, a Collect sink's named by its
// operator with its record count.
func printResult(c *cli.Context, cl *client.Client, jg *jobgraph.JobGraph, id string) {
	ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
	defer cancel()
	r, err := cl.JobExecutionResult(ctx, id)
	if err != nil || r.ExecutionResult == nil {
		fmt.Fprintf(c.App.ErrWriter, "the job's execution result is not available: %v\n", err)
		return
	}
	res := r.ExecutionResult
	fmt.Fprintf(c.App.Writer, "Job Runtime: %d ms\n", res.NetRuntime)
	if len(res.AccumulatorResults) == 0 {
		return
	}
	names := map[string]string{}
	if jg != nil {
		for _, v := range jg.Vertices {
			for _, op := range v.Operators {
				names[op.ID] = op.Name
			}
		}
	}
	fmt.Fprintln(c.App.Writer, "Accumulator Results:")
	for _, name := range slices.Sorted(maps.Keys(res.AccumulatorResults)) {
		v := res.AccumulatorResults[name]
		label := name
		if op := names[name]; op != "" {
			label = fmt.Sprintf("%s (operator %s)", op, name)
		}
		if n, err := stream.CountCollected(v); err == nil {
			fmt.Fprintf(c.App.Writer, "- %s: %d records, %d bytes\n", label, n, len(v))
		} else {
			fmt.Fprintf(c.App.Writer, "- %s: %d bytes\n", label, len(v))
		}
	}
}
