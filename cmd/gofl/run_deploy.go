package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"google.golang.org/protobuf/proto"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/jobmanager"
	"github.com/gofl/gofl/providers"
)

// deployTimeout bounds staging plus deploying a per-job or application cluster.
const deployTimeout = 2 * time.Minute

func randomJobID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func blobWhat(uploaded bool) string {
	if uploaded {
		return "uploaded"
	}
	return "already staged"
}

// runPerJob is `gofl run -m per-job`.
func runPerJob(c *cli.Context) error {
	start := time.Now()
	cfg, log, err := setup(c)
	if err != nil {
		return err
	}
	target := targetName(c, cfg)
	dep, err := newDeployer(cfg, log, target)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	job, jobArgs := c.Args().First(), c.Args().Tail()
	bin, cleanup, err := jobBinary(c.Context, job)
	if err != nil {
		return err
	}
	defer cleanup()
	jg, err := planJob(c, bin, job, jobArgs, 0)
	if err != nil {
		return err
	}
	jg.JobID = randomJobID()
	if len(jg.ProgramArgs) == 0 {
		jg.ProgramArgs = jobArgs
	}
	goflBin, err := goflBinary(cfg)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	ctx, cancel := context.WithTimeout(c.Context, deployTimeout)
	defer cancel()
	id := newClusterID("job")
	s, err := stageCluster(ctx, cfg, id, goflBin, bin)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer s.st.Close()
	pbg, err := proto.Marshal(jobgraph.ToProto(jg))
	if err == nil {
		err = s.putJobGraph(ctx, pbg)
	}
	if err != nil {
		s.cleanup()
		return fmt.Errorf("run: %w", err)
	}
	fmt.Fprintf(c.App.Writer, "Job binary %s %s (%s); staged under %s\n", job, blobWhat(s.jobUploaded), s.jobKey, s.stagingDirURI)
	info, err := dep.Deploy(ctx, providers.ClusterSpec{
		ClusterID: id, Mode: providers.ModePerJob, Binary: goflBin, Artifacts: []string{s.goflURI, s.jobURI},
		Config: clusterConfig(cfg, map[string]string{
			conf.DeploymentMode.Key():      conf.ModePerJob,
			conf.DeploymentJobGraph.Key():  s.jobGraphURI,
			conf.DeploymentJobBinary.Key(): s.jobURI,
			conf.DeploymentAttached.Key():  strconv.FormatBool(!c.Bool("detached")),
			conf.DeploymentClusterID.Key(): id,
		}),
	})
	if err != nil {
		s.cleanup()
		return fmt.Errorf("run: deploying the per-job cluster: %w", err)
	}
	fmt.Fprintf(c.App.Writer, "Per-job cluster %s (provider %s) deployed in %v, REST at http://%s\nJob %s (%s) submitted\n",
		id, target, time.Since(start).Round(time.Millisecond), info.RESTAddress, jg.JobID, jg.Name)
	if c.Bool("detached") {
		return nil
	}
	cl, err := client.New(info.RESTAddress)
	if err != nil {
		return err
	}
	ferr := followJob(c, cl, jg, jg.JobID)
	if stoppedEarly(ferr) {
		return attachedRun{cl: cl, jobs: func(context.Context) []string { return []string{jg.JobID} },
			dep: dep, target: target, clusterID: id, staging: s}.leave(c, ferr)
	}
	ackFinalState(info.RESTAddress)
	finishCluster(c.App.ErrWriter, dep, id, s)
	return ferr
}

