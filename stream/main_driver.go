package stream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/jobgraph"
)

// Environment of the application-driver role, set by the JobManager of an
// application cluster (see package jobmanager).
const (
	// EnvDriverREST is the JobManager's REST address the driver submits to.
	EnvDriverREST = "GOFL_JOBMANAGER_REST"
	// EnvDriverToken authorizes the driver's submissions.
	EnvDriverToken = "GOFL_DRIVER_TOKEN"
	// EnvDriverBinaryKey is this binary's blob key on the JobManager.
	EnvDriverBinaryKey = "GOFL_JOB_BINARY_KEY"
	// EnvDriverApplicationID is set under high availability: the
	// application's ID (high-availability.cluster-id), from which the
	// driver's jobs get fixed IDs (jobgraph.ApplicationJobID).
	EnvDriverApplicationID = "GOFL_APPLICATION_ID"
	// EnvDriverRecoveredJobs lists (comma-separated) the fixed job IDs the
	// JobManager already has, recovered or terminal: their outputs are not
	// prepared again (a restarted JobManager's driver attaches to them).
	EnvDriverRecoveredJobs = "GOFL_RECOVERED_JOB_IDS"
	// driverTokenHeader carries the token on POST /jobs.
	driverTokenHeader = "X-Gofl-Driver-Token"
)

// JobSubmitter is where the application driver submits its JobGraphs: the
// Dispatcher of the JobManager it runs in. SubmitJob returns the job's ID.
type JobSubmitter interface {
	SubmitJob(ctx context.Context, g *jobgraph.JobGraph) (string, error)
}

// DriverSubmitterFromEnv returns the JobSubmitter posting to the
// JobManager's REST API at $GOFL_JOBMANAGER_REST with the driver's token.
func DriverSubmitterFromEnv() (JobSubmitter, error) {
	addr := os.Getenv(EnvDriverREST)
	if addr == "" {
		return nil, fmt.Errorf("%s is not set: the application-driver role runs inside an application cluster's JobManager (gofl run -m application)", EnvDriverREST)
	}
	next := http.DefaultTransport
	if strings.HasPrefix(addr, "https://") {
		// security.ssl.rest.enabled: the JobManager that started this
		// driver, on loopback; the driver token authenticates the driver,
		// and the server's name need not match its certificate.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // own parent on loopback
		next = tr
	}
	hc := &http.Client{Transport: tokenTransport{token: os.Getenv(EnvDriverToken), next: next}}
	return client.New(addr, client.WithHTTPClient(hc))
}

type tokenTransport struct {
	token string
	next  http.RoundTripper
}

func (t tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(driverTokenHeader, t.token)
	return t.next.RoundTrip(r)
}

// driverJobs picks what the driver runs: the job the first argument names,
// the only registered job, or, when several are registered and none is
// named, every one of them with the same arguments.
func driverJobs(args []string) ([]string, []string, error) {
	jobs := Jobs()
	if len(args) > 0 && slices.Contains(jobs, args[0]) {
		return args[:1], args[1:], nil
	}
	if len(jobs) == 0 {
		return nil, nil, errors.New("this binary registers no job (call stream.RegisterJob in an init function)")
	}
	return jobs, args, nil
}

// DriverIDs are the fixed job IDs of an application under high
// availability: job i (in submission order) gets
// jobgraph.ApplicationJobID(ApplicationID, i); the zero value leaves the
// IDs to the Dispatcher.
type DriverIDs struct {
	ApplicationID string
	// Recovered are the fixed IDs the JobManager already has: the driver
	// prepares no output for them (the recovered job writes on) and its
	// submission attaches to the job.
	Recovered []string
}

func driverIDsFromEnv() DriverIDs {
	ids := DriverIDs{ApplicationID: os.Getenv(EnvDriverApplicationID)}
	if s := os.Getenv(EnvDriverRecoveredJobs); s != "" {
		ids.Recovered = strings.Split(s, ",")
	}
	return ids
}

// RunDriver is the application-driver role: it builds each job (see
// driverJobs), sets its program arguments and binary key, and submits it.
// It returns once every job is submitted; the JobManager follows them.
func RunDriver(ctx context.Context, args []string, sub JobSubmitter, binaryKey string, out io.Writer) error {
	return RunDriverWithIDs(ctx, args, sub, binaryKey, DriverIDs{}, out)
}

// RunDriverWithIDs is RunDriver with fixed job IDs (high availability).
func RunDriverWithIDs(ctx context.Context, args []string, sub JobSubmitter, binaryKey string, fixed DriverIDs, out io.Writer) error {
	names, rest, err := driverJobs(args)
	if err != nil {
		return err
	}
	// Plan every job first, so a bad builder submits nothing.
	graphs := make([]*jobgraph.JobGraph, 0, len(names))
	for i, name := range names {
		p, err := PlanJob(name, rest)
		if err != nil {
			return fmt.Errorf("job %q: %w", name, err)
		}
		id := ""
		if fixed.ApplicationID != "" {
			id = jobgraph.ApplicationJobID(fixed.ApplicationID, i)
		}
		if id == "" || !slices.Contains(fixed.Recovered, id) {
			if err := p.prepareOutputs(ctx); err != nil {
				return fmt.Errorf("job %q: %w", name, err)
			}
		}
		g := *p.Graph
		g.JobID = id
		g.ProgramArgs = append([]string{name}, rest...)
		g.BinaryKey = binaryKey
		graphs = append(graphs, &g)
	}
	for _, g := range graphs {
		id, err := sub.SubmitJob(ctx, g)
		if err != nil {
			return fmt.Errorf("submitting job %q: %w", g.ProgramArgs[0], err)
		}
		fmt.Fprintf(out, "job %q submitted as %s\n", g.ProgramArgs[0], id)
	}
	return nil
}

func runDriverFromEnv(ctx context.Context, args []string, stderr io.Writer) error {
	sub, err := DriverSubmitterFromEnv()
	if err != nil {
		return err
	}
	return RunDriverWithIDs(ctx, args, sub, os.Getenv(EnvDriverBinaryKey), driverIDsFromEnv(), stderr)
}
