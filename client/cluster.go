package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"gopkg.in/yaml.v3"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/providers"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/storage"
)

// ClusterDescriptor deploys clusters through one resource provider and
// finds them again (Flink's ClusterDescriptor): a session cluster, a
// per-job cluster running one planned JobGraph, or an application cluster
// whose JobManager runs the job binary's main. Deploying stages the
// artifacts (the gofl binary, unless the provider runs it in place
// (providers.InPlaceBinary), and the job binary in the content-addressed
// blob cache under staging.dir, the configuration and the JobGraph in the
// cluster's directory) before the provider starts anything. The provider
// must be registered (providers.Register; `gofl` registers its own in
// main). Safe for concurrent use.
type ClusterDescriptor struct {
	cfg      *conf.Configuration
	log      zerolog.Logger
	provider string
	dep      providers.ClusterDeployer
}

// NewClusterDescriptor returns the descriptor of provider (a registry name,
// e.g. "local" or "nomad") configured by cfg: staging.dir and the fs.*
// options for staging, deployment.binary for the gofl binary clusters run
// (default: this executable), and everything else passed on to the
// JobManager.
func NewClusterDescriptor(cfg *conf.Configuration, provider string, log zerolog.Logger) (*ClusterDescriptor, error) {
	dep, err := providers.NewDeployer(provider, cfg, log)
	if err != nil {
		return nil, fmt.Errorf("client: provider %s: %w", provider, err)
	}
	return &ClusterDescriptor{cfg: cfg, log: log, provider: provider, dep: dep}, nil
}

// Provider is the descriptor's provider name.
func (d *ClusterDescriptor) Provider() string { return d.provider }

// Deployer is the provider's client half, for what the descriptor does
// not wrap.
func (d *ClusterDescriptor) Deployer() providers.ClusterDeployer { return d.dep }

// LogDir is where the provider keeps the logs of the cluster's processes
// once it ended, Print() output in the TaskManagers' (see
// providers.LogLocator); "" when the provider keeps none (Nomad keeps them
// with its allocations: nomad alloc logs).
func (d *ClusterDescriptor) LogDir(clusterID string) string {
	if l, ok := d.dep.(providers.LogLocator); ok {
		return l.LogDir(clusterID)
	}
	return ""
}

// SessionSpec is a session cluster to deploy.
type SessionSpec struct {
	// ClusterID names it; empty: "session-<random>".
	ClusterID string
	// TaskManagers start with the JobManager and are kept.
	TaskManagers int
	// JobManagers is how many JobManagers to run (0: one); more than one
	// need high-availability.type zookeeper: one leads, the others stand by.
	JobManagers int
	// Config is added to the descriptor's configuration for this cluster.
	Config map[string]string
}

// JobSpec is a job to deploy on a cluster of its own: a per-job cluster
// (Graph set: planned on the client, see PlanJob) or an application
// cluster (Graph nil: the JobManager runs JobBinary's main with Args).
type JobSpec struct {
	// JobBinary is the job binary's path. Required.
	JobBinary string
	// Graph is a per-job cluster's planned job. Its JobID is set when
	// empty.
	Graph *jobgraph.JobGraph
	// Plan, when Graph is nil, plans a per-job cluster's job (PlanJob)
	// while the binaries are staged, instead of before: both only read the
	// job binary. Its error fails the deployment as it is, and nothing
	// stays staged.
	Plan func(context.Context) (*jobgraph.JobGraph, error)
	// Args are an application's program arguments.
	Args []string
	// Detached: the cluster does not wait for a client to fetch the final
	// state before it goes away.
	Detached bool
	// Config is added to the descriptor's configuration for this cluster
	// (e.g. parallelism.default, execution.savepoint.path).
	Config map[string]string
}

// Staged says what deploying staged, for the caller to report.
type Staged struct {
	// Dir is staging.dir (expanded).
	Dir string
	// JobKey is the job binary's blob key; JobUploaded is false when the
	// blob cache had it already.
	JobKey      string
	JobUploaded bool
}

