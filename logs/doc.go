// Package logs makes the logs of gofl's processes outlive them.
//
// A process's logs are named files: the process's own log
// (jobmanager.log, taskmanager.log: the file its provider sends its
// stdout and stderr to, GOFL_LOG_FILE) and, on a TaskManager, each job
// runner's runner-<job-id>.log (stdout and stderr), .out (stdout: the
// job's Print()) and .err (stderr). A Source lists and reads them while
// the process lives; the REST API serves them (Flink's
// /jobmanager/logs, /taskmanagers/{id}/logs/{name}, ...), the
// TaskManager's through its LogService RPC. Only names a Source lists are
// ever opened, so no request reaches a path outside the log directory.
//
// An Archive is where they go when a runner, a TaskManager or the cluster
// ends (cluster.log-archive.dir, default <staging.dir>/.gofl/<cluster-id>/logs):
//
//	<root>/jobmanager/jobmanager.log
//	<root>/taskmanagers/<resource-id>/taskmanager.log
//	<root>/taskmanagers/<resource-id>/runner-<job-id>.{log,out,err}
//
// TaskManagers copy runner logs when a runner exits, everything every
// cluster.log-archive.interval and at their end; the local provider copies
// what is left on disk when it kills or cleans a cluster, so a kill -9
// loses nothing there. gofl logs reads a live cluster over REST and a gone
// one from its archive.
package logs