// runApplication is `gofl run -m application`.
func runApplication(c *cli.Context) error {
	start := time.Now()
	cfg, log, err := setup(c)
	if err != nil {
		return err
	}
	target := targetName(c, cfg)
	dep, err := newDeployer(cfg, log, target)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	job, jobArgs := c.Args().First(), c.Args().Tail()
	bin, cleanup, err := jobBinary(c.Context, job)
	if err != nil {
		return err
	}
	defer cleanup()
	goflBin, err := goflBinary(cfg)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	ctx, cancel := context.WithTimeout(c.Context, deployTimeout)
	defer cancel()
	id := newClusterID("app")
	s, err := stageCluster(ctx, cfg, id, goflBin, bin)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer s.st.Close()
	fmt.Fprintf(c.App.Writer, "Job binary %s %s (%s); staged under %s\n", job, blobWhat(s.jobUploaded), s.jobKey, s.stagingDirURI)
	args, _ := json.Marshal(append([]string{}, jobArgs...))
	extra := map[string]string{
		conf.DeploymentMode.Key():        conf.ModeApplication,
		conf.DeploymentJobBinary.Key():   s.jobURI,
		conf.DeploymentProgramArgs.Key(): string(args),
		conf.DeploymentAttached.Key():    strconv.FormatBool(!c.Bool("detached")),
		conf.DeploymentClusterID.Key():   id,
	}
	if c.IsSet("parallelism") {
		extra[conf.DefaultParallelism.Key()] = strconv.Itoa(c.Int("parallelism"))
	}
	for k, v := range restoreSettings(c) {
		extra[k] = v
	}
	info, err := dep.Deploy(ctx, providers.ClusterSpec{
		ClusterID: id, Mode: providers.ModeApplication, Binary: goflBin, Artifacts: []string{s.goflURI, s.jobURI},
		Config: clusterConfig(cfg, extra),
	})
	if err != nil {
		s.cleanup()
		return fmt.Errorf("run: deploying the application cluster: %w", err)
	}
	fmt.Fprintf(c.App.Writer, "Application cluster %s (provider %s) deployed in %v, REST at http://%s\n",
		id, target, time.Since(start).Round(time.Millisecond), info.RESTAddress)
	if c.Bool("detached") {
		return nil
	}
	ferr := followApplication(c, info.RESTAddress)
	if stoppedEarly(ferr) {
		cl, err := client.New(info.RESTAddress)
		if err != nil {
			return err
		}
		return attachedRun{cl: cl, jobs: func(ctx context.Context) []string { return applicationJobs(ctx, info.RESTAddress) },
			dep: dep, target: target, clusterID: id, staging: s}.leave(c, ferr)
	}
	finishCluster(c.App.ErrWriter, dep, id, s)
	return ferr
}

// followApplication polls GET /application and the jobs' details until the
// application ended.
func followApplication(c *cli.Context, addr string) error {
	cl, err := client.New(addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeoutCause(c.Context, c.Duration("timeout"), errFollowTimeout)
	defer cancel()
	last := ""
	for {
		st, err := applicationStatus(ctx, addr)
		if ctx.Err() != nil {
			return fmt.Errorf("the application: %w", context.Cause(ctx))
		}
		if err != nil {
			return fmt.Errorf("run: following the application at %s: %w", addr, err)
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
				if ex, err := cl.JobExceptions(c.Context, id); err == nil && ex.RootException != "" {
					fmt.Fprintf(c.App.ErrWriter, "job %s root cause: %s\n", id, ex.RootException)
				}
			}
			return fmt.Errorf("run: the application ended FAILED: %s", st.Error)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the application still %s: %w", st.State, context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// applicationStatus is GET /application of an application or per-job
// cluster's JobManager.
func applicationStatus(ctx context.Context, addr string) (jobmanager.ApplicationStatus, error) {
	var st jobmanager.ApplicationStatus
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+jobmanager.ApplicationPath, nil)
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

// applicationJobs lists the jobs an application submitted so far.
func applicationJobs(ctx context.Context, addr string) []string {
	st, _ := applicationStatus(ctx, addr)
	return st.Jobs
}

// ackFinalState reads GET /application until it reports the final state,
// which tells an attached per-job JobManager that its client is done.
func ackFinalState(addr string) {
	hc := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := hc.Get("http://" + addr + jobmanager.ApplicationPath)
		if err != nil {
			return // gone already
		}
		var st jobmanager.ApplicationStatus
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil || st.State != "RUNNING" {
			return
		}
	}
}

// finishCluster removes a per-job or application cluster's staging
// directory (the JobManager removes it too as it exits) and waits a little
// for the cluster to end on its own; one still stopping is left to finish
// in the background (its JobManager exits by itself), and the next
// `gofl session list` cleans its record.
func finishCluster(w io.Writer, dep providers.ClusterDeployer, id string, s *staged) {
	s.cleanup()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		info, err := dep.Retrieve(ctx, id)
		if errors.Is(err, providers.ErrClusterNotFound) || err == nil && info.Status == providers.StatusTerminated {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Fprintf(w, "Cluster %s is still shutting down; it goes away by itself\n", id)
}
