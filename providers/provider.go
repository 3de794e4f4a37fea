package providers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
)

// Sentinel errors. Implementations wrap them, so callers test with errors.Is.
var (
	// ErrClusterNotFound: no cluster with that ID is known to the provider
	// (never deployed, killed, or its record was cleaned as stale).
	ErrClusterNotFound = errors.New("providers: cluster not found")
	// ErrClusterExists: Deploy was asked for a cluster ID that is in use.
	ErrClusterExists = errors.New("providers: cluster already exists")
	// ErrWorkerNotFound: the worker ID is unknown to the driver.
	ErrWorkerNotFound = errors.New("providers: worker not found")
	// ErrUnknownProvider: Lookup was given a name nobody registered.
	ErrUnknownProvider = errors.New("providers: unknown provider")
	// ErrNotSupported: the provider does not offer this half or mode
	// (standalone deploys nothing and starts no workers).
	ErrNotSupported = errors.New("providers: not supported")
	// ErrClosed: the WorkerDriver was closed.
	ErrClosed = errors.New("providers: driver closed")
)

// Mode is a cluster's deployment mode, as in Flink.
type Mode string

// The deployment modes.
const (
	// ModeSession: a long-running JobManager that accepts job submissions.
	ModeSession Mode = "session"
	// ModePerJob: a JobManager that runs one staged, pre-planned JobGraph and
	// ends with it.
	ModePerJob Mode = "per-job"
	// ModeApplication: a JobManager that runs the job binary in
	// application-driver role and ends when all its jobs end.
	ModeApplication Mode = "application"
)

// Valid reports whether m is one of the three modes.
func (m Mode) Valid() bool {
	return m == ModeSession || m == ModePerJob || m == ModeApplication
}

// ClusterSpec is what Deploy starts.
type ClusterSpec struct {
	// ClusterID names the cluster: 1–128 of [A-Za-z0-9._-], not starting
	// with a dot (storage.ValidateClusterID). Required.
	ClusterID string
	// Mode is the deployment mode. Required.
	Mode Mode
	// Config is the JobManager's configuration, key → value as `-D` takes
	// it. The provider adds (and overrides) what it owns: the RPC and REST
	// ports it picks, deployment.provider, deployment.cluster-id.
	Config map[string]string
	// Binary is the gofl binary's path (local) or URL (providers that fetch
	// it, e.g. nomad's artifact stanza). Empty: the running executable.
	Binary string
	// Artifacts are staged artifact locations (storage.Staging URIs or
	// paths: config snapshot, job binaries, the JobGraph of a per-job
	// cluster) the JobManager needs; the provider makes them reachable (or
	// passes them on) but never stages them itself.
	Artifacts []string
	// TaskManagers is how many TaskManagers to start with the JobManager;
	// the ResourceManager starts more on demand.
	TaskManagers int
	// JobManagers is how many JobManager processes to run (0 means 1):
	// one leads, the others stand by. More than one needs
	// high-availability.type zookeeper in Config.
	JobManagers int
}

// Validate checks the fields every provider needs.
func (s ClusterSpec) Validate() error {
	var errs []error
	if s.ClusterID == "" {
		errs = append(errs, errors.New("cluster ID is empty"))
	}
	if !s.Mode.Valid() {
		errs = append(errs, fmt.Errorf("mode %q is not one of %s, %s, %s", s.Mode, ModeSession, ModePerJob, ModeApplication))
	}
	if s.JobManagers < 0 {
		errs = append(errs, fmt.Errorf("%d JobManagers", s.JobManagers))
	}
	if s.JobManagers > 1 {
		t := s.Config[conf.HighAvailabilityType.Key()]
		if t == "" {
			t = s.Config[conf.HighAvailabilityTypeDeprecated.Key()]
		}
		if !strings.EqualFold(t, conf.HighAvailabilityZooKeeper) {
			errs = append(errs, fmt.Errorf("%d JobManagers need high-availability.type zookeeper (one leads, the others stand by), not %q", s.JobManagers, t))
		}
	}
	if s.TaskManagers < 0 {
		errs = append(errs, fmt.Errorf("%d initial TaskManagers", s.TaskManagers))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("providers: invalid cluster spec: %w", err)
	}
	return nil
}

// ClusterStatus is what a provider knows about a cluster's JobManager.
type ClusterStatus string

