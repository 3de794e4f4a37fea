// Package metrics exposes a process's metrics to Prometheus the way
// Flink's PrometheusReporter does, so dashboards and alerts written for
// Flink work on gofl.
//
// A process (JobManager, TaskManager) builds one prometheus.Registry with
// NewRegistry, adds its own collectors, and starts every reporter the
// configuration declares (metrics.reporter.<name>.factory.class set to
// Flink's PrometheusReporterFactory) with StartReporters: each serves
// /metrics on the first free port of metrics.reporter.<name>.port. Names
// follow Flink's scopes turned into Prometheus names:
// flink_jobmanager_numRegisteredTaskManagers,
// flink_jobmanager_job_numRestarts{job_id,job_name},
// flink_taskmanager_job_task_numRecordsIn{job_id,job_name,task_name,
// subtask_index,tm_id,...}. The Go runtime stands in for Flink's
// Status.JVM group: flink_<process>_Status_Go_Memory_Heap_Used,
// ..._Status_Go_GC_PauseTime, ..._Status_Go_Goroutines.
//
// Collectors read the process's state when scraped, through the same
// queries the REST API uses, so metrics add no work to the record path;
// task I/O counters come from the samples the job runners already send.
//
// StartPprof serves Go's profiler on an opt-in loopback port
// (debug.pprof.port).
package metrics
