package taskmanager

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/storage"
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
	// RPCTimeout bounds every outgoing call; default 10 s.
	RPCTimeout time.Duration
	// RegistrationBackoff is the first pause between registration attempts,
	// doubled up to 10 s; default 100 ms.
	RegistrationBackoff time.Duration
	// SlotTimeout is how long an allocated slot waits for its JobMaster to
	// accept it before it is freed again (taskmanager.slot.timeout);
	// default 10 s.
	SlotTimeout time.Duration
	// HeartbeatTimeout applies when a registration response carries no
	// heartbeat timeout (heartbeat.timeout); default 50 s.
	HeartbeatTimeout time.Duration
	// WorkDir holds the library cache of job binaries and each job
	// runner's socket and log (taskmanager.tmp-dirs); default a fresh
	// temporary directory removed when Run returns.
	WorkDir string
	// MetricsInterval is how often job runners sample their tasks' I/O
	// metrics, which the TaskManager relays to the JobMaster with its
	// heartbeat answers; default 1 s.
	MetricsInterval time.Duration
	// RunnerEnv is added to every job runner's environment: the
	// TaskManager's file-system settings (storage.ClientEnv), so user code
	// reading or writing hdfs:// acts as the TaskManager is configured to.
	RunnerEnv []string
}

// Defaults.
const (
	DefaultHost                = "127.0.0.1"
	DefaultRPCTimeout          = 10 * time.Second
	DefaultRegistrationBackoff = 100 * time.Millisecond
	// MaxRegistrationBackoff caps the doubling registration pause.
	MaxRegistrationBackoff  = 10 * time.Second
	DefaultSlotTimeout      = 10 * time.Second
	DefaultHeartbeatTimeout = 50 * time.Second
	DefaultMetricsInterval  = time.Second
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
		HeartbeatTimeout:       conf.HeartbeatTimeout.Get(c),
		RunnerEnv:              storage.ClientEnv(c),
	}
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
	if c.HeartbeatTimeout <= 0 {
		c.HeartbeatTimeout = DefaultHeartbeatTimeout
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
