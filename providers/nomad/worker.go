package nomad

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/internal/backoff"
	"github.com/gofl/gofl/providers"
	"github.com/gofl/gofl/storage"
)

// WorkerDriver is the nomad provider's JobManager half: every TaskManager
// is its own service job gofl-<cluster-id>-taskmanager-<n> with one
// allocation, so a single TaskManager can be released; a goroutine per
// worker watches the job's allocations with blocking queries.
type WorkerDriver struct {
	opts      Options
	c         *client
	clusterID string
	jmJob     string // NOMAD_JOB_ID of the JobManager, if it runs in Nomad
	bin       binary
	rpcHost   string
	rpcPort   string
	config    map[string]string // passed on to every TaskManager
	log       zerolog.Logger
	orphans   []string // TaskManager jobs of an earlier JobManager of the cluster

	ctx    context.Context // ends when the driver is closed
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	events  providers.WorkerEvents // handler and closed, under mu
	started bool
	next    int
	workers map[string]*worker
	ended   map[string]bool
}

type worker struct {
	id, jobID string
	released  bool
}

var _ providers.WorkerDriver = (*WorkerDriver)(nil)

// notForTaskManagers are settings (and prefixes) a TaskManager must not
// inherit from the JobManager.
var notForTaskManagers = []string{
	conf.RestPort.Key(), conf.RestAddress.Key(), conf.BlobStorageDirectory.Key(),
	conf.TaskManagerResourceID.Key(), conf.TaskManagerRPCPort.Key(), conf.TaskManagerHost.Key(),
	conf.JobManagerRPCAddress.Key(), conf.JobManagerRPCPort.Key(), conf.SlotManagerMinSlots.Key(),
	"provider.nomad.", "rest.authentication.", // secrets stay out of TaskManager job specs
}

// NewWorkerDriver returns the driver of the JobManager described by dc.
// Its options are the provider.nomad.* keys of dc.Config; the cluster is
// deployment.cluster-id (a JobManager started by hand without one gets
// "jobmanager-<host>-<pid>"). It lists TaskManager jobs left by an earlier
// JobManager of the cluster, which Start purges.
func NewWorkerDriver(dc providers.DriverContext) (*WorkerDriver, error) {
	if err := checkBindRuleConf(dc.Config); err != nil {
		return nil, err
	}
	o, err := OptionsFromConfig(dc.Config)
	if err != nil {
		return nil, err
	}
	bin, err := resolveBinary("", o)
	if err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(dc.JobManagerRPCAddress)
	if err != nil {
		return nil, fmt.Errorf("nomad: JobManager RPC address %q: %w", dc.JobManagerRPCAddress, err)
	}
	id := conf.DeploymentClusterID.Get(dc.Config)
	if id == "" {
		h, _ := os.Hostname()
		id = "jobmanager-" + strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
				return r
			}
			return '-'
		}, h) + "-" + strconv.Itoa(os.Getpid())
	}
	if err := storage.ValidateClusterID(id); err != nil {
		return nil, fmt.Errorf("nomad: %w", err)
	}
	c, err := newClient(o)
	if err != nil {
		return nil, err
	}
	cfg := dc.Config.Snapshot()
	for k := range cfg {
		for _, drop := range notForTaskManagers {
			if k == drop || strings.HasSuffix(drop, ".") && strings.HasPrefix(k, drop) {
				delete(cfg, k)
			}
		}
	}
	taskManagerTokens(cfg, dc.Log)
	ctx, cancel := context.WithCancel(context.Background())
	d := &WorkerDriver{opts: o, c: c, clusterID: id, jmJob: os.Getenv("NOMAD_JOB_ID"), bin: bin, rpcHost: host, rpcPort: port,
		config: cfg, log: dc.Log, ctx: ctx, cancel: cancel, workers: map[string]*worker{}, ended: map[string]bool{}}
	// TaskManager jobs of an earlier incarnation (the JobManager was
	// restarted): their IDs are skipped and the jobs purged on Start.
	jobs, err := c.clusterJobs(ctx, id)
	if err != nil {
		d.log.Warn().Err(err).Msg("listing TaskManager jobs left by an earlier JobManager")
	}
	for _, j := range jobs {
		if j.Meta[metaRole] != roleTaskManager {
			continue
		}
		d.orphans = append(d.orphans, j.ID)
		if n, err := strconv.Atoi(strings.TrimPrefix(j.Meta[metaWorkerID], roleTaskManager+"-")); err == nil && n > d.next {
			d.next = n
		}
	}
	return d, nil
}

