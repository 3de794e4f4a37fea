package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/logs"
	"github.com/gofl/gofl/providers"
	"github.com/gofl/gofl/storage"
)

// Name is the provider's registry name.
const Name = "local"

func init() {
	providers.Register(providers.Provider{
		Name: Name,
		NewDeployer: func(c *conf.Configuration, log zerolog.Logger) (providers.ClusterDeployer, error) {
			return NewDeployer(Options{Dir: conf.ExpandEnv(conf.LocalProviderDir.Get(c)), Binary: conf.DeploymentBinary.Get(c), Log: log, Config: c}), nil
		},
		NewWorkerDriver: func(dc providers.DriverContext) (providers.WorkerDriver, error) {
			return NewWorkerDriver(dc)
		},
	})
}

// Defaults.
const (
	// DefaultGracePeriod is how long processes get between SIGTERM and SIGKILL.
	DefaultGracePeriod = 10 * time.Second
	// recordFile is the cluster record's name in the cluster directory.
	recordFile = "cluster.json"
	// jobManagerDir is the JobManager's working directory's name.
	jobManagerDir = "jobmanager"
)

// Options configure a Deployer.
type Options struct {
	// Dir is the base directory (provider.local.dir, expanded).
	Dir string
	// Binary is the default gofl binary when a ClusterSpec names none;
	// empty: the running executable.
	Binary string
	// GracePeriod between SIGTERM and SIGKILL; default DefaultGracePeriod.
	GracePeriod time.Duration
	Log         zerolog.Logger
	// Config, if set, locates the clusters' log archives (package logs):
	// Kill and the cleaning of a stale cluster archive what its processes
	// left on disk before removing it.
	Config *conf.Configuration
}

// Deployer is the local provider's client half. Processes it starts are
// children of the calling process until it exits; records on disk make
// every cluster visible to other Deployers on the same base directory.
type Deployer struct {
	opts Options

	mu     sync.Mutex
	exited map[string]<-chan struct{} // the first JobManager of the clusters deployed here
}

var _ providers.ClusterDeployer = (*Deployer)(nil)
var _ providers.InPlaceBinary = (*Deployer)(nil)
var _ providers.ExitWatcher = (*Deployer)(nil)

// Exited implements providers.ExitWatcher: the first JobManager process of
// a cluster this Deployer started (a restart by the supervisor is not its
// child).
func (d *Deployer) Exited(clusterID string) <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.exited[clusterID]
}

// RunsBinaryInPlace implements providers.InPlaceBinary: the cluster's
// processes run the gofl binary at its path.
func (d *Deployer) RunsBinaryInPlace() bool { return true }

// NewDeployer returns a Deployer on opts.Dir.
func NewDeployer(opts Options) *Deployer {
	if opts.GracePeriod <= 0 {
		opts.GracePeriod = DefaultGracePeriod
	}
	return &Deployer{opts: opts}
}

// record is a cluster's cluster.json.
type record struct {
	ClusterID   string                  `json:"cluster_id"`
	Mode        providers.Mode          `json:"mode"`
	JobManager  procID                  `json:"jobmanager"`
	RESTAddress string                  `json:"rest_address,omitempty"`
	RPCAddress  string                  `json:"rpc_address,omitempty"`
	Binary      string                  `json:"binary"`
	Artifacts   []string                `json:"artifacts,omitempty"`
	Created     time.Time               `json:"created"`
	Status      providers.ClusterStatus `json:"status"`
	// Standbys are the further JobManager processes of a cluster with
	// several (ClusterSpec.JobManagers, high availability).
	Standbys []jobManagerRecord `json:"standby_jobmanagers,omitempty"`
	// Failure, if set, is why the cluster failed for good (the JobManager
	// was out of restart attempts).
	Failure string `json:"failure,omitempty"`
	// Attempts counts the starts of the JobManager (1 after Deploy);
	// Restarted is the latest restart's time.
	Attempts  int       `json:"attempts,omitempty"`
	Restarted time.Time `json:"restarted,omitzero"`
	// AddressesFrom is where in its log a JobManager restarted on new
	// ports (its old ones were taken) logs its addresses, while the
	// record has none.
	AddressesFrom int64 `json:"addresses_from,omitempty"`
	// Supervisor is the process that restarts the JobManager (Supervise),
	// when provider.local.jobmanager.attempts allows restarts.
	Supervisor procID `json:"supervisor,omitzero"`
}

