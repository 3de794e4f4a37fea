package jobmanager

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/internal/blob"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/jobmanager/dispatcher"
	"github.com/gofl/gofl/jobmanager/rest"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/rpc/restapi"
	"github.com/gofl/gofl/storage"
)

// Environment of the job binary in application-driver role.
const (
	// EnvDriverREST is the JobManager's REST address the driver submits to.
	EnvDriverREST = "GOFL_JOBMANAGER_REST"
	// EnvDriverToken authorizes the driver's submissions (header DriverTokenHeader).
	EnvDriverToken = "GOFL_DRIVER_TOKEN"
	// EnvDriverBinaryKey is the job binary's blob key, for the JobGraphs' BinaryKey.
	EnvDriverBinaryKey = "GOFL_JOB_BINARY_KEY"
	// DriverTokenHeader carries the driver's token on POST /jobs.
	DriverTokenHeader = "X-Gofl-Driver-Token"
	// ApplicationPath is the REST path of a cluster's application status.
	ApplicationPath = "/application"
	// ApplicationWaitParam is GET ApplicationPath's query parameter
	// ?wait=DURATION: while the state is RUNNING the answer waits up to
	// DURATION (at most maxApplicationWait) for it to end, so a client
	// learns the end at once instead of by polling. A waited read does not
	// count as the attached client's last one (it still reads the job's
	// result after it): only a plain read of the final state lets the
	// cluster go.
	ApplicationWaitParam = "wait"
	// maxApplicationWait bounds one waited read.
	maxApplicationWait = time.Minute
)

// ApplicationStatus is what GET /application returns: the state of what
// a per-job or application cluster runs (RUNNING until every job ended).
type ApplicationStatus struct {
	Mode  string   `json:"mode"`
	State string   `json:"state"` // RUNNING, FINISHED or FAILED
	Jobs  []string `json:"jobs"`
	Error string   `json:"error,omitempty"`
}

// deployment is a per-job or application cluster's own work: it loads the
// staged artifacts at start, runs the job (or the application driver),
// and ends the JobManager once everything ended.
type deployment struct {
	mode      string
	clusterID string
	cfg       *conf.Configuration
	log       zerolog.Logger
	staging   *storage.Staging
	binaryKey string
	tokens    *clusterTokens     // the staged delegation tokens (nil: none)
	binPath   string             // the job binary in the blob store (application mode)
	jobGraph  *jobgraph.JobGraph // per-job mode
	args      []string           // application mode
	token     string
	fetched   chan struct{} // a client fetched the final state
	fetchOnce sync.Once
	// over is closed once status left RUNNING or run returned: it wakes
	// waited reads of ApplicationPath. Under high availability a term that
	// ends returns from run too: later waited reads then answer RUNNING at
	// once, and clients fall back to polling (client.WatchEnd).
	over     chan struct{}
	overOnce sync.Once
	// submitted is closed once a per-job cluster submitted its job (or
	// failed to): until then the REST API does not answer about jobs, so a
	// client following the job never sees it missing.
	submitted  chan struct{}
	submitOnce sync.Once

	// appID is set for an application cluster under high availability
	// (high-availability.cluster-id): its driver's jobs get fixed IDs
	// (jobgraph.ApplicationJobID), so a restarted JobManager's driver
	// attaches to the recovered jobs instead of submitting them again.
	appID string

	mu     sync.Mutex
	status ApplicationStatus
	// disp is the Dispatcher of the running work (set by run).
	disp *dispatcher.Dispatcher
	// ended are the application's jobs that reached a terminal state under
	// a former JobManager (from the JobResultStore): the driver's
	// submission attached to them.
	ended map[string]string
}