// taskManagerTokens: with delegation tokens, the TaskManagers get them
// from the leading JobManager over RPC (in the registration response and
// after every renewal; jobmanager.clusterTokens), so their job specs name
// neither the token file nor a Kerberos login, whatever the staging
// directory. Only files a TaskManager reads at start from a staging
// directory on hdfs:// (its secrets file, staged TLS material: it needs
// them to register) keep the Kerberos options.
func taskManagerTokens(cfg map[string]string, log zerolog.Logger) {
	if cfg[conf.DelegationTokensFile.Key()] == "" {
		return
	}
	delete(cfg, conf.DelegationTokensFile.Key())
	for k, v := range cfg {
		if (k == conf.DeploymentSecretsFile.Key() || strings.HasPrefix(k, "security.ssl.")) && strings.HasPrefix(v, "hdfs://") {
			log.Info().Str("option", k).Msg("TaskManagers log in to Kerberos: they read this staged file on hdfs:// before they register and get the delegation tokens")
			return
		}
	}
	for _, k := range []string{conf.KerberosKeytab.Key(), conf.KerberosPrincipal.Key(), conf.KerberosUseTicketCache.Key()} {
		delete(cfg, k)
	}
}

// ClusterID is the cluster the driver's TaskManager jobs belong to.
func (d *WorkerDriver) ClusterID() string { return d.clusterID }

// Start implements providers.WorkerDriver.
func (d *WorkerDriver) Start(h providers.EventHandler) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.events.Attach(h); err != nil {
		return err
	}
	if !d.started && len(d.orphans) > 0 {
		d.started = true
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			for _, id := range d.orphans {
				d.log.Info().Str("job_id", id).Msg("purging a TaskManager job of an earlier JobManager of this cluster")
				if err := d.c.purge(d.ctx, id); err != nil {
					d.log.Warn().Err(err).Str("job_id", id).Msg("purging an orphaned TaskManager job")
				}
			}
		}()
	}
	d.started = true
	return nil
}

// RequestWorker implements providers.WorkerDriver: it registers the
// TaskManager's job and waits for Nomad's evaluation; a job Nomad cannot
// place is purged and reported as an ErrPlacement error.
func (d *WorkerDriver) RequestWorker(ctx context.Context, spec providers.WorkerSpec) (string, error) {
	if err := providers.CheckWorkerRequest(ctx, "nomad", spec); err != nil {
		return "", err
	}
	cpu := d.opts.TaskManagerCPU
	if spec.CPU > 0 {
		cpu = int(spec.CPU*float64(d.opts.MHzPerCore) + 0.5)
		cpu = max(cpu, 1)
	}
	mem := d.opts.TaskManagerMemoryMB
	if spec.Memory > 0 {
		mem = max(toMB(spec.Memory), 10)
	}
	for range 100 {
		d.mu.Lock()
		if d.events.Closed() {
			d.mu.Unlock()
			return "", providers.ErrClosed
		}
		d.next++
		id := roleTaskManager + "-" + strconv.Itoa(d.next)
		d.mu.Unlock()

		job := d.taskManagerJob(id, spec.Slots, cpu, mem)
		evalID, exists, err := d.c.register(ctx, job)
		if err != nil {
			return "", err
		}
		if exists {
			continue // left by an earlier JobManager: next number
		}
		if err := d.c.waitEval(ctx, evalID, job); err != nil {
			cctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			if perr := d.c.purge(cctx, *job.ID); perr != nil {
				err = errors.Join(err, perr)
			}
			cancel()
			if ctx.Err() != nil {
				err = fmt.Errorf("nomad: requesting worker %s: %w", id, err)
			}
			return "", err
		}
		w := &worker{id: id, jobID: *job.ID}
		d.mu.Lock()
		if d.events.Closed() {
			d.mu.Unlock()
			cctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			_ = d.c.purge(cctx, w.jobID)
			cancel()
			return "", providers.ErrClosed
		}
		d.workers[id] = w
		d.wg.Add(1)
		d.mu.Unlock()
		d.log.Info().Str("worker_id", id).Str("job_id", w.jobID).Int("slots", spec.Slots).Int("cpu_mhz", cpu).Int("memory_mb", mem).Msg("TaskManager job registered")
		go d.watch(w)
		return id, nil
	}
	return "", fmt.Errorf("nomad: no free TaskManager job ID for cluster %s", d.clusterID)
}

