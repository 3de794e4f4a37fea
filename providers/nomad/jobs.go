package nomad

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/logs"
)

// Job naming and metadata.
const (
	jobPrefix = "gofl-"
	// Meta keys on every job the provider submits.
	metaClusterID = "gofl.cluster-id"
	metaRole      = "gofl.role" // jobmanager or taskmanager
	metaMode      = "gofl.mode"
	metaWorkerID  = "gofl.worker-id"
	metaCreated   = "gofl.created"
	// metaAttempts is a JobManager job's JobManager attempts.
	metaAttempts = "gofl.jobmanager-attempts"
	// metaJobManagerJob is set on TaskManager jobs started by a JobManager
	// that itself runs in Nomad: its job ID (so orphans can be recognized).
	metaJobManagerJob = "gofl.jobmanager-job"
	metaArtifacts     = "gofl.artifacts"

	roleJobManager  = "jobmanager"
	roleTaskManager = "taskmanager"

	// Port labels.
	portRPC  = "rpc"
	portREST = "rest"
)

// JobManagerJobID is the Nomad job ID of a cluster's JobManager.
func JobManagerJobID(clusterID string) string { return jobPrefix + clusterID + "-" + roleJobManager }

// TaskManagerJobID is the Nomad job ID of a cluster's worker.
func TaskManagerJobID(clusterID, workerID string) string {
	return jobPrefix + clusterID + "-" + workerID
}

// clusterJobsPrefix is the ID prefix of every job of the cluster (and
// possibly of clusters whose ID extends it: filter by meta).
func clusterJobsPrefix(clusterID string) string { return jobPrefix + clusterID + "-" }

// binary is how a task gets the gofl binary.
type binary struct {
	path   string // pre-installed
	url    string // fetched by an artifact stanza
	sha256 string
}

func (b binary) String() string {
	if b.url != "" {
		return b.url
	}
	return b.path
}

// resolveBinary picks the binary: an explicit one (a URL or a path), else
// the options', else the running executable.
func resolveBinary(explicit string, o Options) (binary, error) {
	if explicit != "" {
		if strings.HasPrefix(explicit, "http://") || strings.HasPrefix(explicit, "https://") {
			sum := o.BinarySHA256
			if explicit != o.BinaryURL && o.BinaryURL != "" {
				return binary{}, fmt.Errorf("nomad: binary %s: provider.nomad.binary.sha256 belongs to %s", explicit, o.BinaryURL)
			}
			if err := checkBinaryURL(explicit, sum); err != nil {
				return binary{}, fmt.Errorf("nomad: %w", err)
			}
			return binary{url: explicit, sha256: strings.ToLower(sum)}, nil
		}
		if strings.Contains(explicit, "://") {
			return binary{}, fmt.Errorf("nomad: binary %s: only http(s) URLs can be fetched by Nomad (serve HDFS files through WebHDFS ...?op=OPEN) or a path on the nodes", explicit)
		}
		// A local path is the client's binary: a configured
		// provider.nomad.binary.url is what the nodes can reach (on a
		// multi-node cluster, or with exec's isolation, the client's path
		// is not there), for the JobManager as for its TaskManagers.
		if o.BinaryURL != "" {
			return binary{url: o.BinaryURL, sha256: strings.ToLower(o.BinarySHA256)}, nil
		}
		return binary{path: explicit}, nil
	}
	if o.BinaryURL != "" {
		return binary{url: o.BinaryURL, sha256: strings.ToLower(o.BinarySHA256)}, nil
	}
	if o.BinaryPath != "" {
		return binary{path: o.BinaryPath}, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return binary{}, fmt.Errorf("nomad: no gofl binary configured (provider.nomad.binary.path or .url) and the running executable is unknown: %w", err)
	}
	return binary{path: exe}, nil
}

// taskParams describe one gofl process as a Nomad job.
type taskParams struct {
	jobID, jobType, role string
	meta                 map[string]string
	env                  map[string]string
	cfg                  map[string]string // -D flags
	cpu, memoryMB        int
	bin                  binary
	// restarts is how often Nomad restarts the task in place after it
	// failed (JobManagers: provider.nomad.jobmanager.attempts - 1).
	restarts int
}