// prepareDeployment opens the staging area, the staged delegation tokens
// and, for per-job clusters, the JobGraph; the job binary is checked
// later, by loadBinary, which the caller must call before run. On error
// everything staged for the cluster is removed.
func prepareDeployment(ctx context.Context, c *conf.Configuration, log zerolog.Logger) (_ *deployment, err error) {
	d := &deployment{
		mode: conf.DeploymentMode.Get(c), clusterID: conf.DeploymentClusterID.Get(c), cfg: c,
		log: log.With().Str("component", "deployment").Logger(), fetched: make(chan struct{}),
		submitted: make(chan struct{}), over: make(chan struct{}),
	}
	d.status = ApplicationStatus{Mode: d.mode, State: "RUNNING", Jobs: []string{}}
	if d.clusterID == "" {
		return nil, fmt.Errorf("jobmanager: a %s JobManager needs deployment.cluster-id", d.mode)
	}
	d.staging, err = storage.OpenStaging(ctx, conf.ExpandEnv(conf.StagingDir.Get(c)), storage.OptionsFromConf(c))
	if err != nil {
		return nil, fmt.Errorf("jobmanager: staging (staging.dir): %w", err)
	}
	defer func() {
		if err != nil {
			d.removeStaging()
			d.staging.Close()
		}
	}()
	binURI := conf.DeploymentJobBinary.Get(c)
	if binURI == "" {
		return nil, fmt.Errorf("jobmanager: a %s JobManager needs deployment.job-binary", d.mode)
	}
	if d.binaryKey, err = blob.KeyOfPath(binURI); err != nil {
		return nil, fmt.Errorf("jobmanager: deployment.job-binary %s is not a blob of the staging cache (<staging.dir>/.gofl/blobs/sha256/<hex>)", binURI)
	}
	if d.tokens, err = loadClusterTokens(ctx, c, d.staging, d.clusterID, false, d.log); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			d.tokens.remove()
		}
	}()
	switch d.mode {
	case conf.ModePerJob:
		uri := conf.DeploymentJobGraph.Get(c)
		if uri == "" {
			return nil, errors.New("jobmanager: a per-job JobManager needs deployment.jobgraph")
		}
		b, err := readURI(ctx, uri, storage.OptionsFromConf(c))
		if err != nil {
			return nil, fmt.Errorf("jobmanager: reading the staged JobGraph: %w", err)
		}
		var m pb.JobGraph
		if err := proto.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("jobmanager: the staged JobGraph %s: %w", uri, err)
		}
		d.jobGraph = jobgraph.FromProto(&m)
		d.jobGraph.BinaryKey = d.binaryKey
		if err := d.jobGraph.Validate(); err != nil {
			return nil, fmt.Errorf("jobmanager: the staged JobGraph %s: %w", uri, err)
		}
	case conf.ModeApplication:
		d.args = conf.ProgramArgs(c)
		var b [16]byte
		_, _ = rand.Read(b[:])
		d.token = hex.EncodeToString(b[:])
	}
	return d, nil
}

// loadBinary loads the staged job binary into the blob store, checked
// (loadStagedBinary). It may run while the cluster starts (its
// TaskManagers, see initialSlots), but before run: nothing of the job runs
// unless it passed.
func (d *deployment) loadBinary(ctx context.Context, blobs *blob.Store) error {
	uri := conf.DeploymentJobBinary.Get(d.cfg)
	if err := loadStagedBinary(ctx, uri, d.binaryKey, blobs, storage.OptionsFromConf(d.cfg)); err != nil {
		return err
	}
	d.log.Info().Str("uri", uri).Str("key", d.binaryKey).Msg("job binary loaded from staging")
	if d.mode != conf.ModeApplication {
		return nil
	}
	var err error
	if d.binPath, err = blobs.Path(d.binaryKey); err != nil {
		return fmt.Errorf("jobmanager: %w", err)
	}
	if err := os.Chmod(d.binPath, 0o755); err != nil {
		return fmt.Errorf("jobmanager: %w", err)
	}
	return nil
}

// discard removes what prepareDeployment loaded and staged, for a start
// that failed before the cluster ran.
func (d *deployment) discard() {
	d.tokens.remove()
	d.removeStaging()
	d.staging.Close()
}

// initialSlots is how many slots a per-job cluster starts TaskManagers
// for at once, before its job is submitted: what the job's sources need
// (in each slot sharing group the largest source parallelism; a vertex
// outside any group alone), which any schedule deploys first. Too few is
// harmless (the job asks for the rest); 0 for an application, whose jobs
// are not known yet.
func (d *deployment) initialSlots() int {
	if d == nil || d.jobGraph == nil {
		return 0
	}
	g := d.jobGraph
	hasInput := map[jobgraph.VertexID]bool{}
	for _, e := range g.Edges {
		hasInput[e.Target] = true
	}
	groups := map[string]int{}
	n := 0
	for _, v := range g.Vertices {
		if hasInput[v.ID] {
			continue
		}
		p := max(v.Parallelism, 1)
		if v.SlotSharingGroup == "" {
			n += p
			continue
		}
		groups[v.SlotSharingGroup] = max(groups[v.SlotSharingGroup], p)
	}
	for _, p := range groups {
		n += p
	}
	return n
}

