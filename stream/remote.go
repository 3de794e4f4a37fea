package stream

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/gofl/gofl/client"
)

// ClusterOption configures ExecuteOn.
type ClusterOption func(*clusterOptions)

type clusterOptions struct {
	binary string
}

// WithJobBinary names the job binary the cluster's TaskManagers run as the
// job's runner (default: this program, os.Executable). It must register
// the same job and build the same plan from the same arguments.
func WithJobBinary(path string) ClusterOption {
	return func(o *clusterOptions) { o.binary = path }
}

// cancelTimeout bounds the cancellation ExecuteOn sends when its context
// ends before the job.
const cancelTimeout = 10 * time.Second

// ExecuteOn runs the job on the cluster c talks to (a session cluster) and
// waits for it, as Flink's execute and executeAndCollect do against a
// remote environment: it uploads the job binary unless the JobManager has
// it, submits the JobGraph, polls the job's execution result and fills
// every Collect sink's Values from it. The environment must come from
// BuildJob, because the TaskManagers' runners rebuild the job by its
// registered name and arguments from the binary; a program that is its own
// job binary must call ServeRole (or Main) first thing in main or TestMain.
// The runners rebuild the job with the environment's default parallelism;
// other options given to BuildJob must be set by the builder itself, or
// the fingerprint check fails the deployment. Results come back when the
// job ends, so Collect suits bounded jobs. If ctx ends before the job, the
// job is cancelled. A job that did not finish returns its JobResult and an
// error with its failure cause.
func (e *Environment) ExecuteOn(ctx context.Context, c *client.Client, opts ...ClusterOption) (*JobResult, error) {
	var o clusterOptions
	for _, opt := range opts {
		opt(&o)
	}
	if e.job == "" {
		return nil, errors.New("stream: ExecuteOn needs an environment from BuildJob: the cluster's runners rebuild the job from its registered name")
	}
	p, err := e.Plan()
	if err != nil {
		return nil, err
	}
	if err := p.prepareOutputs(ctx); err != nil {
		return nil, err
	}
	for _, col := range e.collects {
		if err := col.canSerialize(); err != nil {
			return nil, err
		}
	}
	if o.binary == "" {
		if o.binary, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("stream: finding this program's binary: %w", err)
		}
	}
	key, _, err := c.UploadBlob(ctx, o.binary)
	if err != nil {
		return nil, fmt.Errorf("stream: uploading the job binary: %w", err)
	}
	g := *p.Graph
	g.ProgramArgs = append([]string{e.job}, e.args...)
	g.BinaryKey = key
	id, err := c.SubmitJob(ctx, &g)
	if err != nil {
		return nil, fmt.Errorf("stream: submitting job %q: %w", e.job, err)
	}
	r, err := c.WaitForJobResult(ctx, id)
	if err != nil {
		if ctx.Err() != nil {
			cctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
			defer cancel()
			if cerr := c.CancelJob(cctx, id); cerr != nil {
				err = fmt.Errorf("%w (and cancelling it failed: %v)", err, cerr)
			}
		}
		return nil, fmt.Errorf("stream: job %q (%s): %w", e.job, id, err)
	}
	res := &JobResult{Name: g.Name, Fingerprint: g.Fingerprint, Duration: time.Duration(r.NetRuntime) * time.Millisecond,
		JobID: id, Accumulators: r.AccumulatorResults}
	for _, col := range e.collects {
		col.reset()
	}
	if r.ApplicationStatus != "SUCCEEDED" {
		cause := "no failure cause reported"
		if r.FailureCause != nil {
			cause = r.FailureCause.StackTrace
		}
		return res, fmt.Errorf("stream: job %q (%s) ended %s: %s", e.job, id, r.ApplicationStatus, cause)
	}
	for _, col := range e.collects {
		if err := col.fromAccumulator(r.AccumulatorResults[p.opIDs[col.sink().n.id]]); err != nil {
			return res, err
		}
	}
	return res, nil
}
