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
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gofl/gofl/client"
)

// Why an attached `gofl run` stopped following its job(s) early.
var (
	errInterrupted   = errors.New("interrupted")
	errFollowTimeout = errors.New("--timeout reached")
)

// flagShutdownOnAttachedExit is Flink's -sae.
const flagShutdownOnAttachedExit = "shutdownOnAttachedExit"

// exitError makes the CLI exit with code instead of 1.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitFunc ends the process on a second interrupt; tests replace it.
var exitFunc = os.Exit

// watchInterrupts returns a context that the first SIGINT or SIGTERM
// cancels with errInterrupted, so `gofl run` can detach or shut down in
// order; a second one ends the process at once (exit 130). release stops
// watching; the goroutine ends with it.
func watchInterrupts(parent context.Context, w io.Writer) (ctx context.Context, release func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		n := 0
		for {
			select {
			case <-done:
				return
			case <-sig:
				if n++; n == 1 {
					fmt.Fprintln(w, "\nInterrupted; press Ctrl-C again to exit at once")
					cancel(errInterrupted)
					continue
				}
				fmt.Fprintln(w, "Interrupted again; exiting without cleaning up")
				exitFunc(130)
			}
		}
	}()
	return ctx, func() {
		signal.Stop(sig)
		close(done)
		<-stopped
		cancel(nil)
	}
}

// stoppedEarly tells whether following ended by Ctrl-C or --timeout.
func stoppedEarly(err error) bool {
	return errors.Is(err, errInterrupted) || errors.Is(err, errFollowTimeout)
}

// attachedRun is what an attached `gofl run` follows, for leaving it when
// following stops early.
type attachedRun struct {
	cl *client.Client
	// jobs lists the jobs to cancel or name (an application's are known
	// only to its JobManager).
	jobs func(ctx context.Context) []string
	// own is a per-job or application cluster of the run's own; nil in
	// session mode, where the cluster is not the run's to stop.
	own    *client.ClusterClient
	target string
}

// leave ends an attached run that stopped following early (cause is
// errInterrupted or errFollowTimeout). With --shutdownOnAttachedExit it
// cancels the job(s) and, for a cluster of its own, kills the cluster and
// removes its staging; without, it detaches and says what still runs and
// how to stop it, leaving the cluster's staging alone. Either way the run
// fails: 130 after Ctrl-C, else 1.
func (a attachedRun) leave(c *cli.Context, cause error) error {
	w := c.App.ErrWriter
	code := 1
	if errors.Is(cause, errInterrupted) {
		code = 130
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	jobs := a.jobs(ctx)
	if c.Bool(flagShutdownOnAttachedExit) {
		for _, id := range jobs {
			if err := a.cl.CancelJob(ctx, id); err != nil {
				fmt.Fprintf(w, "Cancelling job %s: %v\n", id, jobError(id, err))
			} else {
				fmt.Fprintf(w, "Job %s cancelled\n", id)
			}
		}
		if a.own != nil {
			if err := a.own.Shutdown(ctx); err != nil {
				return &exitError{code, fmt.Errorf("%w; shutting down cluster %s: %w", cause, a.own.ClusterID(), err)}
			}
			fmt.Fprintf(w, "Cluster %s shut down\n", a.own.ClusterID())
		}
		return &exitError{code, fmt.Errorf("%w; job(s) cancelled (--%s)", cause, flagShutdownOnAttachedExit)}
	}
	where := "-m " + a.cl.Address()
	if a.own != nil {
		where = "-c " + a.own.ClusterID()
		if a.target != "local" {
			where += " -t " + a.target
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Detached; still running: job(s) %s", strings.Join(jobs, ", "))
	if a.own != nil {
		fmt.Fprintf(&b, " on cluster %s, which goes away once they end", a.own.ClusterID())
	}
	fmt.Fprintf(&b, ".\n")
	for _, id := range jobs {
		fmt.Fprintf(&b, "  cancel:   gofl cancel %s %s\n", where, id)
	}
	if a.own != nil {
		fmt.Fprintf(&b, "  stop all: gofl session stop %s\n", strings.TrimPrefix(where, "-c "))
	}
	fmt.Fprintf(&b, "  (gofl run --%s/-sae cancels instead)\n", flagShutdownOnAttachedExit)
	fmt.Fprint(w, b.String())
	return &exitError{code, fmt.Errorf("%w; detached", cause)}
}