// buildJob renders a single-group, single-task job with dynamic ports rpc
// (and rest for JobManagers) and no rescheduling: when the process ends,
// the allocation ends, and the provider reports it, unless p.restarts
// lets Nomad restart a failed task in place first (same allocation, same
// ports: a JobManager's attempts).
func buildJob(o Options, p taskParams) *api.Job {
	args := []string{p.role}
	// Secret options never go in a job spec: processes read them from
	// conf.DeploymentSecretsFile.
	cfg, _ := conf.SplitSecrets(p.cfg)
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		args = append(args, "-D", k+"="+escapeInterpolation(cfg[k]))
	}
	env := maps.Clone(p.env)
	if env == nil {
		env = map[string]string{}
	}
	// The process's log (zerolog writes to stderr) as Nomad keeps it, so
	// the process can serve and archive it (package logs).
	env[logs.EnvLogFile] = "${NOMAD_ALLOC_DIR}/logs/" + p.role + ".stderr.0"
	task := &api.Task{
		Name:        p.role,
		Driver:      o.Driver,
		Env:         env,
		Resources:   &api.Resources{CPU: ptr(p.cpu), MemoryMB: ptr(p.memoryMB)},
		KillTimeout: ptr(o.KillTimeout),
		KillSignal:  "SIGTERM",
		Meta:        map[string]string{},
	}
	if p.bin.url != "" {
		// go-getter on a real Nomad does not always make the file
		// executable: chmod, then exec it with the arguments.
		task.Artifacts = []*api.TaskArtifact{{
			GetterSource:  ptr(p.bin.url),
			GetterOptions: map[string]string{"checksum": "sha256:" + p.bin.sha256},
			GetterMode:    ptr("file"),
			RelativeDest:  ptr("local/gofl"),
		}}
		task.Config = map[string]any{
			"command": "/bin/sh",
			"args":    append([]string{"-c", `chmod +x "$0" && exec "$0" "$@"`, "${NOMAD_TASK_DIR}/gofl"}, args...),
		}
	} else {
		task.Config = map[string]any{"command": p.bin.path, "args": args}
	}
	ports := []api.Port{{Label: portRPC}}
	if p.role == roleJobManager {
		ports = append(ports, api.Port{Label: portREST})
	}
	group := &api.TaskGroup{
		Name:             ptr(p.role),
		Count:            ptr(1),
		Networks:         []*api.NetworkResource{{DynamicPorts: ports}},
		RestartPolicy:    restartPolicy(p.restarts),
		ReschedulePolicy: &api.ReschedulePolicy{Attempts: ptr(0), Unlimited: ptr(false)},
		Tasks:            []*api.Task{task},
	}
	if p.jobType == "service" {
		// No deployments watching health: the provider watches allocations.
		group.Update = &api.UpdateStrategy{MaxParallel: ptr(0)}
	}
	job := &api.Job{
		ID:          ptr(p.jobID),
		Name:        ptr(p.jobID),
		Type:        ptr(p.jobType),
		Datacenters: o.Datacenters,
		Meta:        p.meta,
		Constraints: o.Constraints,
		TaskGroups:  []*api.TaskGroup{group},
	}
	switch p.role {
	case roleJobManager:
		job.Constraints = append(slices.Clone(o.Constraints), o.JobManagerConstraints...)
	case roleTaskManager:
		job.Constraints = append(slices.Clone(o.Constraints), o.TaskManagerConstraints...)
	}
	if o.NodePool != "" {
		job.NodePool = ptr(o.NodePool)
	}
	if o.Namespace != "" {
		job.Namespace = ptr(o.Namespace)
	}
	if o.Region != "" {
		job.Region = ptr(o.Region)
	}
	return job
}

func ptr[T any](v T) *T { return &v }

// nomadPortVar is a Nomad port variable the provider itself puts in task
// arguments (${NOMAD_IP_rpc}, ${NOMAD_PORT_rest}, ...).
var nomadPortVar = regexp.MustCompile(`^\$\{NOMAD_(IP|PORT)_(` + portRPC + `|` + portREST + `)\}$`)

// escapeInterpolation escapes ${ as $${ in a value gofl passes through,
// so Nomad hands it to the task literally: Nomad fails a task whose
// arguments reference a variable it does not know ("Unknown variable"),
// e.g. a constraint's ${meta.rack} or a user's ${...}. The provider's own
// port variables stay.
func escapeInterpolation(v string) string {
	if nomadPortVar.MatchString(v) {
		return v
	}
	return strings.ReplaceAll(v, "${", "$${")
}