// loadStagedBinary copies (on the local disk: hard-links) the blob of the
// staging cache at uri into the blob store as key (blob.KeyOfPath of uri),
// checked against that digest. A blob whose content does
// not match is corrupt: it is removed from the cache, so the next
// deployment uploads it again.
func loadStagedBinary(ctx context.Context, uri, key string, blobs *blob.Store, opts storage.Options) error {
	if blobs.Has(key) {
		return nil
	}
	fsys, p, err := storage.Open(ctx, uri, opts)
	if err != nil {
		return fmt.Errorf("jobmanager: the staged job binary: %w", err)
	}
	defer fsys.Close()
	if local, ok := storage.LocalPath(fsys, p); ok {
		// On this host's disk: linked and checked, not copied (a job
		// binary is tens of MB, read again by every TaskManager).
		_, err := blobs.Link(local, key)
		if errors.Is(err, blob.ErrDigestMismatch) {
			_ = fsys.RemoveAll(ctx, p)
			return fmt.Errorf("jobmanager: the staged job binary %s is corrupt (%w); it was removed from the staging cache, deploy again to upload it anew", uri, err)
		}
		if err == nil {
			return nil
		}
		// Another file system, or no hard links: copy it.
	}
	rc, err := fsys.Open(ctx, p)
	if err != nil {
		return fmt.Errorf("jobmanager: the staged job binary: %w", err)
	}
	defer rc.Close()
	if _, _, err := blobs.Put(rc, key, 0); err != nil {
		if errors.Is(err, blob.ErrDigestMismatch) {
			_ = fsys.RemoveAll(ctx, p)
			return fmt.Errorf("jobmanager: the staged job binary %s is corrupt (%w); it was removed from the staging cache, deploy again to upload it anew", uri, err)
		}
		return fmt.Errorf("jobmanager: loading the staged job binary %s: %w", uri, err)
	}
	return nil
}

func readURI(ctx context.Context, uri string, opts storage.Options) ([]byte, error) {
	fsys, p, err := storage.Open(ctx, uri, opts)
	if err != nil {
		return nil, err
	}
	defer fsys.Close()
	return storage.ReadFile(ctx, fsys, p)
}

// removeStaging deletes the cluster's staging directory (idempotent).
func (d *deployment) removeStaging() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.staging.RemoveCluster(ctx, d.clusterID); err != nil {
		d.log.Warn().Err(err).Msg("removing the cluster's staging directory")
		return
	}
	d.log.Info().Str("cluster_id", d.clusterID).Msg("staging directory removed")
}

// run does the cluster's work and returns once it is over (and, if a
// client is attached, once it fetched the final state): nil if every job
// FINISHED.
func (d *deployment) run(ctx context.Context, disp *dispatcher.Dispatcher, restAddr string) error {
	d.mu.Lock()
	d.disp = disp
	d.mu.Unlock()
	defer d.markEnded() // stopped from outside: waited reads answer now
	var err error
	switch d.mode {
	case conf.ModePerJob:
		err = d.runPerJob(ctx, disp)
	case conf.ModeApplication:
		err = d.runApplication(ctx, disp, restAddr)
	}
	if ctx.Err() != nil {
		return nil // stopped from outside
	}
	d.mu.Lock()
	d.status.State = "FINISHED"
	if err != nil {
		d.status.State, d.status.Error = "FAILED", err.Error()
	}
	d.mu.Unlock()
	d.markEnded()
	ev := d.log.Info()
	if err != nil {
		ev = d.log.Warn().Err(err)
	}
	ev.Str("mode", d.mode).Msg("the cluster's work ended; shutting down")
	if conf.DeploymentAttached.Get(d.cfg) {
		select {
		case <-d.fetched:
		case <-ctx.Done():
		case <-time.After(conf.DeploymentResultFetchTimeout.Get(d.cfg)):
			d.log.Warn().Msg("no client fetched the final state; shutting down anyway")
		}
	}
	return err
}

// markEnded wakes the waited reads of ApplicationPath (idempotent).
func (d *deployment) markEnded() { d.overOnce.Do(func() { close(d.over) }) }

// awaitEnd waits, for a read of ApplicationPath with ApplicationWaitParam,
// until the work ended, the wait passed or the request went away. It
// reports whether the read waited (or asked to), and answers 400 itself
// for a malformed duration (ok false).
func (d *deployment) awaitEnd(w http.ResponseWriter, r *http.Request) (waited, ok bool) {
	v := r.URL.Query().Get(ApplicationWaitParam)
	if v == "" {
		return false, true
	}
	wait, err := time.ParseDuration(v)
	if err != nil || wait < 0 {
		writeJSON(w, http.StatusBadRequest, restapi.ErrorResponse{Errors: []string{
			fmt.Sprintf("%s=%q: want a duration such as 10s", ApplicationWaitParam, v)}})
		return true, false
	}
	t := time.NewTimer(min(wait, maxApplicationWait))
	defer t.Stop()
	select {
	case <-d.over:
	case <-t.C:
	case <-r.Context().Done():
	}
	return true, true
}

