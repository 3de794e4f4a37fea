// Package dispatcher accepts jobs and runs one JobMaster per job, as Flink's
// Dispatcher does. It keeps the running jobs and a bounded history of ended
// ones, serves the REST API's queries (jobmanager/rest.Dispatcher) and
// routes the TaskManagers' JobMasterService calls to the right JobMaster.
//
// Its state lives on one mailbox goroutine; queries to a JobMaster are made
// outside that mailbox so one slow job never stalls the others.
package dispatcher
