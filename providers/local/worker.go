package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/providers"
	"github.com/gofl/gofl/storage"
)

// WorkerDriver is the local provider's JobManager half: TaskManagers as
// child processes of the JobManager, in <base>/clusters/<cluster-id>/taskmanager-N/.
type WorkerDriver struct {
	dir       string // the cluster directory
	clusterID string
	binary    string
	rpcHost   string
	rpcPort   string
	config    map[string]string   // passed on to every TaskManager
	conf      *conf.Configuration // the JobManager's, for the log archive
	grace     time.Duration
	log       zerolog.Logger

	mu      sync.Mutex
	events  providers.WorkerEvents // handler and closed, under mu
	next    int
	workers map[string]*worker
	wg      sync.WaitGroup
}

type worker struct {
	id       string
	p        *proc
	released bool
	kill     *time.Timer
}

var _ providers.WorkerDriver = (*WorkerDriver)(nil)

// notForTaskManagers are JobManager settings a TaskManager must not inherit.
var notForTaskManagers = []string{
	conf.RestPort.Key(), conf.RestAddress.Key(), conf.BlobStorageDirectory.Key(),
	conf.TaskManagerResourceID.Key(), conf.TaskManagerRPCPort.Key(),
	conf.RestAuthToken.Key(), conf.RestAuthTokenFile.Key(), // TaskManagers serve no REST; the token stays with the JobManager
}

// NewWorkerDriver returns the driver for the JobManager described by dc.
// Its cluster directory is <provider.local.dir>/clusters/<deployment.cluster-id>;
// a JobManager started by hand with deployment.provider=local and no
// cluster ID gets "jobmanager-<pid>".
func NewWorkerDriver(dc providers.DriverContext) (*WorkerDriver, error) {
	bin, err := resolveBinary(conf.DeploymentBinary.Get(dc.Config))
	if err != nil {
		return nil, err
	}
	host, port, err := splitHostPort(dc.JobManagerRPCAddress)
	if err != nil {
		return nil, fmt.Errorf("local: JobManager RPC address %q: %w", dc.JobManagerRPCAddress, err)
	}
	id := conf.DeploymentClusterID.Get(dc.Config)
	if id == "" {
		id = "jobmanager-" + strconv.Itoa(os.Getpid())
	}
	d := NewDeployer(Options{Dir: conf.ExpandEnv(conf.LocalProviderDir.Get(dc.Config)), Config: dc.Config})
	dir, err := d.clusterDir(id)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	cfg := dc.Config.Snapshot()
	for _, k := range notForTaskManagers {
		delete(cfg, k)
	}
	if err := writeOwnSecrets(dir, cfg); err != nil {
		return nil, err
	}
	if cfg[conf.DelegationTokensFile.Key()] != "" {
		// TaskManagers use the cluster's delegation tokens, not the keytab.
		for _, k := range []string{conf.KerberosKeytab.Key(), conf.KerberosPrincipal.Key(), conf.KerberosUseTicketCache.Key()} {
			delete(cfg, k)
		}
	}
	return &WorkerDriver{dir: dir, clusterID: id, binary: bin, rpcHost: host, rpcPort: port, config: cfg, conf: dc.Config,
		grace: DefaultGracePeriod, log: dc.Log, workers: map[string]*worker{}}, nil
}

func splitHostPort(addr string) (string, string, error) {
	i := len(addr) - 1
	for i >= 0 && addr[i] != ':' {
		i--
	}
	if i <= 0 || i == len(addr)-1 {
		return "", "", errors.New("not host:port")
	}
	host := addr[:i]
	if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	return host, addr[i+1:], nil
}

// Dir is the cluster directory the workers' directories are in.
func (d *WorkerDriver) Dir() string { return d.dir }

// Start implements providers.WorkerDriver.
func (d *WorkerDriver) Start(h providers.EventHandler) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.events.Attach(h); err != nil {
		return err
	}
	return nil
}

