package nomad

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/providers"
	"github.com/gofl/gofl/storage"
)

func init() {
	providers.Register(providers.Provider{
		Name: Name,
		NewDeployer: func(c *conf.Configuration, log zerolog.Logger) (providers.ClusterDeployer, error) {
			o, err := OptionsFromConfig(c)
			if err != nil {
				return nil, err
			}
			return NewDeployer(o, log)
		},
		NewWorkerDriver: func(dc providers.DriverContext) (providers.WorkerDriver, error) {
			return NewWorkerDriver(dc)
		},
	})
}

// cleanupTimeout bounds the rollback of a failed Deploy and the cleaning
// of terminated clusters, which run even when the caller's ctx ended.
const cleanupTimeout = time.Minute

// Deployer is the nomad provider's client half: each cluster's JobManager
// is a Nomad job gofl-<cluster-id>-jobmanager; Nomad is the only record,
// so every client sees the same clusters.
type Deployer struct {
	opts Options
	c    *client
	log  zerolog.Logger
}

var _ providers.ClusterDeployer = (*Deployer)(nil)

// NewDeployer returns a Deployer talking to opts.Address. It does not
// contact Nomad yet.
func NewDeployer(opts Options, log zerolog.Logger) (*Deployer, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	c, err := newClient(opts)
	if err != nil {
		return nil, err
	}
	return &Deployer{opts: opts, c: c, log: log}, nil
}

// Close releases idle connections.
func (d *Deployer) Close() { d.c.close() }

// Deploy implements providers.ClusterDeployer.
func (d *Deployer) Deploy(ctx context.Context, spec providers.ClusterSpec) (providers.ClusterInfo, error) {
	if err := spec.Validate(); err != nil {
		return providers.ClusterInfo{}, err
	}
	if err := storage.ValidateClusterID(spec.ClusterID); err != nil {
		return providers.ClusterInfo{}, fmt.Errorf("nomad: %w", err)
	}
	if err := checkBindRule(func(k string) string { return spec.Config[k] }); err != nil {
		return providers.ClusterInfo{}, err
	}
	bin, err := resolveBinary(spec.Binary, d.opts)
	if err != nil {
		return providers.ClusterInfo{}, err
	}
	if err := d.c.ping(ctx); err != nil {
		return providers.ClusterInfo{}, err
	}
	jobID := JobManagerJobID(spec.ClusterID)
	job, err := d.jobManagerJob(spec, bin)
	if err != nil {
		return providers.ClusterInfo{}, err
	}

	// Registration is not cut short by ctx (callTimeout bounds it): a
	// request that ends with ctx may still have registered the job, and
	// only a known answer tells whether there is something to clean up.
	// A ctx that ended meanwhile fails awaitJobManager, which cleans up.
	evalID, exists, err := d.c.register(context.WithoutCancel(ctx), job)
	if err != nil {
		return providers.ClusterInfo{}, err
	}
	if exists {
		// In use, unless what is there ended: then it is debris.
		info, rerr := d.Retrieve(ctx, spec.ClusterID)
		if rerr == nil && info.Status != providers.StatusTerminated {
			return providers.ClusterInfo{}, fmt.Errorf("%w: %s (Nomad job %s is %s)", providers.ErrClusterExists, spec.ClusterID, jobID, info.Status)
		}
		if rerr != nil && !errors.Is(rerr, providers.ErrClusterNotFound) {
			return providers.ClusterInfo{}, rerr
		}
		if err := d.clean(spec.ClusterID); err != nil {
			return providers.ClusterInfo{}, err
		}
		if evalID, exists, err = d.c.register(context.WithoutCancel(ctx), job); err != nil {
			return providers.ClusterInfo{}, err
		} else if exists {
			return providers.ClusterInfo{}, fmt.Errorf("%w: %s (Nomad job %s was registered meanwhile)", providers.ErrClusterExists, spec.ClusterID, jobID)
		}
	}
	d.log.Info().Str("cluster_id", spec.ClusterID).Str("job_id", jobID).Str("nomad", d.opts.Address).Str("binary", bin.String()).Msg("JobManager job registered")

	info, err := d.awaitJobManager(ctx, spec, job, evalID)
	if err != nil {
		// All or nothing.
		if cerr := d.clean(spec.ClusterID); cerr != nil {
			d.log.Warn().Err(cerr).Str("cluster_id", spec.ClusterID).Msg("cleaning up a failed deployment")
			err = errors.Join(err, cerr)
		}
		return providers.ClusterInfo{}, err
	}
	d.log.Info().Str("cluster_id", spec.ClusterID).Str("rest", info.RESTAddress).Str("alloc_id", info.Details["alloc_id"]).Msg("cluster deployed")
	return info, nil
}