func (d *WorkerDriver) taskManagerJob(id string, slots, cpu, mem int) *api.Job {
	cfg := providers.TaskManagerConfig(d.config, d.rpcHost, d.rpcPort, slots, id)
	cfg[conf.TaskManagerHost.Key()] = "${NOMAD_IP_" + portRPC + "}"
	cfg[conf.TaskManagerRPCPort.Key()] = "${NOMAD_PORT_" + portRPC + "}"
	if _, ok := cfg[conf.TaskManagerWorkDir.Key()]; !ok {
		// In the task's directory, which Nomad removes with the
		// allocation: a TaskManager killed after the kill timeout cannot
		// remove a temporary one (~50 MB of job binaries). Expanded by the
		// TaskManager from its environment, not by Nomad.
		cfg[conf.TaskManagerWorkDir.Key()] = "${NOMAD_TASK_DIR}/work"
	}
	meta := map[string]string{
		metaClusterID: d.clusterID,
		metaRole:      roleTaskManager,
		metaWorkerID:  id,
		metaCreated:   time.Now().UTC().Truncate(time.Millisecond).Format(time.RFC3339Nano),
	}
	if d.jmJob != "" {
		meta[metaJobManagerJob] = d.jmJob
	}
	return buildJob(d.opts, taskParams{
		jobID: TaskManagerJobID(d.clusterID, id), jobType: "service", role: roleTaskManager,
		meta: meta, env: map[string]string{"GOFL_CLUSTER_ID": d.clusterID}, cfg: cfg, cpu: cpu, memoryMB: mem, bin: d.bin,
	})
}

// watch follows the worker's allocation with blocking queries: it reports
// WorkerStarted when the task runs and WorkerTerminated once, when the
// allocation ends or the job disappears.
//
// It tracks the allocation the worker really runs in (the job's first),
// not the job's newest: a `nomad alloc stop` makes a real agent place a
// linked replacement about a second later, which must never run a second
// TaskManager with the same ID. So once the tracked allocation is told to
// stop, the job is purged at once (the replacement with it), and the end
// reported is the tracked allocation's.
func (d *WorkerDriver) watch(w *worker) {
	defer d.wg.Done()
	var idx uint64
	started, purged := false, false
	allocID := ""
	retry := backoff.New(backoff.Config{Initial: 100 * time.Millisecond, Max: 10 * time.Second}, nil)
	for {
		var a *api.AllocationListStub
		var meta *api.QueryMeta
		var err error
		if allocID == "" {
			var allocs []*api.AllocationListStub
			allocs, meta, err = d.c.api.Jobs().Allocations(w.jobID, true, q(d.ctx, idx, 30*time.Second))
			if err == nil {
				a = oldest(allocs)
			}
		} else {
			var full *api.Allocation
			full, meta, err = d.c.api.Allocations().Info(allocID, q(d.ctx, idx, 30*time.Second))
			if isNotFound(err) { // garbage-collected
				d.terminated(w, nil)
				return
			}
			if err == nil {
				a = full.Stub()
			}
		}
		if d.ctx.Err() != nil {
			return
		}
		if err != nil {
			d.log.Warn().Err(d.c.wrap("watching allocations of "+w.jobID, err)).Str("worker_id", w.id).Msg("retrying")
			select {
			case <-d.ctx.Done():
				return
			case <-time.After(retry.Next()):
			}
			continue
		}
		retry.Reset()
		if meta.LastIndex >= idx {
			idx = meta.LastIndex
		} else {
			idx = 0 // the index went backwards (a new leader): start over
		}
		if a == nil {
			// No allocation (yet): is the job still there?
			cctx, cancel := context.WithTimeout(d.ctx, callTimeout)
			_, _, err := d.c.api.Jobs().Info(w.jobID, q(cctx, 0, 0))
			cancel()
			if isNotFound(err) {
				d.terminated(w, nil)
				return
			}
			continue
		}
		if allocID == "" {
			allocID = a.ID
			idx = 0 // the allocation's own index from now on
		}
		if !started {
			// A Started event counts even if the allocation is already
			// terminal when first seen: on a real agent register to
			// running takes up to a second, and a TaskManager can
			// register, be released and end within it.
			if ts := a.TaskStates[roleTaskManager]; ts != nil && (ts.State == "running" || hasEvent(ts, "Started")) {
				started = true
				d.mu.Lock()
				d.log.Info().Str("worker_id", w.id).Str("alloc_id", a.ID).Str("node", a.NodeName).Msg("TaskManager task running")
				d.events.Deliver(providers.WorkerStarted{WorkerID: w.id, Address: a.NodeName + " alloc " + shortID(a.ID)})
				d.mu.Unlock()
			}
		}
		if a.DesiredStatus != "run" && !purged && !terminal(a.ClientStatus) {
			// Stopped from outside (nomad alloc stop, a drain): no
			// replacement may start a second TaskManager with this ID.
			purged = true
			d.log.Info().Str("worker_id", w.id).Str("alloc_id", a.ID).Str("desired", a.DesiredStatus).Msg("TaskManager allocation told to stop; purging its job so nothing replaces it")
			cctx, cancel := context.WithTimeout(d.ctx, callTimeout)
			if err := d.c.purge(cctx, w.jobID); err != nil {
				d.log.Warn().Err(err).Str("worker_id", w.id).Msg("purging the job of a stopped TaskManager")
			}
			cancel()
		}
		if terminal(a.ClientStatus) {
			d.terminated(w, a)
			return
		}
	}
}

