package taskmanager

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/ha"
	"github.com/gofl/gofl/internal/blob"
	"github.com/gofl/gofl/internal/clock"
	"github.com/gofl/gofl/internal/mailbox"
	"github.com/gofl/gofl/internal/tlsconf"
	"github.com/gofl/gofl/logs"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/taskmanager/runner"
)

// Config configures a TaskExecutor. Zero fields take the defaults listed.
type Config struct {
	// ResourceID is the TaskManager's unique ID in the cluster; default
	// host:port plus a short random suffix.
	ResourceID string
	// Host is the advertised host; default 127.0.0.1.
	Host string
	// RPCBindAddress is where the TaskExecutor service listens, e.g.
	// "127.0.0.1:0"; default Host with a free port.
	RPCBindAddress string
	// NumberOfSlots is the number of task slots; at least 1.
	NumberOfSlots int
	// ResourceManagerAddress is the JobManager's RPC address, host:port.
	ResourceManagerAddress string
	// RPCTimeout bounds every outgoing call attempt and the shutdown;
	// default 10 s.
	RPCTimeout time.Duration
	// RegistrationBackoff is the first pause between attempts of a call to
	// the ResourceManager or a JobMaster (registration, offers, reports),
	// growing with jitter up to MaxRegistrationBackoff; default 100 ms.
	RegistrationBackoff time.Duration
	// SlotTimeout is how long an allocated slot waits for its JobMaster to
	// accept it before it is freed again (taskmanager.slot.timeout), and how
	// long a slot kept on leader loss waits for the job's next JobMaster;
	// default 10 s.
	SlotTimeout time.Duration
	// RegistrationTimeout bounds a registration round at the
	// ResourceManager, at start and after a loss; past it the TaskExecutor
	// stops with ErrRegistrationTimeout. Without high availability
	// (ExitOnResourceManagerLoss) a round after a loss is bounded by the
	// lost registration's heartbeat timeout. Default 5 min.
	RegistrationTimeout time.Duration
	// HeartbeatTimeout applies when a registration response carries no
	// heartbeat timeout, and to job runners: a runner silent for it is
	// killed (heartbeat.timeout); default 50 s.
	HeartbeatTimeout time.Duration
	// HeartbeatInterval is how often job runners send their heartbeat
	// (heartbeat.interval); default 10 s.
	HeartbeatInterval time.Duration
	// ReportDeadline is how long a task state update (or a partition-loss
	// report) may take to reach the JobMaster, retries included, before
	// the JobMaster counts as lost; default the JobMaster's heartbeat
	// timeout.
	ReportDeadline time.Duration
	// CancelTombstoneTTL is how long an attempt the JobMaster cancelled is
	// remembered, so a SubmitTask of it arriving late is refused; default
	// 10 min. Tombstones are dropped with the job's connection too.
	CancelTombstoneTTL time.Duration
	// WorkDir holds the library cache of job binaries and each job
	// runner's socket and log (taskmanager.tmp-dirs); default a fresh
	// temporary directory removed when Run returns.
	WorkDir string
	// StagingDir is staging.dir (expanded): a job binary that its blob
	// cache holds on this host's disk (per-job and application clusters on
	// the local provider) is hard-linked into the library cache, checked,
	// instead of fetched from the JobManager. Empty: always fetched.
	StagingDir string
	// JobBinary is the blob key of the job binary a per-job or application
	// cluster's TaskManager will run (from deployment.job-binary): New
	// links it from StagingDir in the background while the TaskManager
	// registers and gets slots, so its first task does not wait for the
	// binary's digest check. Empty: linked on the first task, as in a
	// session.
	JobBinary string
	// JobGraph is a per-job cluster's staged JobGraph (deployment.jobgraph):
	// with JobBinary, the TaskManager starts the job's runner as soon as it
	// registered at the ResourceManager, ahead of the first task. Empty:
	// the first task starts it.
	JobGraph string
	// LogFile is the file this process's stdout and stderr go to
	// (GOFL_LOG_FILE), served as taskmanager.log; empty: none.
	LogFile string
	// LogArchive, if set, receives this TaskManager's log and its runners'
	// logs (package logs): when a runner dies, every LogArchiveInterval
	// (0: never periodically) and at the end of Run. Run does not close it.
	LogArchive         *logs.Archive
	LogArchiveInterval time.Duration
	// MetricsInterval is how often job runners sample their tasks' I/O
	// metrics, which the TaskManager relays to the JobMaster with its
	// heartbeat answers; default 1 s.
	MetricsInterval time.Duration
	// RunnerEnv is added to every job runner's environment: the
	// TaskManager's file-system settings (storage.ClientEnv), so user code
	// reading or writing hdfs:// acts as the TaskManager is configured to.
	RunnerEnv []string
	// Storage is the TaskManager's own HDFS client options: it reads a
	// session job's staged delegation tokens with them, for the job's
	// runners (restapi.JobConfigDelegationTokensFile).
	Storage storage.Options
	// ManagedMemory is taskmanager.memory.managed.size, shared by the
	// slots' batch operators (told to runners through RunnerEnv); reported
	// in the TaskManager's hardware description.
	ManagedMemory int64
	// InternalTLS, if set, is the cluster's internal TLS material
	// (security.ssl.internal.*): the gRPC server requires it of
	// JobManagers, the gRPC clients (JobMaster, ResourceManager, blob
	// fetches) present it, and the job runners' data plane gets it as
	// private files in WorkDir. Nil: plain text.
	InternalTLS *tlsconf.Material

	// The fields below are seams for tests and the fault simulator; nil
	// (false) means the real thing.

	// Clock is the source of time and timers; default clock.Real.
	Clock clock.Clock
	// Executor runs the mailbox's turns and outgoing calls; default the
	// mailbox's own goroutine.
	Executor mailbox.Executor
	// DialJobMaster and DialResourceManager connect to a peer; default a
	// gRPC client (insecure). The Closer is closed with the connection.
	DialJobMaster       func(addr string) (pb.JobMasterServiceClient, io.Closer, error)
	DialResourceManager func(addr string) (pb.ResourceManagerServiceClient, io.Closer, error)
	// LeaderRetrieval, if set (high availability), finds the
	// ResourceManager as the current leader of ha.ResourceManagerComponent
	// instead of at ResourceManagerAddress: every re-registration reaches
	// the leader of the moment. The caller owns and closes it.
	LeaderRetrieval ha.Services
	// ExitOnResourceManagerLoss makes the TaskExecutor stop (Run returns
	// ErrResourceManagerLost) once the registered ResourceManager's
	// heartbeats stop for the heartbeat timeout, instead of registering
	// again: without high availability nothing recovers the JobManager's
	// jobs, so its TaskManagers and their runners go (gofl taskmanager sets
	// it when high-availability.type is none).
	ExitOnResourceManagerLoss bool
	// Rand draws IDs and retry jitter; default seeded from crypto/rand.
	// Only the TaskExecutor's goroutine uses it after New.
	Rand *rand.Rand
	// NoRPCServer builds a TaskExecutor that listens on nothing and serves
	// no gRPC: its service is reached through Service(), and its advertised
	// address is RPCBindAddress as given (the fault simulator).
	NoRPCServer bool
	// TaskRunner, if set, builds what runs the tasks (see TaskRunner);
	// default built-in invokables in-process and job binaries in job runner
	// processes.
	TaskRunner func(TaskRunnerHost) TaskRunner
}