// jobManagerRecord is one further JobManager process of a cluster.
type jobManagerRecord struct {
	Proc        procID `json:"proc"`
	RESTAddress string `json:"rest_address,omitempty"`
	RPCAddress  string `json:"rpc_address,omitempty"`
}

// live returns a JobManager of rec that still runs, the first one
// preferred; false if none does.
func (rec record) live() (jobManagerRecord, bool) {
	all := append([]jobManagerRecord{{Proc: rec.JobManager, RESTAddress: rec.RESTAddress, RPCAddress: rec.RPCAddress}}, rec.Standbys...)
	for _, jm := range all {
		if jm.Proc.alive() {
			return jm, true
		}
	}
	return all[0], false
}

func (d *Deployer) clustersDir() string { return filepath.Join(d.opts.Dir, "clusters") }

func (d *Deployer) clusterDir(id string) (string, error) {
	if err := storage.ValidateClusterID(id); err != nil {
		return "", fmt.Errorf("local: %w", err)
	}
	return filepath.Join(d.clustersDir(), id), nil
}

// ClusterDir is where the cluster's processes keep their working
// directories and logs.
func (d *Deployer) ClusterDir(id string) (string, error) { return d.clusterDir(id) }

var addrLine = regexp.MustCompile(`JobManager RPC at (\S+), REST at https?://(\S+)`)

// Deploy implements providers.ClusterDeployer.
func (d *Deployer) Deploy(ctx context.Context, spec providers.ClusterSpec) (providers.ClusterInfo, error) {
	if err := spec.Validate(); err != nil {
		return providers.ClusterInfo{}, err
	}
	dir, err := d.clusterDir(spec.ClusterID)
	if err != nil {
		return providers.ClusterInfo{}, err
	}
	bin := spec.Binary
	if bin == "" {
		bin = d.opts.Binary
	}
	if bin, err = resolveBinary(bin); err != nil {
		return providers.ClusterInfo{}, err
	}
	if err := os.MkdirAll(d.clustersDir(), 0o755); err != nil {
		return providers.ClusterInfo{}, fmt.Errorf("local: %w", err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return providers.ClusterInfo{}, fmt.Errorf("local: %w", err)
		}
		// In use, unless stale or failed (what is left of it goes).
		if info, rerr := d.Retrieve(ctx, spec.ClusterID); rerr == nil && info.Status != providers.StatusTerminated && info.Status != providers.StatusFailed {
			return providers.ClusterInfo{}, fmt.Errorf("%w: %s (JobManager pid %s)", providers.ErrClusterExists, spec.ClusterID, info.Details["pid"])
		}
		_ = d.clean(spec.ClusterID, dir)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return providers.ClusterInfo{}, fmt.Errorf("%w: %s: %v", providers.ErrClusterExists, spec.ClusterID, err)
		}
	}
	info, err := d.deploy(ctx, spec, dir, bin)
	if err != nil {
		// All or nothing.
		d.stopCluster(dir, time.Time{})
		_ = os.RemoveAll(dir)
		return providers.ClusterInfo{}, err
	}
	return info, nil
}