// DeploySessionCluster stages the gofl binary and the configuration and
// deploys a session cluster; it returns once the JobManager serves REST.
// On error nothing of it is left, except a cluster that already existed
// under that ID (providers.ErrClusterExists), which is not touched.
func (d *ClusterDescriptor) DeploySessionCluster(ctx context.Context, spec SessionSpec) (*ClusterClient, error) {
	id := spec.ClusterID
	if id == "" {
		id = NewClusterID("session")
	}
	if err := storage.ValidateClusterID(id); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	// A running cluster of that name keeps its staging directory: refuse
	// before staging anything into it.
	if info, err := d.dep.Retrieve(ctx, id); err == nil && info.Status != providers.StatusTerminated && info.Status != providers.StatusFailed {
		return nil, fmt.Errorf("client: %w: %s (%s)", providers.ErrClusterExists, id, info.Status)
	}
	return d.deploy(ctx, id, providers.ModeSession, "", providers.ClusterSpec{TaskManagers: spec.TaskManagers, JobManagers: spec.JobManagers},
		nil, withMode(spec.Config, conf.ModeSession))
}

// DeployJobCluster deploys spec.Graph on a per-job cluster, which ends
// with the job. The returned client's JobIDs holds the job's ID.
func (d *ClusterDescriptor) DeployJobCluster(ctx context.Context, spec JobSpec) (*ClusterClient, error) {
	if spec.Graph == nil && spec.Plan == nil {
		return nil, errors.New("client: DeployJobCluster needs the planned JobGraph (PlanJob)")
	}
	var jobID string
	graph := func(ctx context.Context) ([]byte, error) {
		planned := spec.Graph
		if planned == nil {
			var err error
			if planned, err = spec.Plan(ctx); err != nil {
				return nil, err
			}
		}
		g := *planned
		if g.JobID == "" {
			g.JobID = randomJobID()
		}
		jobID = g.JobID
		pbg, err := proto.Marshal(jobgraph.ToProto(&g))
		if err != nil {
			return nil, fmt.Errorf("client: %w", err)
		}
		return pbg, nil
	}
	cc, err := d.deployJob(ctx, "job", providers.ModePerJob, spec, graph)
	if err != nil {
		return nil, err
	}
	cc.jobs = []string{jobID}
	return cc, nil
}

// DeployApplicationCluster deploys an application cluster: its JobManager
// runs spec.JobBinary's main in application-driver role, which submits the
// job(s); the cluster ends with the last of them.
func (d *ClusterDescriptor) DeployApplicationCluster(ctx context.Context, spec JobSpec) (*ClusterClient, error) {
	return d.deployJob(ctx, "app", providers.ModeApplication, spec, nil)
}

// deployJob is the one flow of per-job and application clusters: they
// differ in the JobGraph staged (per-job) or the program arguments passed
// (application).
func (d *ClusterDescriptor) deployJob(ctx context.Context, prefix string, mode providers.Mode, spec JobSpec, jobGraph func(context.Context) ([]byte, error)) (*ClusterClient, error) {
	if spec.JobBinary == "" {
		return nil, errors.New("client: no job binary")
	}
	extra := withMode(spec.Config, string(mode))
	extra[conf.DeploymentAttached.Key()] = strconv.FormatBool(!spec.Detached)
	id := NewClusterID(prefix)
	extra[conf.DeploymentClusterID.Key()] = id
	if jobGraph == nil {
		args, _ := json.Marshal(append([]string{}, spec.Args...))
		extra[conf.DeploymentProgramArgs.Key()] = string(args)
	}
	return d.deploy(ctx, id, mode, spec.JobBinary, providers.ClusterSpec{}, jobGraph, extra)
}

func withMode(cfg map[string]string, mode string) map[string]string {
	out := make(map[string]string, len(cfg)+4)
	for k, v := range cfg {
		out[k] = v
	}
	out[conf.DeploymentMode.Key()] = mode
	return out
}

