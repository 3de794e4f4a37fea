package conf

import "time"

// Logs that outlive their processes, and the history server.

var (
	// LogArchiveDir is where processes' logs are archived when they end.
	LogArchiveDir = StringOption("cluster.log-archive.dir", "",
		"Root URI (file:// or hdfs://) under which each cluster's logs are archived as <dir>/<cluster-id>/ when a TaskManager, job runner or the cluster ends, and kept after cleanup; empty means <staging.dir>/.gofl/<cluster-id>/logs, which is kept when the staging directory is removed. gofl logs reads it once the cluster is gone.")
	// LogArchiveInterval is how often a TaskManager ships its logs while it runs.
	LogArchiveInterval = DurationOption("cluster.log-archive.interval", 10*time.Second,
		"How often a TaskManager copies its own log and its job runners' logs to the log archive while it runs, so a TaskManager killed with SIGKILL loses at most this much output; 0 archives only when a runner or the TaskManager ends.")
	// TaskManagerWorkDir is a TaskManager's working directory.
	TaskManagerWorkDir = StringOption("taskmanager.work.dir", "",
		"Directory a TaskManager keeps its library cache and each job runner's socket and logs in (kept at exit); empty means a fresh temporary directory removed at exit.")
	// JobManagerArchiveDir is where finished jobs are archived for the history server.
	JobManagerArchiveDir = StringOption("jobmanager.archive.fs.dir", "",
		"URI (file:// or hdfs://) of the directory the JobManager archives each globally terminal job's REST JSON to (one file per job, Flink's format), for gofl historyserver; empty disables archiving.")
	// HistoryServerArchiveDirs are the directories the history server reads.
	HistoryServerArchiveDirs = StringOption("historyserver.archive.fs.dir", "",
		"Comma-separated URIs (file:// or hdfs://) of the job archive directories gofl historyserver serves (the JobManagers' jobmanager.archive.fs.dir).")
	// HistoryServerWebAddress is the history server's bind address.
	HistoryServerWebAddress = StringOption("historyserver.web.address", "127.0.0.1",
		"Address gofl historyserver binds its REST API and web UI to.")
	// HistoryServerWebPort is the history server's port.
	HistoryServerWebPort = IntOption("historyserver.web.port", 8082,
		"Port of gofl historyserver's REST API and web UI; 0 picks a free port.").
		WithCheck(between(0, 65535))
	// HistoryServerRefreshInterval is how often the history server rescans.
	HistoryServerRefreshInterval = DurationOption("historyserver.archive.fs.refresh-interval", 10*time.Second,
		"How often gofl historyserver scans its archive directories for new job archives.")
)
