// Package providers defines gofl's resource providers: where a cluster's
// JobManager and TaskManagers run. As Flink splits ClusterDescriptor and
// ResourceManagerDriver, a provider has two halves:
//
//   - ClusterDeployer, the client half: the `gofl` CLI deploys a session,
//     per-job or application cluster (one JobManager container, optionally
//     with initial TaskManagers), and retrieves, lists and kills clusters.
//   - WorkerDriver, the JobManager half: the active ResourceManager
//     (package resourcemanager) requests TaskManager workers with a
//     WorkerSpec, releases them, and hears WorkerStarted and
//     WorkerTerminated events through an EventHandler.
//
// A worker is one TaskManager process or container. Its worker ID is the
// TaskManager's resource ID: a provider starts the TaskManager with
// -D taskmanager.resource-id=<worker id>, and that is how the
// ResourceManager matches a registering TaskExecutor to the worker it asked
// for and removes it at once when the provider reports the worker ended.
//
// Providers are found by name in a registry (Register, Lookup):
// "standalone" (no provider: the ResourceManager is passive and clusters
// are started by hand) is built in; "local" (package providers/local, OS
// processes) and "nomad" register themselves when their package is linked.
package providers