// Defaults.
const (
	DefaultHost                = "127.0.0.1"
	DefaultRPCTimeout          = 10 * time.Second
	DefaultRegistrationBackoff = 100 * time.Millisecond
	// MaxRegistrationBackoff caps the doubling registration pause.
	MaxRegistrationBackoff = 10 * time.Second
	DefaultSlotTimeout     = 10 * time.Second
	// DefaultRegistrationTimeout is Flink's taskmanager.registration.timeout.
	DefaultRegistrationTimeout = 5 * time.Minute
	DefaultHeartbeatTimeout    = 50 * time.Second
	DefaultHeartbeatInterval   = 10 * time.Second
	DefaultMetricsInterval     = time.Second
	DefaultCancelTombstoneTTL  = 10 * time.Minute
)

// ConfigFromConf builds a Config from the taskmanager.*, jobmanager.rpc.*
// and heartbeat.* options.
func ConfigFromConf(c *conf.Configuration) Config {
	host := conf.TaskManagerHost.Get(c)
	if host == "" {
		host = DefaultHost
	}
	return Config{
		ResourceID:             conf.TaskManagerResourceID.Get(c),
		Host:                   host,
		RPCBindAddress:         net.JoinHostPort(host, strconv.Itoa(conf.TaskManagerRPCPort.Get(c))),
		NumberOfSlots:          conf.NumberOfTaskSlots.Get(c),
		ResourceManagerAddress: net.JoinHostPort(conf.JobManagerRPCAddress.Get(c), strconv.Itoa(conf.JobManagerRPCPort.Get(c))),
		SlotTimeout:            conf.TaskManagerSlotTimeout.Get(c),
		RegistrationTimeout:    conf.TaskExecutorRegistrationTimeout.Get(c),
		HeartbeatTimeout:       conf.HeartbeatTimeout.Get(c),
		HeartbeatInterval:      conf.HeartbeatInterval.Get(c),
		RunnerEnv:              append(slices.Clip(storage.ClientEnv(c)), batchMemoryEnv(c)...),
		Storage:                storage.OptionsFromConf(c),
		ManagedMemory:          int64(conf.TaskManagerManagedMemorySize.Get(c)),
		WorkDir:                conf.ExpandEnv(conf.TaskManagerWorkDir.Get(c)),
		StagingDir:             conf.ExpandEnv(conf.StagingDir.Get(c)),
		JobBinary:              stagedJobBinary(c),
		JobGraph:               stagedJobGraph(c),
		LogArchiveInterval:     conf.LogArchiveInterval.Get(c),
	}
}

