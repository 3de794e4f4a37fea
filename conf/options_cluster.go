package conf

import (
	"errors"
	"time"
)

// Logging.

// Log levels accepted by log.level.
var LogLevels = []string{"trace", "debug", "info", "warn", "error"}

// LogLevel is the minimum level of log events that gofl processes write.
var LogLevel = EnumOption("log.level", "info", LogLevels,
	"Minimum level of log events written by gofl processes; --log-level overrides it.")

// Endpoints.

var (
	// JobManagerRPCAddress is where TaskManagers and clients reach the JobManager's RPC endpoint.
	JobManagerRPCAddress = StringOption("jobmanager.rpc.address", "localhost",
		"Host name or IP address of the JobManager's RPC endpoint, used by TaskManagers and clients.").
		WithCheck(nonEmpty)
	// JobManagerRPCPort is the JobManager's RPC port.
	JobManagerRPCPort = IntOption("jobmanager.rpc.port", 6123,
		"Port of the JobManager's RPC endpoint; 0 picks a free port.").
		WithCheck(between(0, 65535))
	// RestAddress is the host name clients use to reach the Dispatcher's REST API.
	RestAddress = StringOption("rest.address", "localhost",
		"Host name or IP address clients use to reach the Dispatcher's REST API and web UI.").
		WithCheck(nonEmpty)
	// RestPort is the Dispatcher's REST port.
	RestPort = IntOption("rest.port", 8081,
		"Port of the Dispatcher's REST API and web UI; 0 picks a free port.").
		WithCheck(between(0, 65535))
)

// Cluster resources and liveness.

var (
	// NumberOfTaskSlots is the number of slots each TaskManager offers.
	NumberOfTaskSlots = IntOption("taskmanager.numberOfTaskSlots", 1,
		"Number of task slots each TaskManager offers; each slot runs one parallel pipeline of a job.").
		WithCheck(atLeast(1))
	// EvenlySpreadOutSlots makes the ResourceManager spread slots across TaskManagers.
	EvenlySpreadOutSlots = BoolOption("cluster.evenly-spread-out-slots", false,
		"Spread slot allocations evenly across all registered TaskManagers instead of filling one TaskManager first.")
	// HeartbeatInterval is how often JobManager, ResourceManager and TaskManagers heartbeat each other.
	HeartbeatInterval = DurationOption("heartbeat.interval", 10*time.Second,
		"Time between heartbeat requests among JobMaster, ResourceManager and TaskManagers.").
		WithCheck(positive)
	// HeartbeatTimeout is how long without a heartbeat before a peer is considered lost.
	HeartbeatTimeout = DurationOption("heartbeat.timeout", 50*time.Second,
		"Time without a heartbeat response after which a peer is considered lost; must be at least heartbeat.interval.").
		WithCheck(positive)
	// HeartbeatRPCFailureThreshold counts failed heartbeat calls that mark a peer lost.
	HeartbeatRPCFailureThreshold = IntOption("heartbeat.rpc-failure-threshold", 2,
		"Consecutive heartbeat calls that fail because the peer cannot be reached after which it is considered lost without waiting for heartbeat.timeout (Flink's key); -1 disables this.").
		WithCheck(func(v int) error {
			if v == 0 || v < -1 {
				return errors.New("must be at least 1, or -1 to disable")
			}
			return nil
		})
	// ResourceManagerTaskManagerTimeout is how long a TaskManager may stay idle before it is released.
	ResourceManagerTaskManagerTimeout = DurationOption("resourcemanager.taskmanager-timeout", 30*time.Second,
		"Time a TaskManager may sit with all slots free before the ResourceManager releases it.").
		WithCheck(positive)
)

// History of ended jobs (Flink's job store).