func (d *deployment) addJob(id string) {
	d.mu.Lock()
	if !slices.Contains(d.status.Jobs, id) {
		d.status.Jobs = append(d.status.Jobs, id)
	}
	d.mu.Unlock()
}

func (d *deployment) runPerJob(ctx context.Context, disp *dispatcher.Dispatcher) error {
	id := d.jobGraph.JobID
	var err error
	if _, derr := disp.JobDetails(ctx, id); id == "" || derr != nil {
		id, err = disp.SubmitJob(ctx, d.jobGraph)
	} else {
		// Recovered from the HA stores (high availability): a previous
		// JobManager of this cluster submitted it.
		d.log.Info().Str("job_id", id).Msg("the staged job was recovered, not submitted again")
	}
	d.submitOnce.Do(func() { close(d.submitted) })
	if err != nil {
		return fmt.Errorf("submitting the staged job: %w", err)
	}
	d.addJob(id)
	state, err := disp.WaitJob(ctx, id)
	if err != nil {
		return err
	}
	if state != "FINISHED" {
		return fmt.Errorf("job %s ended %s", id, state)
	}
	return nil
}

func (d *deployment) runApplication(ctx context.Context, disp *dispatcher.Dispatcher, restAddr string) error {
	cmd := exec.CommandContext(ctx, d.binPath, d.args...)
	env := make([]string, 0, len(os.Environ())+4)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOFL_ROLE=") && !strings.HasPrefix(kv, "GOFL_RUNNER_") && !strings.HasPrefix(kv, "GOFL_PARALLELISM=") {
			env = append(env, kv)
		}
	}
	if conf.SSLRestEnabled.Get(d.cfg) {
		restAddr = "https://" + restAddr
	}
	env = append(env, "GOFL_ROLE=driver", EnvDriverREST+"="+restAddr, EnvDriverToken+"="+d.token, EnvDriverBinaryKey+"="+d.binaryKey)
	if d.appID != "" {
		known, err := d.knownApplicationJobs(ctx, disp)
		if err != nil {
			return err
		}
		env = append(env, "GOFL_APPLICATION_ID="+d.appID, "GOFL_RECOVERED_JOB_IDS="+strings.Join(known, ","))
		if len(known) > 0 {
			d.log.Info().Strs("job_ids", known).Msg("the application's jobs are known already (recovered or ended): the driver attaches to them")
		}
	}
	if sp := conf.SavepointPath.Get(d.cfg); sp != "" {
		// A restored application's file sinks continue in their directories.
		env = append(env, "GOFL_EXECUTION_SAVEPOINT_PATH="+sp)
	}
	if d.cfg.IsSet(conf.DefaultParallelism.Key()) {
		// gofl run -p: the builders' default parallelism.
		env = append(env, "GOFL_PARALLELISM="+strconv.Itoa(conf.DefaultParallelism.Get(d.cfg)))
	}
	cmd.Env = env
	var tail tailBuffer
	cmd.Stdout = os.Stderr
	cmd.Stderr = io.MultiWriter(os.Stderr, &tail)
	cmd.WaitDelay = 10 * time.Second
	d.log.Info().Str("binary", d.binPath).Strs("args", d.args).Msg("starting the application driver")
	derr := cmd.Run()
	if derr != nil {
		derr = fmt.Errorf("the application driver failed (%v): %s", derr, strings.TrimSpace(tail.String()))
	}
	// Only the driver can submit, so every job is the application's.
	l, err := disp.ListJobs(ctx)
	if err != nil {
		return errors.Join(derr, err)
	}
	var errs []error
	if derr != nil {
		errs = append(errs, derr)
	} else if len(l.Jobs) == 0 {
		errs = append(errs, errors.New("the application driver submitted no job"))
	}
	d.mu.Lock()
	ended := maps.Clone(d.ended)
	d.mu.Unlock()
	for _, id := range slices.Sorted(maps.Keys(ended)) {
		d.addJob(id)
		if ended[id] != "FINISHED" {
			errs = append(errs, fmt.Errorf("job %s ended %s", id, ended[id]))
		}
	}
	for _, j := range l.Jobs {
		d.addJob(j.ID)
	}
	for _, j := range l.Jobs {
		state, err := disp.WaitJob(ctx, j.ID)
		if err != nil {
			errs = append(errs, err)
		} else if state != "FINISHED" {
			errs = append(errs, fmt.Errorf("job %s ended %s", j.ID, state))
		}
	}
	return errors.Join(errs...)
}