// register submits a job that must not exist yet (EnforceRegister with
// index 0) and returns its evaluation ID. exists reports a job already
// registered under that ID.
func (c *client) register(ctx context.Context, job *api.Job) (evalID string, exists bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, _, err := c.api.Jobs().EnforceRegister(job, 0, w(ctx))
	if err != nil {
		// Nomad answers 500 (the test agent used to answer 400): the
		// message, not the status code, says the job exists.
		if isEnforceIndexConflict(err) {
			return "", true, nil
		}
		return "", false, c.wrap("registering job "+*job.ID, err)
	}
	return resp.EvalID, false, nil
}

// isEnforceIndexConflict reports Nomad's "Enforcing job modify index 0:
// job already exists" refusal, whatever its status code.
func isEnforceIndexConflict(err error) bool {
	return err != nil && strings.Contains(err.Error(), api.RegisterEnforceIndexErrPrefix)
}

// purge deregisters a job with purge; an unknown job is fine.
func (c *client) purge(ctx context.Context, jobID string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, _, err := c.api.Jobs().Deregister(jobID, true, w(ctx))
	if isNotFound(err) {
		return nil
	}
	return c.wrap("purging job "+jobID, err)
}

// waitEval blocks until the evaluation is no longer pending and returns
// an ErrPlacement error if it could not place every allocation.
func (c *client) waitEval(ctx context.Context, evalID string, job *api.Job) error {
	if evalID == "" {
		return nil
	}
	var idx uint64
	for {
		ev, meta, err := c.api.Evaluations().Info(evalID, q(ctx, idx, 10*time.Second))
		if err != nil {
			return c.wrap("reading evaluation "+evalID, err)
		}
		idx = meta.LastIndex
		switch ev.Status {
		case "pending":
			continue
		case "complete", "blocked":
			if len(ev.FailedTGAllocs) > 0 {
				return placementError(job, ev, c.addr)
			}
			return nil
		default: // failed, canceled
			return fmt.Errorf("%w: evaluation %s of job %s at %s is %s: %s", ErrPlacement, evalID, *job.ID, c.addr, ev.Status, ev.StatusDescription)
		}
	}
}

// placementError names what kept the scheduler from placing the job.
func placementError(job *api.Job, ev *api.Evaluation, addr string) error {
	var parts []string
	for _, group := range slices.Sorted(maps.Keys(ev.FailedTGAllocs)) {
		m := ev.FailedTGAllocs[group]
		var why []string
		why = append(why, fmt.Sprintf("%d node(s) evaluated", m.NodesEvaluated))
		if m.NodesEvaluated == 0 {
			why = append(why, fmt.Sprintf("no ready node in datacenters %v", job.Datacenters))
		}
		for _, k := range sortedKeys(m.ConstraintFiltered) {
			why = append(why, fmt.Sprintf("constraint %q filtered %d node(s)", k, m.ConstraintFiltered[k]))
		}
		for _, k := range sortedKeys(m.ClassFiltered) {
			why = append(why, fmt.Sprintf("class %q filtered %d node(s)", k, m.ClassFiltered[k]))
		}
		for _, k := range sortedKeys(m.DimensionExhausted) {
			why = append(why, fmt.Sprintf("%s exhausted on %d node(s)", k, m.DimensionExhausted[k]))
		}
		for _, k := range m.QuotaExhausted {
			why = append(why, "quota exhausted: "+k)
		}
		ask := ""
		for _, tg := range job.TaskGroups {
			if tg.Name != nil && *tg.Name == group {
				for _, t := range tg.Tasks {
					if t.Resources != nil && t.Resources.CPU != nil && t.Resources.MemoryMB != nil {
						ask = fmt.Sprintf(" (asked for cpu %d MHz, memory %d MB, driver %s)", *t.Resources.CPU, *t.Resources.MemoryMB, t.Driver)
					}
				}
			}
		}
		parts = append(parts, fmt.Sprintf("group %q%s: %s", group, ask, strings.Join(why, "; ")))
	}
	return fmt.Errorf("%w: nomad at %s cannot place job %s: %s", ErrPlacement, addr, *job.ID, strings.Join(parts, "; "))
}

func sortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// terminal reports an allocation that ended.
// restartPolicy restarts a failed task n times (a second after it ended;
// Nomad adds up to 25% jitter) within 30 minutes, then fails it.
func restartPolicy(n int) *api.RestartPolicy {
	delay := 15 * time.Second // no restarts: unused, Nomad's default
	if n > 0 {
		delay = time.Second
	}
	return &api.RestartPolicy{Attempts: ptr(n), Interval: ptr(30 * time.Minute), Delay: ptr(delay), Mode: ptr("fail")}
}

func terminal(clientStatus string) bool {
	return clientStatus == "complete" || clientStatus == "failed" || clientStatus == "lost"
}

func anyTaskRunning(ts map[string]*api.TaskState) bool {
	for _, t := range ts {
		if t != nil && t.State == "running" {
			return true
		}
	}
	return false
}

// settle waits up to d for a job's newest allocation to become terminal on
// its own (a task that failed to start ends its allocation a moment after
// the failure event), so it is not stopped midway.
func (c *client) settle(ctx context.Context, jobID string, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var idx uint64
	for ctx.Err() == nil {
		allocs, meta, err := c.api.Jobs().Allocations(jobID, true, q(ctx, idx, d))
		if err != nil {
			return
		}
		if a := newest(allocs); a == nil || terminal(a.ClientStatus) {
			return
		}
		idx = meta.LastIndex
	}
}

// newest returns the allocation created last.
func newest(allocs []*api.AllocationListStub) *api.AllocationListStub {
	var n *api.AllocationListStub
	for _, a := range allocs {
		if n == nil || a.CreateIndex > n.CreateIndex {
			n = a
		}
	}
	return n
}

// failureEvents are task events after which the task does not serve.
var failureEvents = map[string]bool{
	"Failed Artifact Download": true, "Driver Failure": true, "Failed Validation": true,
	"Setup Failure": true, "Not Restarting": true, "Terminated": true, "Killing": true,
}

// describeEvent renders a task event for errors.
func describeEvent(e *api.TaskEvent) string {
	msg := e.DisplayMessage
	for _, s := range []string{e.DownloadError, e.DriverError, e.ValidationError, e.SetupError, e.KillError, e.Message} {
		if s != "" && !strings.Contains(msg, s) {
			if msg != "" {
				msg += ": "
			}
			msg += s
		}
	}
	if e.Type == "Failed Artifact Download" {
		// Real Nomad says only "getter subprocess failed: exit status 1",
		// whatever went wrong: the hint must not depend on getter text.
		msg += " (the node could not fetch or verify the gofl binary: check that provider.nomad.binary.url answers from the Nomad nodes " +
			"and that provider.nomad.binary.sha256 is the SHA-256 of the file it serves)"
	}
	if e.Type == "Terminated" && msg == "" {
		msg = fmt.Sprintf("exit code %d, signal %d", e.ExitCode, e.Signal)
	}
	if msg == "" {
		return e.Type
	}
	return e.Type + ": " + msg
}

// taskFailure returns the first failure event of the task, if any.
func taskFailure(ts *api.TaskState) *api.TaskEvent {
	if ts == nil {
		return nil
	}
	for _, e := range ts.Events {
		if failureEvents[e.Type] {
			return e
		}
	}
	return nil
}