func (d *Deployer) deploy(ctx context.Context, spec providers.ClusterSpec, dir, bin string) (providers.ClusterInfo, error) {
	cfg := map[string]string{}
	for k, v := range spec.Config {
		cfg[k] = v
	}
	setDefault := func(k, v string) {
		if _, ok := cfg[k]; !ok {
			cfg[k] = v
		}
	}
	setDefault(conf.RestPort.Key(), "0")
	setDefault(conf.JobManagerRPCPort.Key(), "0")
	setDefault(conf.RestAddress.Key(), "127.0.0.1")
	setDefault(conf.JobManagerRPCAddress.Key(), "127.0.0.1")
	// As on YARN, each cluster's HA data is its own unless configured.
	setDefault(conf.HAClusterID.Key(), "/"+spec.ClusterID)
	cfg[conf.DeploymentProvider.Key()] = Name
	cfg[conf.DeploymentClusterID.Key()] = spec.ClusterID
	cfg[conf.DeploymentBinary.Key()] = bin
	cfg[conf.LocalProviderDir.Key()] = d.opts.Dir
	if spec.TaskManagers > 0 {
		slots := 1
		if s, ok := cfg[conf.NumberOfTaskSlots.Key()]; ok {
			if n, err := conf.NumberOfTaskSlots.Parse(s); err == nil {
				slots = n
			}
		}
		cfg[conf.SlotManagerMinSlots.Key()] = strconv.Itoa(spec.TaskManagers * slots)
	}
	n := max(spec.JobManagers, 1)
	if n > 1 {
		// Every JobManager serves the blobs whichever leader took.
		setDefault(conf.BlobStorageDirectory.Key(), filepath.Join(dir, "blobs"))
	}
	rec := record{ClusterID: spec.ClusterID, Mode: spec.Mode, Binary: bin, Artifacts: spec.Artifacts,
		Created: time.Now().UTC().Truncate(time.Millisecond), Status: providers.StatusStarting}
	procs := make([]*proc, n)
	dirs := make([]string, n)
	for i := range procs {
		dirs[i] = filepath.Join(dir, jobManagerDirName(i))
		if err := os.Mkdir(dirs[i], 0o755); err != nil {
			return providers.ClusterInfo{}, fmt.Errorf("local: %w", err)
		}
		if len(spec.Artifacts) > 0 {
			if err := writeFileAtomic(filepath.Join(dirs[i], "artifacts"), []byte(strings.Join(spec.Artifacts, "\n")+"\n")); err != nil {
				return providers.ClusterInfo{}, fmt.Errorf("local: %w", err)
			}
		}
		p, err := startProcess(bin, "jobmanager", dirs[i], spec.ClusterID, cfg)
		if err != nil {
			return providers.ClusterInfo{}, err
		}
		procs[i] = p
		if i == 0 {
			d.mu.Lock()
			if d.exited == nil {
				d.exited = map[string]<-chan struct{}{}
			}
			d.exited[spec.ClusterID] = p.done
			d.mu.Unlock()
		}
		if i == 0 {
			rec.JobManager = p.id
		} else {
			rec.Standbys = append(rec.Standbys, jobManagerRecord{Proc: p.id})
		}
		if err := d.writeRecord(dir, rec); err != nil {
			return providers.ClusterInfo{}, err
		}
		d.opts.Log.Info().Str("cluster_id", spec.ClusterID).Int("pid", p.id.PID).Str("dir", dirs[i]).Msg("JobManager started")
	}

	// Wait for the bound addresses, then for the REST API (a standby's
	// redirects to the leader's).
	client := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	addrs := make([][2]string, n)
	for {
		for i, p := range procs {
			logPath := filepath.Join(dirs[i], logFile)
			select {
			case <-ctx.Done():
				return providers.ClusterInfo{}, fmt.Errorf("local: deploying %s: %w; JobManager log %s:\n%s", spec.ClusterID, ctx.Err(), logPath, tail(logPath))
			case <-p.done:
				return providers.ClusterInfo{}, fmt.Errorf("local: deploying %s: the JobManager exited during startup; its log %s:\n%s", spec.ClusterID, logPath, tail(logPath))
			default:
			}
			if addrs[i][1] == "" {
				if m := addrLine.FindSubmatch(readFile(logPath)); m != nil {
					addrs[i] = [2]string{string(m[1]), string(m[2])}
				}
			}
		}
		if ready(addrs) && providers.OverviewReady(ctx, client, addrs[0][1]) {
			break
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	rec.RPCAddress, rec.RESTAddress = addrs[0][0], addrs[0][1]
	for i := range rec.Standbys {
		rec.Standbys[i].RPCAddress, rec.Standbys[i].RESTAddress = addrs[i+1][0], addrs[i+1][1]
	}
	rec.Status, rec.Attempts = providers.StatusRunning, 1
	if err := d.startSupervisor(dir, bin, cfg, &rec); err != nil {
		return providers.ClusterInfo{}, err
	}
	if err := d.writeRecord(dir, rec); err != nil {
		return providers.ClusterInfo{}, err
	}
	d.opts.Log.Info().Str("cluster_id", spec.ClusterID).Str("rest", rec.RESTAddress).Msg("cluster deployed")
	return d.info(rec, dir), nil
}

// startSupervisor starts the process that restarts the JobManager
// (Supervise) if provider.local.jobmanager.attempts allows restarts.
func (d *Deployer) startSupervisor(dir, bin string, cfg map[string]string, rec *record) error {
	attempts, err := conf.JobManagerAttemptsOf(cfg, conf.LocalJobManagerAttempts)
	if err != nil {
		return fmt.Errorf("local: %w", err)
	}
	if err := writeLaunch(dir, launch{Binary: bin, Config: cfg, Attempts: attempts}); err != nil {
		return err
	}
	if attempts <= 1 {
		return nil
	}
	supDir := filepath.Join(dir, supervisorDir)
	if err := os.Mkdir(supDir, 0o755); err != nil {
		return fmt.Errorf("local: %w", err)
	}
	p, err := startProcess(bin, SupervisorRole, supDir, rec.ClusterID, map[string]string{
		conf.LocalProviderDir.Key(): d.opts.Dir, conf.DeploymentClusterID.Key(): rec.ClusterID,
		"log.level": cfg["log.level"],
	})
	if err != nil {
		return err
	}
	rec.Supervisor = p.id
	d.opts.Log.Info().Str("cluster_id", rec.ClusterID).Int("pid", p.id.PID).Int("attempts", attempts).Msg("JobManager supervisor started")
	return nil
}

func readFile(path string) []byte {
	b, _ := os.ReadFile(path)
	return b
}

// ready reports whether every JobManager printed its addresses.
func ready(addrs [][2]string) bool {
	for _, a := range addrs {
		if a[1] == "" {
			return false
		}
	}
	return true
}

// proc is a started process.
type proc struct {
	id   procID
	done chan struct{} // closed once it ended and was reaped
	err  error         // cmd.Wait's result, valid after done
}

// startProcess starts `bin role -D k=v ...` in dir, logging to dir/gofl.log,
// as the leader of a new process group, and writes its pid file. A
// goroutine reaps it and then kills what it left in its group. Secret
// options go in the process's environment (GOFL_*), readable only by the
// cluster's user, never on its command line, which ps shows to everyone.
func startProcess(bin, role, dir, clusterID string, cfg map[string]string) (*proc, error) {
	cfg, secrets := conf.SplitSecrets(cfg)
	args := []string{role}
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		args = append(args, "-D", k+"="+cfg[k])
	}
	lf, err := os.OpenFile(filepath.Join(dir, logFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFL_CLUSTER_ID="+clusterID, logs.EnvLogFile+"="+filepath.Join(dir, logFile))
	for k, v := range secrets {
		if s, ok := conf.Lookup(k); ok {
			cmd.Env = append(cmd.Env, s.EnvVar()+"="+v)
		}
	}
	if role == "jobmanager" {
		_ = os.Remove(filepath.Join(dir, exitFile)) // a restart's
		cmd.Env = append(cmd.Env, ExitFileEnv+"="+filepath.Join(dir, exitFile))
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("local: starting gofl %s: %w", role, err)
	}
	lf.Close()
	p := &proc{id: identify(cmd.Process.Pid), done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = syscall.Kill(-p.id.PID, syscall.SIGKILL) // sweep its group
		close(p.done)
	}()
	if err := writePidFile(dir, p.id); err != nil {
		_ = syscall.Kill(-p.id.PID, syscall.SIGKILL)
		<-p.done
		return nil, fmt.Errorf("local: %w", err)
	}
	return p, nil
}

// tail returns the last lines of a log file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	const max = 4096
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return strings.TrimRight(string(b), "\n")
}

func (d *Deployer) writeRecord(dir string, rec record) error {
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, recordFile), b); err != nil {
		return fmt.Errorf("local: cluster record: %w", err)
	}
	return nil
}