// The cluster statuses.
const (
	// StatusStarting: deployed, the JobManager is not serving yet.
	StatusStarting ClusterStatus = "starting"
	// StatusRunning: the JobManager runs (its REST address is known).
	StatusRunning ClusterStatus = "running"
	// StatusTerminated: the JobManager ended (a finished per-job or
	// application cluster, or a crash) and the provider still remembers it.
	StatusTerminated ClusterStatus = "terminated"
	// StatusFailed: the JobManager ended abnormally (killed, crashed, or
	// out of restart attempts) and nothing brings it back; the provider
	// keeps the cluster's record, and Kill removes what is left of it.
	StatusFailed ClusterStatus = "failed"
	// StatusUnknown: the provider cannot tell (e.g. the scheduler is
	// unreachable).
	StatusUnknown ClusterStatus = "unknown"
)

// ClusterInfo describes a deployed cluster.
type ClusterInfo struct {
	ClusterID string
	Provider  string // the provider's registry name
	Mode      Mode
	Status    ClusterStatus
	// RESTAddress is the Dispatcher's REST API, host:port; empty until
	// known. RPCAddress is where TaskManagers reach the JobManager.
	RESTAddress string
	RPCAddress  string
	// Created is when Deploy started the cluster.
	Created time.Time
	// Details are provider-specific facts for humans (pid, working
	// directory, Nomad job ID, ...).
	Details map[string]string
}

// ClusterDeployer is the client half of a provider. Implementations are
// safe for concurrent use; every method is called by the client (the
// `gofl` CLI or a test) and may be called from another process than the
// one that deployed the cluster.
type ClusterDeployer interface {
	// Deploy starts the cluster's JobManager (and spec.TaskManagers
	// TaskManagers) and remembers the cluster under spec.ClusterID. It
	// blocks until the JobManager serves its REST API (then Status is
	// StatusRunning and RESTAddress is set), until it failed, or until ctx
	// ends. It is all or nothing: on any error, whatever it started is
	// stopped and its records removed before it returns. Not idempotent: a
	// cluster ID in use fails with ErrClusterExists.
	Deploy(ctx context.Context, spec ClusterSpec) (ClusterInfo, error)
	// Retrieve returns the cluster's current info, refreshing its status.
	// Blocks only for the provider's bookkeeping (a file read, an API
	// call). An unknown ID fails with ErrClusterNotFound; a cluster whose
	// JobManager ended may be reported terminated or, once cleaned, not
	// found; one that ended abnormally may be reported failed until Kill.
	Retrieve(ctx context.Context, clusterID string) (ClusterInfo, error)
	// List returns every cluster the provider remembers, sorted by ID, and
	// cleans records of clusters whose processes are gone, except failed
	// ones, which it lists until Kill. Blocks like
	// Retrieve.
	List(ctx context.Context) ([]ClusterInfo, error)
	// Kill stops every process or container of the cluster (JobManager and
	// TaskManagers), waits until they are gone or ctx ends, and forgets the
	// cluster (its records and provider-owned directories). Idempotent: an
	// unknown or already killed cluster fails with ErrClusterNotFound, which
	// callers that only want it gone may ignore.
	Kill(ctx context.Context, clusterID string) error
}

// LogLocator is implemented by a ClusterDeployer that keeps its clusters'
// process logs on this machine past the cluster's end (the local
// provider). LogDir names the directory of the cluster's logs, where a
// TaskManager's log holds what its job runners printed (Print()); "" for
// an invalid ID. It does not block and need not exist yet.
type LogLocator interface {
	LogDir(clusterID string) string
}

// InPlaceBinary is implemented by a ClusterDeployer whose clusters run the
// gofl binary from ClusterSpec.Binary where it is, on this machine (the
// local provider): the client does not stage it in the blob cache for
// them, which would only hash (the first time also copy) tens of MB per
// deployment. RunsBinaryInPlace does not block.
type InPlaceBinary interface {
	RunsBinaryInPlace() bool
}

// ExitWatcher is implemented by a ClusterDeployer that learns when the
// JobManager of a cluster it deployed, from this process, exits (the local
// provider: the JobManager is its child). Exited returns a channel closed
// then, or nil for a cluster it did not deploy; it does not block. The
// client wakes on it instead of waiting out a Retrieve poll.
type ExitWatcher interface {
	Exited(clusterID string) <-chan struct{}
}

