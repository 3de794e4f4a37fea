// Package jobmaster runs one job: it is the driver of the pure scheduling
// core (jobmanager/scheduler) and does the I/O the core asks for.
//
// A JobMaster owns its state on one mailbox goroutine. Events reach the
// core from the TaskManagers (slot offers, task state updates,
// disconnects), from the ResourceManager (not enough resources), from
// heartbeats (a silent TaskManager is lost) and from one timer (the core's
// WakeAt). After every Step the JobMaster carries out the Ready in full
// before the next Step (raft's Ready/Advance): it declares slot
// requirements to the ResourceManager, answers slot offers, submits TDDs,
// cancels tasks, releases partitions and frees slots. Outcomes that come
// back meanwhile are held and stepped afterwards.
//
// Every call to a peer goes through that peer's outbox.Outbox: one per
// registered TaskManager (SubmitTask, CancelTask, FreeSlot,
// ReleasePartitions, DisconnectJobManager) and one for the ResourceManager
// (RegisterJobMaster, DeclareResourceRequirements with the newest value
// winning, DisconnectJobMaster). Calls to a peer therefore arrive in the
// order they were made and are retried with backoff: a CancelTask never
// overtakes its SubmitTask, and the ResourceManager ends with the newest
// requirement. Cancellations are retried until acknowledged or the
// TaskManager is lost (its outbox closes); a SubmitTask has
// Config.RPCTimeout, after which the attempt fails and is cancelled through
// the same outbox. Heartbeats go outside the outboxes, at most one in
// flight per TaskManager; every answer is reconciled with what the
// scheduler expects there (scheduler.TaskManagerReport).
//
// Time comes from Config.Clock: logical time for the core is the time since
// the JobMaster started.
package jobmaster
