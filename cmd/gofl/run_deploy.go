package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/providers"
)

// deployTimeout bounds staging plus deploying a per-job or application cluster.
const deployTimeout = 2 * time.Minute

// runOwnCluster is `gofl run -m per-job` and `-m application`: one flow,
// which plans the job on the client only for per-job.
func runOwnCluster(c *cli.Context, mode string) error {
	start := time.Now()
	cfg, log, err := setup(c)
	if err != nil {
		return err
	}
	desc, err := client.NewClusterDescriptor(cfg, targetName(c, cfg), log)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	job, jobArgs := c.Args().First(), c.Args().Tail()
	bin, cleanup, err := jobBinary(c.Context, job)
	if err != nil {
		return err
	}
	defer cleanup()
	spec := client.JobSpec{JobBinary: bin, Args: jobArgs, Detached: c.Bool("detached")}
	ctx, cancel := context.WithTimeout(c.Context, deployTimeout)
	defer cancel()
	var cc *client.ClusterClient
	var jg *jobgraph.JobGraph
	if mode == conf.ModePerJob {
		// Planned while the binaries are staged.
		plan, perr := planner(c, bin, jobArgs, 0)
		if perr != nil {
			return perr
		}
		var planErr error
		spec.Plan = func(context.Context) (*jobgraph.JobGraph, error) {
			jg, planErr = plan(c.Context)
			return jg, planErr
		}
		if cc, err = desc.DeployJobCluster(ctx, spec); planErr != nil {
			return planErr
		}
	} else {
		spec.Config = restoreSettings(c) // a per-job graph carries them
		if c.IsSet("parallelism") {
			spec.Config[conf.DefaultParallelism.Key()] = strconv.Itoa(c.Int("parallelism"))
		}
		cc, err = desc.DeployApplicationCluster(ctx, spec)
	}
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	what := "already staged"
	if cc.Staged.JobUploaded {
		what = "uploaded"
	}
	fmt.Fprintf(c.App.Writer, "Job binary %s %s (%s); staged under %s\n", job, what, cc.Staged.JobKey, cc.Staged.Dir)
	fmt.Fprintf(c.App.Writer, "%s cluster %s (provider %s) deployed in %v, REST at http://%s\n",
		titleMode(mode), cc.ClusterID(), desc.Provider(), time.Since(start).Round(time.Millisecond), cc.Info.RESTAddress)
	if jg != nil {
		fmt.Fprintf(c.App.Writer, "Job %s (%s) submitted\n", cc.JobIDs(ctx)[0], jg.Name)
	}
	logs := desc.LogDir(cc.ClusterID())
	if c.Bool("detached") {
		if logs != "" {
			fmt.Fprintf(c.App.Writer, "Once the cluster ended, its logs (Print() output in taskmanager-*.log) are in %s\n", logs)
		}
		return nil
	}
	// The end wakes the follower at once instead of at its next poll.
	ended, stopWatch := cc.WatchEnd(c.Context)
	var ferr error
	if jg != nil {
		id := cc.JobIDs(ctx)[0]
		ferr = followOverFailovers(c, desc, cc, func(cl *client.Client) error { return followJob(c, cl, jg, id, ended) })
	} else {
		ferr = followOverFailovers(c, desc, cc, func(cl *client.Client) error { return followApplication(c, cl, ended) })
	}
	stopWatch()
	if stoppedEarly(ferr) {
		return attachedRun{cl: cc.Client, jobs: cc.JobIDs, own: cc, target: desc.Provider()}.leave(c, ferr)
	}
	if ferr != nil {
		jobID := ""
		if jg != nil {
			jobID = cc.JobIDs(ctx)[0]
		}
		fmt.Fprintf(c.App.ErrWriter, "Logs: %s\n", logsHint(cfg, cc.ClusterID(), jobID))
	}
	if !cc.Finish(context.Background(), 3*time.Second) {
		fmt.Fprintf(c.App.ErrWriter, "Cluster %s is still shutting down; its work is over and it goes away by itself\n", cc.ClusterID())
	}
	if logs != "" {
		fmt.Fprintf(c.App.Writer, "Logs of cluster %s (Print() output in taskmanager-*.log): %s\n", cc.ClusterID(), logs)
	}
	return ferr
}