var (
	// JobStoreMaxCapacity bounds how many ended jobs the Dispatcher keeps.
	JobStoreMaxCapacity = IntOption("jobstore.max-capacity", 1000,
		"Number of ended jobs whose status, details and result the JobManager keeps for the REST API; the oldest go first.").
		WithCheck(between(1, 1<<30))
	// JobStoreCacheSize bounds the ended jobs' execution results kept in memory.
	JobStoreCacheSize = MemorySizeOption("jobstore.cache-size", 50*Mebibyte,
		"Memory the ended jobs' accumulator results (Collect sinks' records) may take in the JobManager; past it the oldest jobs' results are dropped (their status stays), never the newest job's.").
		WithCheck(func(m MemorySize) error {
			if m < 1 {
				return errors.New("must be at least 1 byte")
			}
			return nil
		})
)

// Artifacts and staging.

var (
	// BlobOffloadMinSize is the size above which job artifacts travel through the blob store.
	BlobOffloadMinSize = MemorySizeOption("blob.offload.minsize", 1*Mebibyte,
		"Serialized job data larger than this is offloaded to the blob store instead of being sent inline over RPC.")
	// BlobStorageDirectory is where the JobManager keeps uploaded blobs.
	BlobStorageDirectory = StringOption("blob.storage.directory", "",
		"Directory the JobManager stores uploaded blobs (job binaries) in, by content digest; empty means a fresh temporary directory removed at shutdown.")
	// StagingDir is the root under which clusters stage binaries and configs.
	// Its default keeps "$HOME" unexpanded; expand with ExpandEnv where used.
	StagingDir = StringOption("staging.dir", "file://$HOME",
		"Root URI (file:// or hdfs://) under which clusters stage binaries and configs in .gofl/; $VARS are expanded where used.").
		WithCheck(nonEmpty)
	// BlobCacheMaxSize caps the staging area's blob cache.
	BlobCacheMaxSize = MemorySizeOption("blob.cache.max-size", 2*Gibibyte,
		"Size the client keeps the staging blob cache (<staging.dir>/.gofl/blobs) under: after staging, it removes the least recently staged blobs no live cluster uses until the cache fits (gofl cache ls, gofl cache prune); 0 disables pruning.")
)

// TaskManager endpoint.

var (
	// TaskManagerHost is the host name a TaskManager binds to and advertises.
	TaskManagerHost = StringOption("taskmanager.host", "",
		"Host name or IP address the TaskManager binds its RPC endpoint to and advertises to the JobManager; empty means 127.0.0.1.")
	// TaskManagerRPCPort is the TaskManager's RPC port.
	TaskManagerRPCPort = IntOption("taskmanager.rpc.port", 0,
		"Port of the TaskManager's RPC endpoint; 0 picks a free port.").
		WithCheck(between(0, 65535))
	// TaskManagerResourceID identifies a TaskManager to the ResourceManager.
	TaskManagerResourceID = StringOption("taskmanager.resource-id", "",
		"Unique ID of the TaskManager in the cluster; empty generates host:port plus a random suffix.")
	// TaskExecutorRegistrationTimeout bounds a TaskManager's registration at
	// the ResourceManager (Flink's taskmanager.registration.timeout).
	TaskExecutorRegistrationTimeout = DurationOption("taskmanager.registration.timeout", 5*time.Minute,
		"Time a TaskManager may take to register at the ResourceManager, at start and after losing it; past it the TaskManager terminates. "+
			"Without high availability, a TaskManager that was registered and lost its ResourceManager terminates after heartbeat.timeout instead.").
		WithCheck(positive)
	// TaskManagerSlotTimeout is how long an allocated slot waits for its JobMaster to accept it,
	// and (high availability) how long a slot kept on leader loss waits for the job's new JobMaster.
	TaskManagerSlotTimeout = DurationOption("taskmanager.slot.timeout", 10*time.Second,
		"Time an allocated slot may wait for its job's JobMaster to accept it before the TaskManager frees it again; "+
			"also the grace period a slot is kept for its job when the JobManager leader is lost (high availability), "+
			"waiting for the new leader's JobMaster of the job to take it.").
		WithCheck(positive)
)