// knownApplicationJobs lists the application's fixed job IDs that this
// JobManager has (recovered from the JobGraphStore) or that ended under a
// former one (JobResultStore). The driver submits in order and every
// submission is stored before it is acknowledged, so they are a prefix.
func (d *deployment) knownApplicationJobs(ctx context.Context, disp *dispatcher.Dispatcher) ([]string, error) {
	var known []string
	for i := 0; ; i++ {
		id := jobgraph.ApplicationJobID(d.appID, i)
		if _, err := disp.JobDetails(ctx, id); err == nil {
			known = append(known, id)
			continue
		}
		_, ok, err := disp.TerminalResult(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("looking up the application's job %s: %w", id, err)
		}
		if !ok {
			return known, nil
		}
		known = append(known, id)
	}
}

// attach answers the driver's submission of a job this JobManager has
// already (recovered, or ended under a former JobManager) with the job's
// ID, as if it were accepted, and reports whether it did. r's body is
// restored for the next handler otherwise.
func (d *deployment) attach(w http.ResponseWriter, r *http.Request) bool {
	d.mu.Lock()
	disp := d.disp
	d.mu.Unlock()
	if d.appID == "" || disp == nil {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return false
	}
	var m pb.JobGraph
	if protojson.Unmarshal(body, &m) != nil || m.GetJobId() == "" {
		return false // the REST handler explains
	}
	id := m.GetJobId()
	if _, err := disp.JobDetails(r.Context(), id); err != nil {
		state, ok, err := disp.TerminalResult(r.Context(), id)
		if err != nil || !ok {
			return false
		}
		d.mu.Lock()
		if d.ended == nil {
			d.ended = map[string]string{}
		}
		d.ended[id] = state
		d.mu.Unlock()
	}
	d.log.Info().Str("job_id", id).Msg("the application driver attached to its recovered job instead of submitting it again")
	writeJSON(w, http.StatusAccepted, restapi.JobSubmitResponse{JobURL: "/jobs/" + id, JobID: id})
	return true
}

// handler wraps the REST API: per-job clusters accept no submissions,
// application clusters only the driver's; GET /application reports the
// cluster's state, and once it reports the final state an attached
// cluster may go (clients read it last, after following their jobs).
func (d *deployment) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := strings.TrimSuffix(r.URL.Path, "/")
		if d.mode == conf.ModePerJob && d.submitted != nil && strings.HasPrefix(strings.TrimPrefix(p, "/v1"), "/jobs") {
			select {
			case <-d.submitted:
			case <-r.Context().Done():
				return
			}
		}
		if r.Method == http.MethodPost && p == "/jobs" {
			switch {
			case d.mode == conf.ModePerJob:
				writeJSON(w, http.StatusForbidden, restapi.ErrorResponse{Errors: []string{
					fmt.Sprintf("cluster %s is a per-job cluster: it runs only the job it was deployed with and accepts no job submissions; submit to a session cluster (gofl session start, gofl run -m session)", d.clusterID)}})
				return
			case d.mode == conf.ModeApplication && !d.isDriver(r):
				writeJSON(w, http.StatusForbidden, restapi.ErrorResponse{Errors: []string{
					fmt.Sprintf("cluster %s is an application cluster: only its application driver submits jobs; submit to a session cluster (gofl session start, gofl run -m session)", d.clusterID)}})
				return
			case d.mode == conf.ModeApplication && d.attach(w, r):
				return
			case d.mode == conf.ModeApplication:
				// The driver's token is the authenticated path past
				// web.submit.enable, which is off by default here.
				r = r.WithContext(rest.Trusted(r.Context()))
			}
		}
		if r.Method == http.MethodGet && p == ApplicationPath {
			waited, ok := d.awaitEnd(w, r)
			if !ok {
				return
			}
			d.mu.Lock()
			st := d.status
			st.Jobs = append([]string{}, st.Jobs...)
			d.mu.Unlock()
			writeJSON(w, http.StatusOK, st)
			if st.State != "RUNNING" && !waited {
				// The client has the final state: an attached cluster may go.
				d.fetchOnce.Do(func() { close(d.fetched) })
			}
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isDriver reports whether r carries the application driver's token
// (compared in constant time).
func (d *deployment) isDriver(r *http.Request) bool {
	return d.token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get(DriverTokenHeader)), []byte(d.token)) == 1
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	b, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// driverRESTAddress is the REST address a local process reaches.
func driverRESTAddress(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(p)
	if over := t.b.Len() - 4096; over > 0 {
		t.b.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}