// followOverFailovers runs follow against the cluster and, when its
// JobManager stops answering, asks the provider: while it restarts the
// JobManager (provider.local.jobmanager.attempts; with high availability
// the job is recovered) the client waits, prints "JobManager failed over"
// once the JobManager answers again, and follows on; a cluster the
// provider reports failed ends the run with the provider's reason.
func followOverFailovers(c *cli.Context, desc *client.ClusterDescriptor, cc *client.ClusterClient, follow func(*client.Client) error) error {
	cl := cc.Client
	for {
		err := follow(cl)
		if err == nil || !jobManagerUnreachable(err) {
			return err
		}
		fmt.Fprintf(c.App.ErrWriter, "[%s] the JobManager at %s does not answer (%v); asking provider %s\n",
			time.Now().Format("15:04:05.000"), cl.Address(), err, desc.Provider())
		next, rerr := waitJobManagerBack(c, desc, cc.ClusterID())
		if errors.Is(rerr, providers.ErrClusterNotFound) {
			// Failed for good: what is left of it goes (record, staging).
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if serr := cc.Shutdown(ctx); serr != nil {
				fmt.Fprintf(c.App.ErrWriter, "removing cluster %s: %v\n", cc.ClusterID(), serr)
			}
			cancel()
		}
		if rerr != nil {
			return fmt.Errorf("run: %w", rerr)
		}
		cl = next.Client
		fmt.Fprintf(c.App.Writer, "[%s] JobManager failed over: %s answers again (attempt %s); following on\n",
			time.Now().Format("15:04:05.000"), cl.Address(), next.Info.Details["attempt"])
	}
}

// jobManagerUnreachable tells a JobManager that is gone or not serving
// (connection refused or reset, 502/503) from an answer about the job.
func jobManagerUnreachable(err error) bool {
	var ue *url.Error
	var ce *client.Error
	return errors.As(err, &ue) || errors.As(err, &ce) && (ce.StatusCode == http.StatusServiceUnavailable || ce.StatusCode == http.StatusBadGateway)
}

// waitJobManagerBack polls the provider until the cluster's JobManager
// answers again, the provider reports the cluster failed or gone, or the
// run's --timeout passed.
func waitJobManagerBack(c *cli.Context, desc *client.ClusterDescriptor, id string) (*client.ClusterClient, error) {
	ctx, cancel := context.WithTimeoutCause(c.Context, c.Duration("timeout"), errFollowTimeout)
	defer cancel()
	for {
		cc, err := desc.RetrieveCluster(ctx, id)
		if err != nil && errors.Is(err, providers.ErrClusterNotFound) {
			return nil, fmt.Errorf("the JobManager of cluster %s is gone and not coming back: %w", id, err)
		}
		if err == nil && cc.Info.Status == providers.StatusRunning {
			if _, aerr := cc.Application(ctx); aerr == nil {
				return cc, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the JobManager of cluster %s to come back: %w", id, context.Cause(ctx))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func titleMode(mode string) string {
	if mode == conf.ModePerJob {
		return "Per-job"
	}
	return "Application"
}

// followApplication polls the application's status and its jobs' details
// until the application ended; a close of ended polls at once.
func followApplication(c *cli.Context, cl *client.Client, ended <-chan struct{}) error {
	ctx, cancel := context.WithTimeoutCause(c.Context, c.Duration("timeout"), errFollowTimeout)
	defer cancel()
	last := ""
	for {
		st, err := cl.Application(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("the application: %w", context.Cause(ctx))
		}
		if err != nil {
			return fmt.Errorf("run: following the application at %s: %w", cl.Address(), err)
		}
		parts := []string{st.State}
		for _, id := range st.Jobs {
			state := "?"
			if d, err := cl.JobDetails(ctx, id); err == nil {
				state = d.State
			}
			parts = append(parts, fmt.Sprintf("job %s: %s", id, state))
		}
		if line := strings.Join(parts, " | "); line != last {
			fmt.Fprintf(c.App.Writer, "[%s] %s\n", time.Now().Format("15:04:05.000"), line)
			last = line
		}
		switch st.State {
		case "FINISHED":
			return nil
		case "FAILED":
			for _, id := range st.Jobs {
				if ex, err := cl.JobExceptions(ctx, id); err == nil && ex.RootException != "" {
					fmt.Fprintf(c.App.ErrWriter, "job %s root cause: %s\n", id, ex.RootException)
				}
			}
			return fmt.Errorf("run: the application ended FAILED: %s", st.Error)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the application still %s: %w", st.State, context.Cause(ctx))
		case <-ended:
			ended = nil // once
		case <-time.After(100 * time.Millisecond):
		}
	}
}
