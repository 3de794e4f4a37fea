// Package jobmanager assembles the JobManager process: the ResourceManager,
// the Dispatcher with one JobMaster per job, the gRPC server TaskManagers
// talk to (ResourceManagerService and JobMasterService) and the REST API.
//
// Subpackages hold the parts: executiongraph and scheduler (the pure
// scheduling core), failover, jobmaster, dispatcher and rest.
package jobmanager
