package main

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"
)

func savepointCommand() *cli.Command {
	return &cli.Command{
		Name:      "savepoint",
		Usage:     "take a savepoint of a running job",
		ArgsUsage: "JOBID [DIR]",
		Description: `Asks the JobManager for a savepoint of the job (POST /jobs/JOBID/savepoints)
into DIR (a file:// or hdfs:// URI; state.savepoints.dir when omitted) and
waits until it completed, then prints its path. The job keeps running.
Resume from it with gofl run -s PATH.

Examples:
   gofl savepoint 3f1c5a8e0b7d4e2a9c6f1b0d8e7a5c43 file:///data/savepoints
   gofl savepoint -m jm.example:8081 3f1c5a8e0b7d4e2a9c6f1b0d8e7a5c43 hdfs://nn:9000/savepoints
   gofl savepoint -c session-3f1c5a8e0b7d 3f1c5a8e0b7d4e2a9c6f1b0d8e7a5c43`,
		Flags: []cli.Flag{
			jobManagerFlag(), clusterFlag(), targetFlag(),
			&cli.DurationFlag{Name: "timeout", Value: 10 * time.Minute, Usage: "give up waiting for the savepoint after `DURATION`"},
		},
		Action: runSavepoint,
	}
}

func stopCommand() *cli.Command {
	return &cli.Command{
		Name:      "stop",
		Usage:     "stop a running job with a savepoint",
		ArgsUsage: "JOBID",
		Description: `Stops the job gracefully (POST /jobs/JOBID/stop): the sources stop, a final
savepoint is taken into --savepointPath (state.savepoints.dir when omitted)
and committed, and the job ends FINISHED. With --drain the sources first
end their input (MAX_WATERMARK), so every window and event-time timer
fires, for a job that will not be resumed. Prints the savepoint's path;
resume from it with gofl run -s PATH.

Examples:
   gofl stop --savepointPath file:///data/savepoints 3f1c5a8e0b7d4e2a9c6f1b0d8e7a5c43
   gofl stop -p hdfs://nn:9000/savepoints --drain 3f1c5a8e0b7d4e2a9c6f1b0d8e7a5c43
   gofl stop -m jm.example:8081 3f1c5a8e0b7d4e2a9c6f1b0d8e7a5c43`,
		Flags: []cli.Flag{
			jobManagerFlag(), clusterFlag(), targetFlag(),
			&cli.StringFlag{Name: "savepointPath", Aliases: []string{"p"}, Usage: "savepoint directory `URI` (default: state.savepoints.dir)"},
			&cli.BoolFlag{Name: "drain", Aliases: []string{"d"}, Usage: "end the sources' input (MAX_WATERMARK) before the savepoint"},
			&cli.DurationFlag{Name: "timeout", Value: 10 * time.Minute, Usage: "give up waiting for the savepoint after `DURATION`"},
		},
		Action: runStop,
	}
}

func runSavepoint(c *cli.Context) error {
	if c.NArg() < 1 || c.NArg() > 2 {
		return fmt.Errorf("savepoint: want JOBID [DIR], got %d arguments; see --help", c.NArg())
	}
	id, dir := c.Args().Get(0), c.Args().Get(1)
	cl, err := restClient(c)
	if err != nil {
		return err
	}
	ctx, cancel := withTimeout(c)
	defer cancel()
	fmt.Fprintf(c.App.Writer, "Triggering savepoint for job %s.\n", id)
	trigger, err := cl.TriggerSavepoint(ctx, id, dir)
	if err != nil {
		return jobError(id, err)
	}
	fmt.Fprintln(c.App.Writer, "Waiting for response...")
	path, err := cl.WaitForSavepoint(ctx, id, trigger)
	if err != nil {
		return jobError(id, err)
	}
	fmt.Fprintf(c.App.Writer, "Savepoint completed. Path: %s\nYou can resume your program from this savepoint with the run command (gofl run -s %s ...).\n", path, path)
	return nil
}

func runStop(c *cli.Context) error {
	id, err := jobIDArg(c)
	if err != nil {
		return err
	}
	cl, err := restClient(c)
	if err != nil {
		return err
	}
	ctx, cancel := withTimeout(c)
	defer cancel()
	if c.Bool("drain") {
		fmt.Fprintf(c.App.Writer, "Draining job %s with a savepoint.\n", id)
	} else {
		fmt.Fprintf(c.App.Writer, "Suspending job %s with a savepoint.\n", id)
	}
	trigger, err := cl.StopWithSavepoint(ctx, id, c.String("savepointPath"), c.Bool("drain"))
	if err != nil {
		return jobError(id, err)
	}
	path, err := cl.WaitForSavepoint(ctx, id, trigger)
	if err != nil {
		return jobError(id, err)
	}
	fmt.Fprintf(c.App.Writer, "Savepoint completed. Path: %s\n", path)
	return nil
}

func withTimeout(c *cli.Context) (context.Context, context.CancelFunc) {
	if t := c.Duration("timeout"); t > 0 {
		return context.WithTimeout(c.Context, t)
	}
	return context.WithCancel(c.Context)
}