// deploy stages and deploys a cluster of size's TaskManagers and
// JobManagers; on error it removes what it staged. jobGraph, if not nil,
// makes a per-job cluster's serialized JobGraph while the binaries are
// staged.
func (d *ClusterDescriptor) deploy(ctx context.Context, id string, mode providers.Mode, jobBin string, size providers.ClusterSpec, jobGraph func(context.Context) ([]byte, error), extra map[string]string) (_ *ClusterClient, err error) {
	goflBin, err := goflBinary(d.cfg)
	if err != nil {
		return nil, err
	}
	stageBin := goflBin
	if ip, ok := d.dep.(providers.InPlaceBinary); ok && ip.RunsBinaryInPlace() {
		stageBin = "" // nobody would read it from the cache
	}
	// The JobGraph (planned meanwhile) and the cluster's certificates are
	// staged while the binaries are: each file waits for its own fsync.
	var graph []byte
	var graphErr error
	stageCtx, stopStaging := context.WithCancel(ctx)
	defer stopStaging()
	planAndStage := func(st *storage.Staging) error {
		if jobGraph == nil {
			return nil
		}
		if graph, graphErr = jobGraph(ctx); graphErr != nil {
			stopStaging() // the deployment failed: no need to finish staging
			return graphErr
		}
		if err := st.PutJobGraph(stageCtx, id, graph); err != nil {
			return fmt.Errorf("client: staging the JobGraph: %w", err)
		}
		return nil
	}
	tlsExtra := maps.Clone(extra)
	stageTLS := func(st *storage.Staging) error { return d.stageInternalTLS(stageCtx, st, id, tlsExtra) }
	s, err := d.stage(stageCtx, id, stageBin, jobBin, planAndStage, stageTLS)
	if graphErr != nil {
		return nil, graphErr
	}
	if err != nil {
		return nil, err
	}
	maps.Copy(extra, tlsExtra)
	defer func() {
		if err != nil && !errors.Is(err, providers.ErrClusterExists) { // not ours to remove
			s.Remove()
		}
	}()
	if err := stageSecrets(ctx, s.st, id, d.cfg, extra, d.provider); err != nil {
		return nil, err
	}
	var artifacts []string
	if s.goflURI != "" {
		artifacts = append(artifacts, s.goflURI)
	}
	if jobBin != "" {
		artifacts = append(artifacts, s.jobURI)
		extra[conf.DeploymentJobBinary.Key()] = s.jobURI
	}
	if graph != nil {
		cdir, _ := s.st.ClusterDir(id)
		extra[conf.DeploymentJobGraph.Key()] = s.st.FileSystem().URI(cdir + "/" + storage.JobGraphFile)
	}
	info, err := d.dep.Deploy(ctx, providers.ClusterSpec{
		ClusterID: id, Mode: mode, Binary: goflBin, Artifacts: artifacts, TaskManagers: size.TaskManagers,
		JobManagers: size.JobManagers, Config: clusterConfig(d.cfg, extra),
	})
	if err != nil {
		return nil, fmt.Errorf("client: deploying the %s cluster %s: %w", mode, id, err)
	}
	info.RESTAddress = leaderAddress(ctx, info.RESTAddress)
	opts, err := ConfigOptions(d.cfg)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	cl, err := New(info.RESTAddress, opts...)
	if err != nil {
		return nil, err
	}
	return &ClusterClient{Client: cl, Info: info, Staged: s.report, desc: d, staging: s}, nil
}