// jobManagerJob renders the cluster's JobManager job.
func (d *Deployer) jobManagerJob(spec providers.ClusterSpec, bin binary) (*api.Job, error) {
	cfg := map[string]string{}
	for k, v := range spec.Config {
		cfg[k] = v
	}
	fwd := d.opts.forward()
	if bin.url != "" {
		fwd[OptBinaryURL.Key()], fwd[OptBinarySHA256.Key()] = bin.url, bin.sha256
		delete(fwd, OptBinaryPath.Key())
	} else {
		fwd[OptBinaryPath.Key()] = bin.path
		delete(fwd, OptBinaryURL.Key())
		delete(fwd, OptBinarySHA256.Key())
	}
	for k, v := range fwd {
		if _, ok := cfg[k]; !ok {
			cfg[k] = v
		}
	}
	delete(cfg, OptToken.Key())
	cfg[conf.JobManagerRPCAddress.Key()] = "${NOMAD_IP_" + portRPC + "}"
	cfg[conf.JobManagerRPCPort.Key()] = "${NOMAD_PORT_" + portRPC + "}"
	cfg[conf.RestAddress.Key()] = "${NOMAD_IP_" + portREST + "}"
	cfg[conf.RestPort.Key()] = "${NOMAD_PORT_" + portREST + "}"
	if _, ok := cfg[conf.HAClusterID.Key()]; !ok {
		// As on YARN, each cluster's HA data is its own unless configured.
		cfg[conf.HAClusterID.Key()] = "/" + spec.ClusterID
	}
	cfg[conf.DeploymentProvider.Key()] = Name
	cfg[conf.DeploymentClusterID.Key()] = spec.ClusterID
	cfg[conf.DeploymentBinary.Key()] = bin.String()
	if spec.TaskManagers > 0 {
		slots := 1
		if s, ok := cfg[conf.NumberOfTaskSlots.Key()]; ok {
			if n, err := conf.NumberOfTaskSlots.Parse(s); err == nil {
				slots = n
			}
		}
		cfg[conf.SlotManagerMinSlots.Key()] = strconv.Itoa(spec.TaskManagers * slots)
	}
	env := map[string]string{"GOFL_CLUSTER_ID": spec.ClusterID}
	if d.opts.Token != "" && spec.Config[conf.DeploymentSecretsFile.Key()] == "" {
		// Only without a secrets file (a deployer used without the
		// client): the client stages the token there, out of the job spec.
		env["NOMAD_TOKEN"] = d.opts.Token
	}
	meta := map[string]string{
		metaClusterID: spec.ClusterID,
		metaRole:      roleJobManager,
		metaMode:      string(spec.Mode),
		metaCreated:   time.Now().UTC().Truncate(time.Millisecond).Format(time.RFC3339Nano),
	}
	if len(spec.Artifacts) > 0 {
		meta[metaArtifacts] = strings.Join(spec.Artifacts, " ")
	}
	jobType := "batch"
	if spec.Mode == providers.ModeSession {
		jobType = "service"
	}
	attempts, err := conf.JobManagerAttemptsOf(cfg, conf.NomadJobManagerAttempts)
	if err != nil {
		return nil, fmt.Errorf("nomad: %w", err)
	}
	meta[metaAttempts] = strconv.Itoa(attempts)
	return buildJob(d.opts, taskParams{
		jobID: JobManagerJobID(spec.ClusterID), jobType: jobType, role: roleJobManager,
		meta: meta, env: env, cfg: cfg, cpu: d.opts.JobManagerCPU, memoryMB: d.opts.JobManagerMemoryMB, bin: bin,
		restarts: attempts - 1,
	}), nil
}

