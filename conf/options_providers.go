package conf

import (
	"fmt"
	"strings"
	"time"
)

// Deployment and resource providers.

// Provider names accepted by deployment.provider.
var ProviderNames = []string{"standalone", "local", "nomad"}

var (
	// DeploymentProvider is the resource provider the ResourceManager starts
	// TaskManagers through; standalone makes it passive.
	DeploymentProvider = EnumOption("deployment.provider", "standalone", ProviderNames,
		"Resource provider the JobManager's ResourceManager starts and stops TaskManagers through: standalone (passive: TaskManagers are started by hand), local (OS processes) or nomad.")
	// DeploymentClusterID names the cluster a JobManager belongs to.
	DeploymentClusterID = StringOption("deployment.cluster-id", "",
		"ID of the cluster this JobManager runs; providers set it when they deploy a cluster and name the cluster's TaskManagers after it. Empty: a standalone JobManager (providers then use a generated ID).")
	// DeploymentBinary is the gofl binary providers start processes from.
	DeploymentBinary = StringOption("deployment.binary", "",
		"Path (or, for providers that fetch it, URL) of the gofl binary that providers start JobManagers and TaskManagers from; empty means the running gofl executable.")
	// LocalProviderDir is the local provider's base directory.
	// Its default keeps "$HOME" unexpanded; expand with ExpandEnv where used.
	LocalProviderDir = StringOption("provider.local.dir", "$HOME/.local/state/gofl",
		"Base directory of the local provider: each cluster's processes get working directories and log files under <dir>/clusters/<cluster-id>/, and its record (pid, REST address, mode) lets other clients retrieve, list and kill it; $VARS are expanded.").
		WithCheck(nonEmpty)
	// LocalJobManagerAttempts is how often the local provider starts a
	// cluster's JobManager (Flink's yarn.application-attempts).
	LocalJobManagerAttempts = IntOption("provider.local.jobmanager.attempts", 0,
		"How many times the local provider starts a cluster's JobManager, the first start included, as Flink's yarn.application-attempts: a JobManager that exits abnormally (killed, crashed) is restarted on the same ports until this many starts; then the cluster is failed and its processes stopped. 0 means 1 without high availability (a restarted JobManager would not know its jobs) and 2 with it, as in Flink.").
		WithCheck(atLeast(0))
)

// JobManagerAttempts is a provider's JobManager attempts option
// (LocalJobManagerAttempts, NomadJobManagerAttempts) with its default
// resolved: 1 without high availability, 2 with it.
func JobManagerAttempts(c *Configuration, opt *Option[int]) int {
	if n := opt.Get(c); n > 0 {
		return n
	}
	if t := HighAvailability(c); t == "" || strings.EqualFold(t, HighAvailabilityNone) {
		return 1
	}
	return 2
}

// Active resource management (any provider but standalone).

var (
	// StartWorkerMaxAttempts is how many consecutive worker starts may fail before jobs are failed.
	StartWorkerMaxAttempts = IntOption("resourcemanager.start-worker.max-attempts", 5,
		"Consecutive failed TaskManager starts (a request the provider rejects, a worker that exits or fails to register in time) after which the ResourceManager fails the jobs waiting for slots; a started TaskManager that registers resets the count.").
		WithCheck(atLeast(1))
	// StartWorkerRetryInterval is the first pause after a failed worker start.
	StartWorkerRetryInterval = DurationOption("resourcemanager.start-worker.retry-interval", time.Second,
		"Pause after a failed TaskManager start before the next; it doubles with each consecutive failure up to resourcemanager.start-worker.max-retry-interval.").
		WithCheck(positive)
	// StartWorkerMaxRetryInterval caps the doubling pause between failed worker starts.
	StartWorkerMaxRetryInterval = DurationOption("resourcemanager.start-worker.max-retry-interval", time.Minute,
		"Upper bound of the doubling pause between failed TaskManager starts.").
		WithCheck(positive)
	// TaskManagerRegistrationTimeout is how long a started worker may take to register.
	TaskManagerRegistrationTimeout = DurationOption("resourcemanager.taskmanager-registration.timeout", 5*time.Minute,
		"Time a TaskManager the ResourceManager started may take to register and report its slots; after it the worker is released and counts as a failed start.").
		WithCheck(positive)
)

// SlotManagerMinSlots is how many slots an active ResourceManager keeps running.
var SlotManagerMinSlots = IntOption("slotmanager.number-of-slots.min", 0,
	"Slots an active ResourceManager keeps available even without jobs: it starts TaskManagers until they hold this many slots and never releases idle ones below it. Providers set it for a cluster's initial TaskManagers.").
	WithCheck(atLeast(0))

// JobManagerAttemptsOf is JobManagerAttempts of a provider's settings as
// given to a JobManager, reading only opt and the high-availability type
// (other values there may be placeholders the provider fills in later).
func JobManagerAttemptsOf(settings map[string]string, opt *Option[int]) (int, error) {
	if v, ok := settings[opt.Key()]; ok {
		n, err := opt.Parse(v)
		if err != nil {
			return 0, fmt.Errorf("conf: %s: %w", opt.Key(), err)
		}
		if n < 0 {
			return 0, fmt.Errorf("conf: %s: %d is negative", opt.Key(), n)
		}
		if n > 0 {
			return n, nil
		}
	}
	t, ok := settings[HighAvailabilityType.Key()]
	if !ok {
		t = settings[HighAvailabilityTypeDeprecated.Key()]
	}
	if t = strings.TrimSpace(t); t == "" || strings.EqualFold(t, HighAvailabilityNone) {
		return 1, nil
	}
	return 2, nil
}