func (d *Deployer) readRecord(dir string) (record, error) {
	var rec record
	b, err := os.ReadFile(filepath.Join(dir, recordFile))
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("local: cluster record %s: %w", filepath.Join(dir, recordFile), err)
	}
	return rec, nil
}

func (d *Deployer) info(rec record, dir string) providers.ClusterInfo {
	status := rec.Status
	// With standbys, a live JobManager's address: a standby answers with
	// the leader's.
	jm, alive := rec.live()
	details := map[string]string{
		"pid":    strconv.Itoa(jm.Proc.PID),
		"dir":    dir,
		"log":    filepath.Join(dir, jobManagerDir, logFile),
		"binary": rec.Binary,
	}
	if !alive {
		// Ended by itself (a per-job or application cluster's work is
		// over, or it was stopped) or not: killed, crashed, out of
		// attempts. Only the latter is failed, and kept until Kill.
		status = providers.StatusTerminated
		if why, failed := rec.failure(dir); failed {
			status = providers.StatusFailed
			details["error"] = why
			if rec.Failure == "" && rec.Supervisor.alive() {
				// The supervisor restarts it (or is about to fail it).
				status = providers.StatusStarting
				details["restarting"] = why
			}
		}
	}
	if rec.Attempts > 1 {
		details["attempt"] = strconv.Itoa(rec.Attempts)
	}
	return providers.ClusterInfo{
		ClusterID:   rec.ClusterID,
		Provider:    Name,
		Mode:        rec.Mode,
		Status:      status,
		RESTAddress: jm.RESTAddress,
		RPCAddress:  jm.RPCAddress,
		Created:     rec.Created,
		Details:     details,
	}
}