// oldest returns the allocation created first: the one a worker's job was
// placed with (later ones are replacements).
func oldest(allocs []*api.AllocationListStub) *api.AllocationListStub {
	var o *api.AllocationListStub
	for _, a := range allocs {
		if o == nil || a.CreateIndex < o.CreateIndex {
			o = a
		}
	}
	return o
}

func hasEvent(ts *api.TaskState, typ string) bool {
	for _, e := range ts.Events {
		if e.Type == typ {
			return true
		}
	}
	return false
}

// terminated reports the worker's end and purges its job, so Nomad
// neither replaces a lost allocation nor keeps the job.
func (d *WorkerDriver) terminated(w *worker, a *api.AllocationListStub) {
	status, cause := exitOf(a, roleTaskManager)
	d.mu.Lock()
	released := w.released
	d.mu.Unlock()
	if !released {
		cctx, cancel := context.WithTimeout(d.ctx, callTimeout)
		if err := d.c.purge(cctx, w.jobID); err != nil {
			d.log.Warn().Err(err).Str("worker_id", w.id).Msg("purging the job of an ended TaskManager")
		}
		cancel()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	released = w.released
	delete(d.workers, w.id)
	d.ended[w.id] = true
	if released {
		cause = fmt.Errorf("released (%v)", cause)
	}
	d.log.Info().Str("worker_id", w.id).Int("exit_status", status).Bool("released", released).AnErr("cause", cause).Msg("TaskManager ended")
	d.events.Deliver(providers.WorkerTerminated{WorkerID: w.id, Cause: cause, ExitStatus: status, Released: released})
}

// ReleaseWorker implements providers.WorkerDriver: it purges the worker's
// job; Nomad sends the kill signal (SIGTERM), then SIGKILL after
// provider.nomad.kill-timeout.
func (d *WorkerDriver) ReleaseWorker(ctx context.Context, workerID string) error {
	d.mu.Lock()
	w, ok := d.workers[workerID]
	if !ok {
		ended := d.ended[workerID]
		d.mu.Unlock()
		if ended {
			return nil
		}
		return fmt.Errorf("%w: %s", providers.ErrWorkerNotFound, workerID)
	}
	w.released = true
	d.mu.Unlock()
	if err := d.c.purge(ctx, w.jobID); err != nil {
		return err
	}
	d.log.Info().Str("worker_id", workerID).Str("job_id", w.jobID).Msg("TaskManager job purged")
	return nil
}

// Close implements providers.WorkerDriver: it purges every worker's job,
// waits until their allocations ended (or ctx ends) and stops watching.
func (d *WorkerDriver) Close(ctx context.Context) error {
	d.mu.Lock()
	if !d.events.Close() {
		d.mu.Unlock()
		return nil
	}
	var ws []*worker
	for _, w := range d.workers {
		w.released = true
		ws = append(ws, w)
	}
	d.mu.Unlock()
	var errs []error
	for _, w := range ws {
		if err := d.c.purge(ctx, w.jobID); err != nil {
			errs = append(errs, err)
		}
	}
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("nomad: waiting for %d TaskManager(s) to stop: %w", len(ws), ctx.Err()))
	}
	d.cancel()
	<-done
	d.c.close()
	return errors.Join(errs...)
}