// awaitJobManager waits for the placement, the task to run and the REST
// API to answer.
func (d *Deployer) awaitJobManager(ctx context.Context, spec providers.ClusterSpec, job *api.Job, evalID string) (providers.ClusterInfo, error) {
	jobID := *job.ID
	if err := d.c.waitEval(ctx, evalID, job); err != nil {
		return providers.ClusterInfo{}, err
	}
	httpc := &http.Client{Timeout: 2 * time.Second}
	var idx uint64
	wait := 5 * time.Second
	for {
		allocs, meta, err := d.c.api.Jobs().Allocations(jobID, true, q(ctx, idx, wait))
		if err != nil {
			if ctx.Err() != nil {
				return providers.ClusterInfo{}, fmt.Errorf("nomad: deploying %s: %w (job %s; see `nomad job status %s`)", spec.ClusterID, ctx.Err(), jobID, jobID)
			}
			return providers.ClusterInfo{}, d.c.wrap("watching allocations of "+jobID, err)
		}
		if meta.LastIndex >= idx {
			idx = meta.LastIndex
		} else {
			idx = 0
		}
		a := newest(allocs)
		if a == nil {
			continue
		}
		ts := a.TaskStates[roleJobManager]
		if f := taskFailure(ts); f != nil || terminal(a.ClientStatus) || a.DesiredStatus == "stop" {
			why := a.ClientStatus + " " + a.ClientDescription
			if f != nil {
				why = describeEvent(f)
				if !terminal(a.ClientStatus) {
					d.c.settle(ctx, jobID, 5*time.Second)
				}
			}
			why += d.jobManagerStderr(ctx, a.ID, spec)
			return providers.ClusterInfo{}, fmt.Errorf("%w: deploying %s: the JobManager task of allocation %s failed during startup: %s (logs: `nomad alloc logs -stderr %s`)",
				ErrTaskFailed, spec.ClusterID, shortID(a.ID), why, a.ID)
		}
		if a.ClientStatus != "running" || ts == nil || ts.State != "running" {
			continue
		}
		full, _, err := d.c.api.Allocations().Info(a.ID, q(ctx, 0, 0))
		if err != nil {
			return providers.ClusterInfo{}, d.c.wrap("reading allocation "+a.ID, err)
		}
		rest := portAddr(full, portREST)
		if rest == "" {
			return providers.ClusterInfo{}, fmt.Errorf("nomad: allocation %s of %s has no %q port", a.ID, jobID, portREST)
		}
		if providers.OverviewReady(ctx, httpc, rest) {
			return d.infoFrom(jobID, spec.ClusterID, job.Meta, "running", full.ClientStatus, full), nil
		}
		wait = 200 * time.Millisecond // poll the REST API while the allocation runs
	}
}

// jobManagerStderr is ": <the last line of the JobManager task's stderr>"
// of a failed deployment ("" if it cannot be read), with a hint when the
// JobManager could not find what the client staged on file:// storage:
// that is visible on the client's machine only.
func (d *Deployer) jobManagerStderr(ctx context.Context, allocID string, spec providers.ClusterSpec) string {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	defer cancel()
	rc, err := d.c.api.AllocFS().ReadAt(&api.Allocation{ID: allocID}, "alloc/logs/"+roleJobManager+".stderr.0", 0, 64<<10, q(cctx, 0, 0))
	if err != nil {
		return ""
	}
	defer rc.Close()
	b, _ := io.ReadAll(io.LimitReader(rc, 64<<10))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last == "" {
		return ""
	}
	if strings.Contains(last, "storage: not found") {
		if dir := conf.ExpandEnv(spec.Config[conf.StagingDir.Key()]); dir == "" || strings.HasPrefix(dir, "file:") || strings.HasPrefix(dir, "/") {
			last += fmt.Sprintf(" (staging.dir %q is on the client's file system, which the JobManager's Nomad node does not see: "+
				"use storage every node reaches, such as hdfs://, on a Nomad cluster of more than this machine or with the exec driver)", spec.Config[conf.StagingDir.Key()])
		}
	}
	return ": " + last
}