// failure tells why a cluster none of whose JobManagers runs ended
// abnormally; false if one of them exited by itself, with or without an
// error: a per-job cluster whose job failed ended its work, and the job's
// result says how.
func (rec record) failure(dir string) (string, bool) {
	if rec.Failure != "" {
		return rec.Failure, true
	}
	for i := range len(rec.Standbys) + 1 {
		if _, err := os.Stat(filepath.Join(dir, jobManagerDirName(i), exitFile)); err == nil {
			return "", false
		}
	}
	return "the JobManager ended without a word (killed?)", true
}

// jobManagerDirName is the working directory's name of the i-th JobManager.
func jobManagerDirName(i int) string {
	if i == 0 {
		return jobManagerDir
	}
	return jobManagerDir + "-" + strconv.Itoa(i+1)
}

// Retrieve implements providers.ClusterDeployer. A cluster whose
// JobManager ended by itself is reported terminated once, and cleaned; one
// whose JobManager was killed or failed is reported failed until Kill.
func (d *Deployer) Retrieve(_ context.Context, clusterID string) (providers.ClusterInfo, error) {
	dir, err := d.clusterDir(clusterID)
	if err != nil {
		return providers.ClusterInfo{}, err
	}
	rec, err := d.readRecord(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return providers.ClusterInfo{}, fmt.Errorf("%w: %s (no record in %s)", providers.ErrClusterNotFound, clusterID, dir)
		}
		return providers.ClusterInfo{}, err
	}
	info := d.info(rec, dir)
	switch info.Status {
	case providers.StatusTerminated:
		_ = d.clean(clusterID, dir)
	case providers.StatusFailed:
		d.archiveFailed(clusterID, dir)
	}
	return info, nil // a failed cluster stays until Kill
}

// archiveFailedMarker marks a failed cluster whose logs were archived.
const archiveFailedMarker = "logs-archived"

// archiveFailed archives, once, the logs a failed cluster's processes
// left (gofl logs reads them from the archive; Kill archives again what
// came later).
func (d *Deployer) archiveFailed(clusterID, dir string) {
	marker := filepath.Join(dir, archiveFailedMarker)
	if _, err := os.Stat(marker); err == nil {
		return
	}
	archiveLogs(d.opts.Config, clusterID, dir, "", d.opts.Log)
	_ = os.WriteFile(marker, nil, 0o644)
}