// RetrieveCluster returns a client of a running cluster the provider knows
// (Flink's ClusterDescriptor.retrieve). A cluster that ended fails with
// providers.ErrClusterNotFound.
func (d *ClusterDescriptor) RetrieveCluster(ctx context.Context, clusterID string) (*ClusterClient, error) {
	info, err := d.dep.Retrieve(ctx, clusterID)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	switch info.Status {
	case providers.StatusTerminated:
		if why := info.Details["error"]; why != "" {
			return nil, fmt.Errorf("client: %w: %s has terminated: %s", providers.ErrClusterNotFound, clusterID, why)
		}
		return nil, fmt.Errorf("client: %w: %s has terminated", providers.ErrClusterNotFound, clusterID)
	case providers.StatusFailed:
		return nil, fmt.Errorf("client: %w: %s has failed (%s); gofl session stop %s removes what is left of it",
			providers.ErrClusterNotFound, clusterID, info.Details["error"], clusterID)
	}
	info.RESTAddress = leaderAddress(ctx, info.RESTAddress)
	opts, err := ConfigOptions(d.cfg)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	cl, err := New(info.RESTAddress, opts...)
	if err != nil {
		return nil, err
	}
	return &ClusterClient{Client: cl, Info: info, desc: d}, nil
}

// ListClusters lists the provider's clusters (cleaning records of ended
// ones).
func (d *ClusterDescriptor) ListClusters(ctx context.Context) ([]providers.ClusterInfo, error) {
	return d.dep.List(ctx)
}