// stagedJobGraph is a per-job cluster's staged JobGraph URI, else "".
func stagedJobGraph(c *conf.Configuration) string {
	if conf.DeploymentMode.Get(c) != conf.ModePerJob {
		return ""
	}
	return conf.DeploymentJobGraph.Get(c)
}

// stagedJobBinary is the blob key of a per-job or application cluster's
// staged job binary (deployment.job-binary, <staging>/.gofl/blobs/sha256/<hex>),
// or "" in a session or when it names no blob.
func stagedJobBinary(c *conf.Configuration) string {
	uri := conf.DeploymentJobBinary.Get(c)
	if uri == "" || conf.DeploymentMode.Get(c) == conf.ModeSession {
		return ""
	}
	key, err := blob.KeyOfPath(uri)
	if err != nil {
		return ""
	}
	return key
}

// withDefaults fills zero fields and checks the rest. ResourceID is filled
// in New, once the port is known.
func (c Config) withDefaults() (Config, error) {
	if c.Host == "" {
		c.Host = DefaultHost
	}
	if c.RPCBindAddress == "" {
		c.RPCBindAddress = net.JoinHostPort(c.Host, "0")
	}
	if c.RPCTimeout <= 0 {
		c.RPCTimeout = DefaultRPCTimeout
	}
	if c.RegistrationBackoff <= 0 {
		c.RegistrationBackoff = DefaultRegistrationBackoff
	}
	if c.MetricsInterval <= 0 {
		c.MetricsInterval = DefaultMetricsInterval
	}
	if c.SlotTimeout <= 0 {
		c.SlotTimeout = DefaultSlotTimeout
	}
	if c.RegistrationTimeout <= 0 {
		c.RegistrationTimeout = DefaultRegistrationTimeout
	}
	if c.HeartbeatTimeout <= 0 {
		c.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = min(DefaultHeartbeatInterval, c.HeartbeatTimeout/5)
	}
	if c.CancelTombstoneTTL <= 0 {
		c.CancelTombstoneTTL = DefaultCancelTombstoneTTL
	}
	var errs []error
	if c.NumberOfSlots < 1 {
		errs = append(errs, fmt.Errorf("NumberOfSlots is %d; it must be at least 1", c.NumberOfSlots))
	}
	if c.ResourceManagerAddress == "" {
		errs = append(errs, errors.New("ResourceManagerAddress is empty"))
	} else if _, _, err := net.SplitHostPort(c.ResourceManagerAddress); err != nil {
		errs = append(errs, fmt.Errorf("ResourceManagerAddress %q is not host:port: %w", c.ResourceManagerAddress, err))
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("taskmanager: invalid config: %w", err)
	}
	return c, nil
}

// batchMemoryEnv tells runners their slot's managed memory and the spill
// directories (runner.EnvManagedMemory, runner.EnvTmpDirs).
func batchMemoryEnv(c *conf.Configuration) []string {
	slots := int64(max(conf.NumberOfTaskSlots.Get(c), 1))
	env := []string{runner.EnvManagedMemory + "=" + strconv.FormatInt(int64(conf.TaskManagerManagedMemorySize.Get(c))/slots, 10)}
	if d := conf.IOTmpDirs.Get(c); d != "" {
		env = append(env, runner.EnvTmpDirs+"="+conf.ExpandEnv(d))
	}
	return env
}