// List implements providers.ClusterDeployer; it cleans stale records.
func (d *Deployer) List(ctx context.Context) ([]providers.ClusterInfo, error) {
	entries, err := os.ReadDir(d.clustersDir())
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("local: %w", err)
	}
	var out []providers.ClusterInfo
	for _, e := range entries {
		if !e.IsDir() || storage.ValidateClusterID(e.Name()) != nil {
			continue
		}
		dir := filepath.Join(d.clustersDir(), e.Name())
		rec, err := d.readRecord(dir)
		if err != nil {
			// A Deploy in progress writes its record right after the start,
			// and a JobManager started by hand with deployment.provider=local
			// keeps its TaskManagers here without one: only a directory
			// without a record, without live processes and older than a
			// minute is debris.
			if st, serr := os.Stat(dir); serr == nil && time.Since(st.ModTime()) > time.Minute && !anyAlive(dir) {
				_ = d.clean(e.Name(), dir)
			}
			continue
		}
		info := d.info(rec, dir)
		if info.Status == providers.StatusFailed {
			d.archiveFailed(rec.ClusterID, dir)
		}
		if info.Status == providers.StatusTerminated {
			d.opts.Log.Info().Str("cluster_id", rec.ClusterID).Int("pid", rec.JobManager.PID).Msg("cleaning the record of a cluster whose JobManager is gone")
			_ = d.clean(rec.ClusterID, dir)
			continue
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b providers.ClusterInfo) int { return strings.Compare(a.ClusterID, b.ClusterID) })
	return out, nil
}

// Kill implements providers.ClusterDeployer.
func (d *Deployer) Kill(ctx context.Context, clusterID string) error {
	dir, err := d.clusterDir(clusterID)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, recordFile)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: %s", providers.ErrClusterNotFound, clusterID)
		}
		return fmt.Errorf("local: %w", err)
	}
	rec, rerr := d.readRecord(dir)
	_, alive := rec.live()
	_, failed := rec.failure(dir)
	deadline, _ := ctx.Deadline()
	if left := d.stopCluster(dir, deadline); len(left) > 0 {
		return fmt.Errorf("local: killing %s: processes %v still run", clusterID, left)
	}
	if rerr == nil && !alive && failed {
		// Failed for good (killed, crashed, out of attempts): nothing
		// recovers its jobs any more.
		cleanupHAData(dir, d.opts.Log.With().Str("cluster_id", clusterID).Logger())
	}
	archiveLogs(d.opts.Config, clusterID, dir, "", d.opts.Log)
	d.saveLogs(clusterID, dir)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("local: removing %s: %w", dir, err)
	}
	d.opts.Log.Info().Str("cluster_id", clusterID).Msg("cluster killed")
	return nil
}

// clean kills what is left of a stale cluster and removes its directory.
func (d *Deployer) clean(clusterID, dir string) error {
	d.stopCluster(dir, time.Time{})
	archiveLogs(d.opts.Config, clusterID, dir, "", d.opts.Log)
	d.saveLogs(clusterID, dir)
	return os.RemoveAll(dir)
}

// stopCluster stops the process group of the JobManager and of every
// TaskManager with a pid file in dir, gracefully first.
// A TaskManager started meanwhile is found by scanning again.
func (d *Deployer) stopCluster(dir string, deadline time.Time) []procID {
	return d.stopClusterExcept(dir, "", deadline)
}

// stopClusterExcept is stopCluster sparing the process of the working
// directory except (the supervisor stopping the rest).
func (d *Deployer) stopClusterExcept(dir, except string, deadline time.Time) []procID {
	seen := map[procID]bool{}
	var left []procID
	for range 3 {
		var groups []procID
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if !e.IsDir() || e.Name() == except {
				continue
			}
			if p, ok := readPidFile(filepath.Join(dir, e.Name())); ok && !seen[p] {
				seen[p] = true
				groups = append(groups, p)
			}
		}
		if len(groups) == 0 {
			break
		}
		left = append(left, stopGroups(groups, d.opts.GracePeriod, deadline)...)
	}
	return left
}

// anyAlive reports whether a process with a pid file in a subdirectory of
// dir still runs.
func anyAlive(dir string) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if p, ok := readPidFile(filepath.Join(dir, e.Name())); ok && e.IsDir() && p.groupAlive() {
			return true
		}
	}
	return false
}
