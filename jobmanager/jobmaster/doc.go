// Package jobmaster runs one job: it is the driver of the pure scheduling
// core (jobmanager/scheduler) and does the I/O the core asks for.
//
// A JobMaster owns its state on one mailbox goroutine. Events reach the
// core from the TaskManagers (slot offers, task state updates,
// disconnects), from the ResourceManager (not enough resources), from
// heartbeats (a silent TaskManager is lost) and from one timer (the core's
// WakeAt). After every Step the JobMaster carries out the Ready: it declares
// slot requirements to the ResourceManager, answers slot offers, submits
// TDDs, cancels tasks, releases partitions and frees slots, all as
// asynchronous RPCs with deadlines whose outcomes come back as events.
//
// Logical time for the core is the time since the JobMaster started.
package jobmaster