// infoFrom builds a ClusterInfo from a JobManager job's meta and its
// newest allocation (nil: none).
func (d *Deployer) infoFrom(jobID, clusterID string, meta map[string]string, jobStatus, clientStatus string, a *api.Allocation) providers.ClusterInfo {
	info := providers.ClusterInfo{
		ClusterID: clusterID,
		Provider:  Name,
		Mode:      providers.Mode(meta[metaMode]),
		Details: map[string]string{
			"nomad_address": d.opts.Address,
			"job_id":        jobID,
			"namespace":     d.c.nsName(),
		},
	}
	if t, err := time.Parse(time.RFC3339Nano, meta[metaCreated]); err == nil {
		info.Created = t
	}
	if s := meta[metaArtifacts]; s != "" {
		info.Details["artifacts"] = s
	}
	switch {
	case jobStatus == "dead" || terminal(clientStatus):
		info.Status = providers.StatusTerminated
	case a != nil && clientStatus == "running":
		info.Status = providers.StatusRunning
	default:
		info.Status = providers.StatusStarting
	}
	if a != nil {
		info.Details["alloc_id"] = a.ID
		info.Details["node_id"] = a.NodeID
		info.Details["node"] = a.NodeName
		info.Details["client_status"] = a.ClientStatus
		if ts := a.TaskStates[roleJobManager]; ts != nil {
			// The provider's attempt counter: Nomad's in-place restarts.
			info.Details["attempt"] = strconv.FormatUint(ts.Restarts+1, 10)
			if info.Status == providers.StatusTerminated && ts.Failed {
				// Out of in-place restarts (the restart policy's mode fail).
				info.Details["error"] = fmt.Sprintf("the JobManager failed on its attempt %d of %s (%s); Nomad restarts it no more",
					ts.Restarts+1, cmp.Or(meta[metaAttempts], "1"), conf.NomadJobManagerAttempts.Key())
			}
		}
		if n := meta[metaAttempts]; n != "" {
			info.Details["attempts"] = n
		}
		if info.Status == providers.StatusRunning {
			info.RESTAddress = portAddr(a, portREST)
			info.RPCAddress = portAddr(a, portRPC)
		}
	}
	return info
}

// Retrieve implements providers.ClusterDeployer.
func (d *Deployer) Retrieve(ctx context.Context, clusterID string) (providers.ClusterInfo, error) {
	if err := storage.ValidateClusterID(clusterID); err != nil {
		return providers.ClusterInfo{}, fmt.Errorf("nomad: %w", err)
	}
	jobID := JobManagerJobID(clusterID)
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	job, _, err := d.c.api.Jobs().Info(jobID, q(cctx, 0, 0))
	if isNotFound(err) {
		return providers.ClusterInfo{}, fmt.Errorf("%w: %s (no Nomad job %s at %s)", providers.ErrClusterNotFound, clusterID, jobID, d.opts.Address)
	}
	if err != nil {
		return providers.ClusterInfo{}, d.c.wrap("reading job "+jobID, err)
	}
	if job.Meta[metaClusterID] != clusterID {
		return providers.ClusterInfo{}, fmt.Errorf("%w: %s (Nomad job %s is not a gofl JobManager)", providers.ErrClusterNotFound, clusterID, jobID)
	}
	status := ""
	if job.Status != nil {
		status = *job.Status
	}
	return d.info(cctx, jobID, clusterID, job.Meta, status)
}

func (d *Deployer) info(ctx context.Context, jobID, clusterID string, meta map[string]string, jobStatus string) (providers.ClusterInfo, error) {
	allocs, _, err := d.c.api.Jobs().Allocations(jobID, true, q(ctx, 0, 0))
	if err != nil {
		return providers.ClusterInfo{}, d.c.wrap("listing allocations of "+jobID, err)
	}
	a := newest(allocs)
	if a == nil {
		return d.infoFrom(jobID, clusterID, meta, jobStatus, "", nil), nil
	}
	full, _, err := d.c.api.Allocations().Info(a.ID, q(ctx, 0, 0))
	if err != nil {
		return providers.ClusterInfo{}, d.c.wrap("reading allocation "+a.ID, err)
	}
	return d.infoFrom(jobID, clusterID, meta, jobStatus, full.ClientStatus, full), nil
}