// exitOf derives a worker's exit status and cause from its task state.
func exitOf(a *api.AllocationListStub, task string) (int, error) {
	var ts *api.TaskState
	if a != nil {
		ts = a.TaskStates[task]
	}
	if ts != nil {
		for i := len(ts.Events) - 1; i >= 0; i-- {
			e := ts.Events[i]
			if e.Type == "Terminated" {
				if e.Signal != 0 {
					return -1, fmt.Errorf("killed by signal %d (allocation %s %s)", e.Signal, shortID(a.ID), a.ClientStatus)
				}
				return e.ExitCode, fmt.Errorf("exited with status %d (allocation %s %s)", e.ExitCode, shortID(a.ID), a.ClientStatus)
			}
		}
		// No exit seen (e.g. killed on stop, or never started): the last
		// event says what happened.
		if f := taskFailure(ts); f != nil && f.Type != "Killing" {
			return -1, fmt.Errorf("%s (allocation %s %s)", describeEvent(f), shortID(a.ID), a.ClientStatus)
		}
		if n := len(ts.Events); n > 0 {
			return -1, fmt.Errorf("%s (allocation %s %s)", describeEvent(ts.Events[n-1]), shortID(a.ID), a.ClientStatus)
		}
	}
	if a == nil {
		return -1, errors.New("its Nomad job is gone")
	}
	d := a.ClientDescription
	if d == "" {
		d = a.DesiredDescription
	}
	return -1, fmt.Errorf("allocation %s %s: %s", shortID(a.ID), a.ClientStatus, d)
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// portAddr finds a port label's host:port in an allocation.
func portAddr(a *api.Allocation, label string) string {
	if a.AllocatedResources != nil {
		for _, p := range a.AllocatedResources.Shared.Ports {
			if p.Label == label && p.Value != 0 {
				return net.JoinHostPort(p.HostIP, strconv.Itoa(p.Value))
			}
		}
		for _, n := range a.AllocatedResources.Shared.Networks {
			for _, p := range n.DynamicPorts {
				if p.Label == label && p.Value != 0 {
					return net.JoinHostPort(n.IP, strconv.Itoa(p.Value))
				}
			}
		}
		for _, t := range a.AllocatedResources.Tasks {
			for _, n := range t.Networks {
				for _, p := range n.DynamicPorts {
					if p.Label == label && p.Value != 0 {
						return net.JoinHostPort(n.IP, strconv.Itoa(p.Value))
					}
				}
			}
		}
	}
	return ""
}

// jobAllocIDs lists a job's allocation IDs (all of them, terminal too).
func (c *client) jobAllocIDs(ctx context.Context, jobID string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	allocs, _, err := c.api.Jobs().Allocations(jobID, true, q(ctx, 0, 0))
	if err != nil {
		return nil, c.wrap("listing allocations of "+jobID, err)
	}
	var ids []string
	for _, a := range allocs {
		if !terminal(a.ClientStatus) {
			ids = append(ids, a.ID)
		}
	}
	return ids, nil
}

// waitAllocsGone blocks until every allocation is terminal (or gone).
func (c *client) waitAllocsGone(ctx context.Context, ids []string) error {
	for _, id := range ids {
		var idx uint64
		for {
			a, meta, err := c.api.Allocations().Info(id, q(ctx, idx, 5*time.Second))
			if isNotFound(err) {
				break
			}
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("nomad: waiting for allocation %s to stop: %w", shortID(id), ctx.Err())
				}
				return c.wrap("reading allocation "+id, err)
			}
			if terminal(a.ClientStatus) || a.DesiredStatus != "run" && !anyTaskRunning(a.TaskStates) {
				// Ended, or told to stop with no task process left (a task
				// that failed to start, e.g. its artifact download).
				break
			}
			idx = meta.LastIndex
		}
	}
	return nil
}

// purgeAndWait purges the jobs and waits until their allocations stopped.
func (c *client) purgeAndWait(ctx context.Context, jobIDs ...string) error {
	var allocs []string
	var errs []error
	for _, id := range jobIDs {
		ids, err := c.jobAllocIDs(ctx, id)
		if err != nil {
			errs = append(errs, err)
		}
		allocs = append(allocs, ids...)
		if err := c.purge(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return c.waitAllocsGone(ctx, allocs)
}

// clusterJobs lists the jobs of a cluster (by ID prefix and meta).
func (c *client) clusterJobs(ctx context.Context, clusterID string) ([]*api.JobListStub, error) {
	return c.listJobs(ctx, clusterJobsPrefix(clusterID), func(j *api.JobListStub) bool { return j.Meta[metaClusterID] == clusterID })
}

func (c *client) listJobs(ctx context.Context, prefix string, keep func(*api.JobListStub) bool) ([]*api.JobListStub, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	qo := q(ctx, 0, 0)
	qo.Prefix = prefix
	jobs, _, err := c.api.Jobs().ListOptions(&api.JobListOptions{Fields: &api.JobListFields{Meta: true}}, qo)
	if err != nil {
		return nil, c.wrap("listing jobs with prefix "+prefix, err)
	}
	var out []*api.JobListStub
	for _, j := range jobs {
		if keep(j) {
			out = append(out, j)
		}
	}
	return out, nil
}
