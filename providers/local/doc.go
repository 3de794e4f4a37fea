// Package local is gofl's embedded default resource provider: a cluster's
// JobManager and TaskManagers run as OS processes of the gofl binary on
// this machine, with nothing external to install.
//
// # Layout
//
// Everything of a cluster lives under its directory in the base directory
// (provider.local.dir, default $HOME/.local/state/gofl):
//
//	<base>/clusters/<cluster-id>/cluster.json       the record: pid, REST and RPC address, mode, ...
//	<base>/clusters/<cluster-id>/jobmanager/        the JobManager's working directory: gofl.log, pid
//	<base>/clusters/<cluster-id>/taskmanager-N/     each TaskManager's working directory: gofl.log, pid
//
// Every process is `gofl jobmanager` or `gofl taskmanager` with -D flags,
// runs in that working directory with the client's environment (plus
// GOFL_CLUSTER_ID), writes stdout and stderr to gofl.log there, and leads a
// process group of its own. Its pid file holds "pid start-time", so a
// recycled pid is never mistaken for it.
//
// # Client half (Deployer)
//
// Deploy starts the JobManager with deployment.provider=local, so its
// ResourceManager is active and starts TaskManagers through this package's
// WorkerDriver, and with free RPC and REST ports unless the configuration
// names them. It reads the bound addresses from the JobManager's log, waits
// for GET /overview to answer, and only then writes the record as running.
// On any failure it kills what it started and removes the cluster's
// directory. Because the record is a file, Retrieve, List and Kill work
// from any client process; a record whose JobManager is gone is stale and
// cleaned (its remaining processes killed, its directory removed) when
// listed or retrieved. Kill sends SIGTERM to the process group of every
// process of the cluster (the JobManager and every TaskManager with a pid
// file), then SIGKILL to what still runs after the grace period, and
// removes the directory once nothing runs. A JobManager notes an orderly
// exit in jobmanager/exited (WriteExitFile); a cluster whose JobManager
// ended without it (killed) is reported failed, and kept until Kill.
//
// # Restarts (Supervise)
//
// With provider.local.jobmanager.attempts above 1 (the default with high
// availability), Deploy also starts <cluster>/supervisor/, `gofl
// local-supervisor`, which restarts a JobManager that ended abnormally on
// its ports from jobmanager/launch.json, counting attempts in the record;
// out of attempts it notes the failure in the record and stops the
// cluster's processes.
//
// # JobManager half (WorkerDriver)
//
// Inside the JobManager, RequestWorker starts `gofl taskmanager` with
// -D taskmanager.resource-id=<worker id> (the worker ID is the directory
// name, taskmanager-N) and reports WorkerStarted; a goroutine waits for the
// process, so its exit reaches the ResourceManager at once as
// WorkerTerminated with the exit status. ReleaseWorker sends SIGTERM, then
// SIGKILL after the grace period; Close stops every worker and waits.
package local