// List implements providers.ClusterDeployer. Clusters whose JobManager
// ended are cleaned (their jobs purged) and left out, and so are
// TaskManager jobs whose JobManager job is gone.
func (d *Deployer) List(ctx context.Context) ([]providers.ClusterInfo, error) {
	jobs, err := d.c.listJobs(ctx, jobPrefix, func(j *api.JobListStub) bool { return j.Meta[metaClusterID] != "" })
	if err != nil {
		return nil, err
	}
	jmJobs := map[string]bool{}
	var out []providers.ClusterInfo
	for _, j := range jobs {
		if j.Meta[metaRole] != roleJobManager || j.ID != JobManagerJobID(j.Meta[metaClusterID]) {
			continue
		}
		jmJobs[j.ID] = true
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		info, err := d.info(cctx, j.ID, j.Meta[metaClusterID], j.Meta, j.Status)
		cancel()
		if err != nil {
			return nil, err
		}
		if info.Status == providers.StatusTerminated {
			d.log.Info().Str("cluster_id", info.ClusterID).Str("job_id", j.ID).Msg("cleaning a cluster whose JobManager ended")
			failed := d.failedCluster(ctx, info.ClusterID)
			if err := d.clean(info.ClusterID); err != nil {
				d.log.Warn().Err(err).Str("cluster_id", info.ClusterID).Msg("cleaning a terminated cluster")
			} else if failed != nil {
				d.cleanupHAData(info.ClusterID, failed)
			}
			continue
		}
		out = append(out, info)
	}
	for _, j := range jobs {
		if jm := j.Meta[metaJobManagerJob]; j.Meta[metaRole] == roleTaskManager && jm != "" && !jmJobs[jm] && strings.HasPrefix(jm, jobPrefix) {
			d.log.Info().Str("job_id", j.ID).Str("jobmanager_job", jm).Msg("purging a TaskManager whose JobManager job is gone")
			_ = d.c.purge(ctx, j.ID)
		}
	}
	slices.SortFunc(out, func(a, b providers.ClusterInfo) int { return strings.Compare(a.ClusterID, b.ClusterID) })
	return out, nil
}

// Kill implements providers.ClusterDeployer: it purges the JobManager job
// first (so no new TaskManagers are requested), then every TaskManager job
// of the cluster, and waits until their allocations stopped.
func (d *Deployer) Kill(ctx context.Context, clusterID string) error {
	if err := storage.ValidateClusterID(clusterID); err != nil {
		return fmt.Errorf("nomad: %w", err)
	}
	jobs, err := d.c.clusterJobs(ctx, clusterID)
	if err != nil {
		return err
	}
	if len(jobs) == 0 {
		return fmt.Errorf("%w: %s (no Nomad jobs %s* at %s)", providers.ErrClusterNotFound, clusterID, clusterJobsPrefix(clusterID), d.opts.Address)
	}
	failed := d.failedCluster(ctx, clusterID)
	if err := d.killJobs(ctx, clusterID); err != nil {
		return err
	}
	if failed != nil {
		// Failed for good and its processes gone: nothing recovers its
		// jobs any more.
		d.cleanupHAData(clusterID, failed)
	}
	d.log.Info().Str("cluster_id", clusterID).Msg("cluster killed")
	return nil
}

func (d *Deployer) killJobs(ctx context.Context, clusterID string) error {
	// The allocations of the cluster's TaskManager jobs as they are now:
	// the JobManager's Close purges those jobs without waiting for their
	// processes, so Kill waits for them itself.
	var tmAllocs []string
	if jobs, err := d.c.clusterJobs(ctx, clusterID); err == nil {
		for _, j := range jobs {
			if j.ID == JobManagerJobID(clusterID) {
				continue
			}
			if ids, err := d.c.jobAllocIDs(ctx, j.ID); err == nil {
				tmAllocs = append(tmAllocs, ids...)
			}
		}
	}
	// The JobManager first: its Close purges its TaskManagers too.
	if err := d.c.purgeAndWait(ctx, JobManagerJobID(clusterID)); err != nil {
		return err
	}
	// Then whatever TaskManager jobs are left, twice in case one was being
	// registered while the JobManager stopped.
	for range 2 {
		jobs, err := d.c.clusterJobs(ctx, clusterID)
		if err != nil {
			return err
		}
		if len(jobs) == 0 {
			break
		}
		var ids []string
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
		if err := d.c.purgeAndWait(ctx, ids...); err != nil {
			return err
		}
	}
	return d.c.waitAllocsGone(ctx, tmAllocs)
}

// clean purges what is left of a cluster, with its own deadline.
func (d *Deployer) clean(clusterID string) error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	return d.killJobs(ctx, clusterID)
}