// KillCluster kills a cluster through its provider and removes its
// staging directory; a cluster already gone is fine for the staging part
// and reported as providers.ErrClusterNotFound.
func (d *ClusterDescriptor) KillCluster(ctx context.Context, clusterID string) error {
	kerr := d.dep.Kill(ctx, clusterID)
	if kerr != nil && !errors.Is(kerr, providers.ErrClusterNotFound) {
		return fmt.Errorf("client: %w", kerr)
	}
	st, err := d.openStaging(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.RemoveCluster(ctx, clusterID); err != nil {
		return fmt.Errorf("client: removing the staging directory of %s: %w", clusterID, err)
	}
	if kerr != nil {
		return fmt.Errorf("client: %w", kerr)
	}
	return nil
}

// ClusterClient talks to one deployed cluster (Flink's ClusterClient):
// the embedded REST Client submits, lists, describes, cancels, stops and
// savepoints jobs and fetches their results; Shutdown and Finish end the
// cluster.
type ClusterClient struct {
	*Client
	// Info is the provider's view when the client was made.
	Info providers.ClusterInfo
	// Staged is set when this client deployed the cluster.
	Staged Staged

	desc    *ClusterDescriptor
	staging *staged // nil unless this client deployed the cluster
	jobs    []string
}

// ClusterID is the cluster's ID.
func (c *ClusterClient) ClusterID() string { return c.Info.ClusterID }

// JobIDs lists the cluster's own jobs: a per-job cluster's one, an
// application's as its JobManager reports them so far; nil for a session.
func (c *ClusterClient) JobIDs(ctx context.Context) []string {
	if c.jobs != nil {
		return c.jobs
	}
	if c.Info.Mode == providers.ModeApplication {
		st, _ := c.Application(ctx)
		return st.Jobs
	}
	return nil
}

// Shutdown kills the cluster and removes its staging directory. Idempotent.
func (c *ClusterClient) Shutdown(ctx context.Context) error {
	err := c.desc.KillCluster(ctx, c.Info.ClusterID)
	if errors.Is(err, providers.ErrClusterNotFound) {
		return nil
	}
	return err
}

// Finish is what an attached client does once its per-job or application
// cluster's work ended: it reads the final state (which lets an attached
// JobManager exit), removes the staging directory and waits up to wait for
// the cluster to be gone. It reports whether it is.
func (c *ClusterClient) Finish(ctx context.Context, wait time.Duration) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; {
		st, err := c.Application(ctx)
		if err != nil || st.State != "RUNNING" {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	if c.staging != nil {
		c.staging.Remove()
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var exited <-chan struct{} // nil: poll only
	if w, ok := c.desc.dep.(providers.ExitWatcher); ok {
		exited = w.Exited(c.Info.ClusterID)
	}
	for {
		info, err := c.desc.dep.Retrieve(ctx, c.Info.ClusterID)
		if errors.Is(err, providers.ErrClusterNotFound) || err == nil && info.Status == providers.StatusTerminated {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-exited:
			exited = nil // look again now; then poll
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ApplicationPath is the REST path of a per-job or application cluster's
// status (jobmanager.ApplicationPath).
const ApplicationPath = "/application"

// ApplicationStatus is GET /application of a per-job or application
// cluster (jobmanager.ApplicationStatus).
type ApplicationStatus struct {
	Mode  string   `json:"mode"`
	State string   `json:"state"` // RUNNING, FINISHED or FAILED
	Jobs  []string `json:"jobs"`
	Error string   `json:"error,omitempty"`
}

// Application returns the cluster's application status; a session
// cluster has none (restapi.ErrBadRequest or a 404 error).
func (c *Client) Application(ctx context.Context) (ApplicationStatus, error) {
	var st ApplicationStatus
	err := c.do(ctx, "GET", ApplicationPath, "", nil, &st)
	return st, err
}

// applicationWaitParam is jobmanager.ApplicationWaitParam.
const applicationWaitParam = "wait"

// AwaitApplication is Application waiting, while the state is RUNNING, up
// to wait for it to end (a long poll; the JobManager bounds it, and so does
// the client's request timeout). Unlike Application's, its answer does not
// let an attached cluster go: the client still reads the result after it.
func (c *Client) AwaitApplication(ctx context.Context, wait time.Duration) (ApplicationStatus, error) {
	if c.timeout > 0 {
		wait = min(wait, c.timeout/2)
	}
	var st ApplicationStatus
	err := c.do(ctx, "GET", ApplicationPath, url.Values{applicationWaitParam: {wait.String()}}.Encode(), nil, &st)
	return st, err
}

// WatchEnd returns a channel closed once the cluster's application state
// left RUNNING, learnt by waited reads (AwaitApplication) in a goroutine, so
// a client following the job wakes at its end instead of at its next poll.
// The channel stays open if the JobManager does not answer or does not wait
// (callers poll on). stop ends the goroutine and waits for it.
func (c *Client) WatchEnd(ctx context.Context) (ended <-chan struct{}, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	ch, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			began := time.Now()
			st, err := c.AwaitApplication(ctx, 10*time.Second)
			switch {
			case err != nil:
				return
			case st.State != "RUNNING":
				close(ch)
				return
			case time.Since(began) < time.Second:
				return // a JobManager that answers without waiting: leave it to the polls
			}
		}
	}()
	return ch, func() { cancel(); <-done }
}

// --- staging ---

// staged is what deploy put in the staging area.
type staged struct {
	st        *storage.Staging
	clusterID string
	goflURI   string
	jobURI    string
	report    Staged
}

func (d *ClusterDescriptor) openStaging(ctx context.Context) (*storage.Staging, error) {
	dir := conf.ExpandEnv(conf.StagingDir.Get(d.cfg))
	st, err := storage.OpenStaging(ctx, dir, storage.OptionsFromConf(d.cfg))
	if err != nil {
		return nil, fmt.Errorf("client: staging (staging.dir %s): %w", dir, err)
	}
	return st, nil
}

// stage puts the gofl binary and the job binary (each if not "") in the
// blob cache and, on its own goroutine, the configuration snapshot in the
// cluster's directory, while each of alongside stages more of the
// cluster's files, on its own goroutine too. On any error it waits for them all, then removes the cluster's
// directory again and returns the first error.
func (d *ClusterDescriptor) stage(ctx context.Context, clusterID, goflBin, jobBin string, alongside ...func(*storage.Staging) error) (_ *staged, err error) {
	st, err := d.openStaging(ctx)
	if err != nil {
		return nil, err
	}
	s := &staged{st: st, clusterID: clusterID, report: Staged{Dir: conf.ExpandEnv(conf.StagingDir.Get(d.cfg))}}
	alongside = append(alongside, func(st *storage.Staging) error { return d.stageConfig(ctx, st, clusterID) })
	side := make(chan error, len(alongside))
	for _, f := range alongside {
		go func() { side <- f(st) }()
	}
	defer func() {
		for range alongside {
			if serr := <-side; err == nil {
				err = serr
			}
		}
		if err != nil {
			s.Remove()
		}
	}()
	return s, d.stageBlobs(ctx, s, goflBin, jobBin)
}

// stageBlobs stages the binaries and records that the cluster uses them.
func (d *ClusterDescriptor) stageBlobs(ctx context.Context, s *staged, goflBin, jobBin string) error {
	st, clusterID := s.st, s.clusterID
	var keys []string
	if goflBin != "" {
		key, _, err := st.PutBlobFile(ctx, goflBin)
		if err != nil {
			return fmt.Errorf("client: staging the gofl binary: %w", err)
		}
		if s.goflURI, err = st.BlobURI(key); err != nil {
			return err
		}
		keys = append(keys, key)
	}
	if jobBin != "" {
		var err error
		if s.report.JobKey, s.report.JobUploaded, err = st.PutBlobFile(ctx, jobBin); err != nil {
			return fmt.Errorf("client: staging the job binary: %w", err)
		}
		if s.jobURI, err = st.BlobURI(s.report.JobKey); err != nil {
			return err
		}
	}
	if s.report.JobKey != "" {
		keys = append(keys, s.report.JobKey)
	}
	if err := markBlobsUsed(ctx, st, clusterID, keys); err != nil {
		return fmt.Errorf("client: recording the cluster's blobs: %w", err)
	}
	d.pruneAfterStaging(ctx, st)
	return nil
}

// stageConfig stages the configuration snapshot and the delegation tokens
// in the cluster's directory.
func (d *ClusterDescriptor) stageConfig(ctx context.Context, st *storage.Staging, clusterID string) error {
	y, err := yaml.Marshal(d.cfg.Snapshot())
	if err != nil {
		return err
	}
	if err := st.PutConfig(ctx, clusterID, y); err != nil {
		return fmt.Errorf("client: staging the configuration: %w", err)
	}
	return d.stageDelegationTokens(ctx, st, clusterID)
}

// Remove removes the cluster's staging directory and closes the staging
// area (idempotent).
func (s *staged) Remove() {
	if s.st == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = s.st.RemoveCluster(ctx, s.clusterID)
	s.st.Close()
	s.st = nil
}

// SecretsFile is the staged file of a cluster's secret options
// (conf.DeploymentSecretsFile).
const SecretsFile = "secrets.yaml"

// stageSecrets stages the secret options of cfg and extra (passwords,
// tokens) 0600 as the cluster's SecretsFile and points
// deployment.secrets-file of extra at it, so that they stay off command
// lines and job specs (clusterConfig drops them). Nothing when there are
// none.
func stageSecrets(ctx context.Context, st *storage.Staging, clusterID string, cfg *conf.Configuration, extra map[string]string, provider string) error {
	all := cfg.Snapshot()
	maps.Copy(all, extra)
	_, secrets := conf.SplitSecrets(all)
	if t := os.Getenv("NOMAD_TOKEN"); provider == "nomad" && secrets[conf.NomadToken.Key()] == "" && t != "" {
		// The JobManager's own Nomad calls (its TaskManagers) need the
		// client's token; through this file, not the job spec's environment.
		secrets[conf.NomadToken.Key()] = t
	}
	if len(secrets) == 0 {
		return nil
	}
	y, err := conf.MarshalSecrets(secrets)
	if err != nil {
		return err
	}
	if err := st.PutClusterSecretFile(ctx, clusterID, SecretsFile, bytes.NewReader(y)); err != nil {
		return fmt.Errorf("client: staging the cluster's secret options: %w", err)
	}
	dir, err := st.ClusterDir(clusterID)
	if err != nil {
		return err
	}
	extra[conf.DeploymentSecretsFile.Key()] = st.FileSystem().URI(dir + "/" + SecretsFile)
	return nil
}

// clusterConfig is the configuration a deployed JobManager gets: the
// client's settings plus the deployment's, without secret options (see
// stageSecrets).
func clusterConfig(cfg *conf.Configuration, extra map[string]string) map[string]string {
	out := cfg.Snapshot()
	delete(out, conf.DeploymentBinary.Key())
	// Expanded here: $HOME on a Nomad node is the agent's, not the client's.
	out[conf.StagingDir.Key()] = conf.ExpandEnv(conf.StagingDir.Get(cfg))
	maps.Copy(out, extra)
	out, _ = conf.SplitSecrets(out)
	return out
}

// goflBinary is the gofl binary clusters run: deployment.binary, else
// this executable.
func goflBinary(cfg *conf.Configuration) (string, error) {
	if b := conf.DeploymentBinary.Get(cfg); b != "" {
		return filepath.Abs(b)
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("client: locating the gofl binary: %w (set deployment.binary)", err)
	}
	return exe, nil
}

// NewClusterID is prefix-<12 random hex digits>.
func NewClusterID(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

func randomJobID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// --- planning ---

// PlanOptions tune PlanJob.
type PlanOptions struct {
	// Parallelism is the job's default parallelism (GOFL_PARALLELISM);
	// 0: the job's own.
	Parallelism int
	// SavepointPath: the job restores from it, so its file sinks keep
	// their directories (execution.savepoint.path).
	SavepointPath string
	// Timeout bounds planning; 0: 2 minutes.
	Timeout time.Duration
	// Env is more KEY=VALUE environment for the binary, after this
	// process's: the client's file-system settings (storage.ClientEnv), so
	// that the plan role reaches hdfs:// (Kerberos) as the cluster will.
	Env []string
}

// ErrNotAJob means the binary printed no JobGraph in plan role.
var ErrNotAJob = errors.New("client: not a job binary")

// PlanJob runs the job binary in plan role (GOFL_ROLE=plan) with args and
// parses the JobGraph it prints, as `gofl run` does before submitting to a
// session or deploying a per-job cluster. The plan role also checks the
// job's output directories (see stream.WriteAsText).
func PlanJob(ctx context.Context, bin string, args []string, opts PlanOptions) (*jobgraph.JobGraph, error) {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	path := bin
	if !strings.ContainsRune(path, filepath.Separator) {
		path = "." + string(filepath.Separator) + path
	}
	cmd := exec.CommandContext(ctx, path, args...)
	env := make([]string, 0, len(os.Environ())+3)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOFL_ROLE=") && !strings.HasPrefix(kv, "GOFL_PARALLELISM=") && !strings.HasPrefix(kv, "GOFL_RUNNER_") &&
			!strings.HasPrefix(kv, envSavepointPath+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, "GOFL_ROLE=plan")
	if opts.Parallelism > 0 {
		env = append(env, "GOFL_PARALLELISM="+strconv.Itoa(opts.Parallelism))
	}
	if opts.SavepointPath != "" {
		env = append(env, envSavepointPath+"="+opts.SavepointPath)
	}
	env = append(env, opts.Env...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s did not print its plan within %v; is it a gofl job binary (main calling stream.Main)? (%w)", bin, timeout, ErrNotAJob)
		}
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("planning the job failed: %s", strings.TrimPrefix(msg, "gofl job: "))
	}
	var m pb.JobGraph
	if err := protojson.Unmarshal(stdout.Bytes(), &m); err != nil || len(m.Vertices) == 0 {
		return nil, fmt.Errorf("%s is not a gofl job binary: with GOFL_ROLE=plan it printed no JobGraph (its main must call stream.Main) (%w)", bin, ErrNotAJob)
	}
	jg := jobgraph.FromProto(&m)
	if err := jg.Validate(); err != nil {
		return nil, fmt.Errorf("the plan of %s: %w", bin, err)
	}
	return jg, nil
}

// envSavepointPath is stream.EnvSavepointPath (stream imports client).
const envSavepointPath = "GOFL_EXECUTION_SAVEPOINT_PATH"

// leaderAddress is the REST address of the leading JobManager, when addr
// is a standby's (high availability), else addr.
func leaderAddress(ctx context.Context, addr string) string {
	return providers.LeaderRESTAddress(ctx, &http.Client{Timeout: 5 * time.Second}, addr)
}