// WorkerSpec is the resources one worker (TaskManager) gets.
type WorkerSpec struct {
	// Slots is taskmanager.numberOfTaskSlots of the TaskManager; at least 1.
	Slots int
	// CPU is the number of cores to reserve (fractions allowed); 0: the
	// provider's default.
	CPU float64
	// Memory is the memory to reserve, in bytes; 0: the provider's default.
	Memory conf.MemorySize
}

// WorkerEvent is a WorkerStarted or a WorkerTerminated.
type WorkerEvent interface{ workerEvent() }

// WorkerStarted: the worker's process or container is running (not yet
// necessarily registered with the ResourceManager).
type WorkerStarted struct {
	WorkerID string
	// Address is where it runs, for logs (a host, or a pid for local).
	Address string
}

// WorkerTerminated: the worker ended, whether released, crashed, killed or
// never started. Delivered promptly: the provider reports a process exit
// as soon as it sees it.
type WorkerTerminated struct {
	WorkerID string
	// Cause says why (the exit status, the signal, "released"), for logs.
	Cause error
	// ExitStatus is the process exit code; -1 if it was killed by a signal
	// or is not known.
	ExitStatus int
	// Released: it ended because ReleaseWorker asked for it.
	Released bool
}

func (WorkerStarted) workerEvent()    {}
func (WorkerTerminated) workerEvent() {}

// EventHandler receives a WorkerDriver's events. It is called from the
// driver's goroutines and must not block (the ResourceManager posts the
// event to its mailbox). For one worker, WorkerStarted comes before
// WorkerTerminated, and WorkerTerminated comes exactly once; events of
// different workers may interleave. An event may arrive before the
// RequestWorker call that started the worker returned.
type EventHandler func(WorkerEvent)

// WorkerDriver is the JobManager half of a provider: the active
// ResourceManager's way to start and stop TaskManagers, Flink's
// ResourceManagerDriver. It is created by Provider.NewWorkerDriver and used
// only by the ResourceManager of the JobManager process it runs in;
// methods are safe for concurrent use.
type WorkerDriver interface {
	// Start begins delivering events to h; the ResourceManager calls it
	// once, before any RequestWorker. Does not block.
	Start(h EventHandler) error
	// RequestWorker starts one TaskManager with spec and returns its worker
	// ID (unique within the cluster), which the TaskManager registers under
	// as its resource ID. It blocks until the provider accepted the request
	// (the process is started, the container is scheduled) or failed, or ctx
	// ends; it does not wait for the TaskManager to register. An error means
	// no worker exists and no event will follow for it. Not idempotent:
	// every call is a new worker. Called by the ResourceManager from a
	// goroutine off its mailbox.
	RequestWorker(ctx context.Context, spec WorkerSpec) (string, error)
	// ReleaseWorker stops the worker (gracefully first, then forcibly). It
	// blocks until the stop is initiated, not until the worker is gone; its
	// WorkerTerminated (Released set) follows. Idempotent: releasing a
	// terminated worker is a no-op; an unknown ID fails with
	// ErrWorkerNotFound. Called by the ResourceManager off its mailbox.
	ReleaseWorker(ctx context.Context, workerID string) error
	// Close stops every worker the driver started that still runs, waits
	// until they are gone (or ctx ends) and stops delivering events: after
	// Close returns, h is not called again. Called once by the
	// ResourceManager when it stops. Idempotent.
	Close(ctx context.Context) error
}

// DriverContext is what a WorkerDriver is created with inside the
// JobManager process.
type DriverContext struct {
	// Config is the JobManager's configuration; the driver reads its own
	// options and the cluster's (deployment.cluster-id, deployment.binary).
	Config *conf.Configuration
	// JobManagerRPCAddress is the address TaskManagers register at,
	// host:port (the bound port, even when jobmanager.rpc.port is 0).
	JobManagerRPCAddress string
	Log                  zerolog.Logger
}

// Provider is a registered provider: constructors for its two halves.
type Provider struct {
	// Name is the registry name, the value of deployment.provider and of
	// `gofl session start -t`.
	Name string
	// NewDeployer returns the client half, configured from the client's
	// configuration. Nil: the provider deploys nothing (ErrNotSupported).
	NewDeployer func(c *conf.Configuration, log zerolog.Logger) (ClusterDeployer, error)
	// NewWorkerDriver returns the JobManager half. Nil: the provider starts
	// no workers, and the ResourceManager stays passive.
	NewWorkerDriver func(dc DriverContext) (WorkerDriver, error)
}
