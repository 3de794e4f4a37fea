// Package web is gofl's web dashboard: plain HTML, CSS and JavaScript
// modules embedded in the binary (go:embed), no build step and no Node
// toolchain. The pages read the REST API in Flink's shapes (jobmanager/rest)
// and poll it at /config's refresh-interval:
//
//	#/overview          TaskManagers, slots, running and finished jobs
//	#/job/{id}          the job graph as a DAG, vertices with their I/O,
//	                    back-pressure and busy ratio, subtasks and the
//	                    TaskManagers they run on, exception history,
//	                    checkpoints, cancel and stop-with-savepoint
//	#/taskmanagers      TaskManagers, slots, memory (where the cluster
//	                    reports it), logs and stdout (where served)
//	#/jobmanager        the cluster's configuration and log
//
// Handler serves the pages; Mount puts them beside a REST API handler, the
// way the JobManager (and the history server) serve both on one port. The
// dashboard's own files are public: only the API behind them asks for the
// REST token, which the user enters in the page; it is kept in the tab's
// sessionStorage and sent as Authorization: Bearer, never logged.
package web