// RequestWorker implements providers.WorkerDriver: it starts
// `gofl taskmanager` and returns once the process runs.
func (d *WorkerDriver) RequestWorker(ctx context.Context, spec providers.WorkerSpec) (string, error) {
	if err := providers.CheckWorkerRequest(ctx, "local", spec); err != nil {
		return "", err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.events.Closed() {
		return "", providers.ErrClosed
	}
	var id, dir string
	for {
		d.next++
		id = "taskmanager-" + strconv.Itoa(d.next)
		dir = filepath.Join(d.dir, id)
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("local: %w", err)
		}
	}
	cfg := providers.TaskManagerConfig(d.config, d.rpcHost, d.rpcPort, spec.Slots, id)
	cfg[conf.TaskManagerWorkDir.Key()] = filepath.Join(dir, workDirName)
	cfg[conf.TaskManagerRPCPort.Key()] = "0"
	if _, ok := cfg[conf.TaskManagerHost.Key()]; !ok {
		cfg[conf.TaskManagerHost.Key()] = "127.0.0.1"
	}
	p, err := startProcess(d.binary, "taskmanager", dir, d.clusterID, cfg)
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	w := &worker{id: id, p: p}
	d.workers[id] = w
	d.log.Info().Str("worker_id", id).Int("pid", p.id.PID).Str("dir", dir).Int("slots", spec.Slots).Msg("TaskManager process started")
	d.events.Deliver(providers.WorkerStarted{WorkerID: id, Address: "pid " + strconv.Itoa(p.id.PID)})
	d.wg.Add(1)
	go d.watch(w)
	return id, nil
}

// watch reports the worker's exit as soon as it is reaped.
func (d *WorkerDriver) watch(w *worker) {
	defer d.wg.Done()
	<-w.p.done
	// What a TaskManager killed with SIGKILL could not archive itself;
	// after the event is delivered (deferred before the unlock).
	defer archiveLogs(d.conf, d.clusterID, d.dir, w.id, d.log)
	status, cause := -1, w.p.err
	var ee interface{ ExitCode() int }
	if errors.As(w.p.err, &ee) {
		status = ee.ExitCode()
	} else if w.p.err == nil {
		status = 0
		cause = errors.New("exited with status 0")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if w.kill != nil {
		w.kill.Stop()
	}
	delete(d.workers, w.id)
	if w.released {
		cause = fmt.Errorf("released (%v)", cause)
	}
	d.log.Info().Str("worker_id", w.id).Int("exit_status", status).Bool("released", w.released).AnErr("cause", cause).Msg("TaskManager process ended")
	d.events.Deliver(providers.WorkerTerminated{WorkerID: w.id, Cause: cause, ExitStatus: status, Released: w.released})
}

// ReleaseWorker implements providers.WorkerDriver: SIGTERM to the
// worker's process group now, SIGKILL after the grace period.
func (d *WorkerDriver) ReleaseWorker(_ context.Context, workerID string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	w, ok := d.workers[workerID]
	if !ok {
		if _, err := os.Stat(filepath.Join(d.dir, workerID)); err == nil {
			return nil // ended already
		}
		return fmt.Errorf("%w: %s", providers.ErrWorkerNotFound, workerID)
	}
	d.stopLocked(w)
	return nil
}

func (d *WorkerDriver) stopLocked(w *worker) {
	if w.released {
		return
	}
	w.released = true
	w.p.id.signalGroup(syscall.SIGTERM)
	id := w.p.id
	w.kill = time.AfterFunc(d.grace, func() { id.signalGroup(syscall.SIGKILL) })
}

// Close implements providers.WorkerDriver: it stops every worker and
// waits for them (SIGKILL for those still running after the grace period
// or when ctx ends).
func (d *WorkerDriver) Close(ctx context.Context) error {
	d.mu.Lock()
	if !d.events.Close() {
		d.mu.Unlock()
		return nil
	}
	for _, w := range d.workers {
		d.stopLocked(w)
	}
	var ids []procID
	for _, w := range d.workers {
		ids = append(ids, w.p.id)
	}
	d.mu.Unlock()
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		for _, id := range ids {
			id.signalGroup(syscall.SIGKILL)
		}
		<-done
		return ctx.Err()
	}
}

// writeOwnSecrets gives the TaskManagers of a JobManager that has secret
// options but no conf.DeploymentSecretsFile (started by hand with -D) a
// secrets file of their own, 0600 in the cluster directory, since
// TaskManagerConfig keeps secrets off their command lines.
func writeOwnSecrets(dir string, cfg map[string]string) error {
	if cfg[conf.DeploymentSecretsFile.Key()] != "" {
		return nil
	}
	_, secrets := conf.SplitSecrets(cfg)
	if len(secrets) == 0 {
		return nil
	}
	y, err := conf.MarshalSecrets(secrets)
	if err != nil {
		return err
	}
	file := filepath.Join(dir, "secrets.yaml")
	if _, err := storage.WriteFilePrivate(context.Background(), storage.Local(), file, bytes.NewReader(y)); err != nil {
		return fmt.Errorf("local: writing the TaskManagers' secrets file: %w", err)
	}
	cfg[conf.DeploymentSecretsFile.Key()] = file
	return nil
}
