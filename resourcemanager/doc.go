// Package resourcemanager is the JobManager process's ResourceManager:
// Flink's ResourceManager with the DeclarativeSlotManager, passive
// (standalone) or active (with a provider's providers.WorkerDriver).
//
// # Model
//
// TaskExecutors register over gRPC (ResourceManagerService) with their
// location, slot count and an instance ID unique per process start, then
// report their slots. A slot report is the truth for that TaskExecutor's
// slots: each is free or allocated to a job (allocation ID + job ID). The
// first report makes the slots usable.
//
// JobMasters live in the same process. They register with a
// JobMasterGateway and declare a requirement: the total number of slots
// their job needs. Slots are uniform; there are no resource profiles yet.
//
// For each job, with R its requirement, A the slots allocated to it and P
// the RequestSlot calls in flight for it, while R > A+P and a free slot
// exists the ResourceManager picks one (the first registered TaskManager
// with a free slot, or with cluster.evenly-spread-out-slots the TaskManager
// with the lowest fraction of slots in use), marks it pending under a new
// allocation ID, and calls TaskExecutor.RequestSlot. The TaskExecutor then
// offers the slot to the JobMaster itself. On success the slot is allocated;
// on failure it is free again and is not picked again before the next
// heartbeat tick, so failures never loop hot. A pending slot keeps its state
// whatever slot reports say until its call returns, and a heartbeat's report
// requested before a RequestSlot returned does not undo that call's result.
// Matching runs after every change: registration, slot report, requirement,
// RPC result, lost TaskExecutor, tick. The ResourceManager never reclaims
// slots: when R < A the JobMaster frees slots through the TaskExecutors,
// which report them free.
//
// A job whose requirement the registered slots cannot satisfy (free slots
// plus what it holds < R) is told at once through
// JobMasterGateway.NotifyNotEnoughResources, once per change of what it
// holds; a requirement unfulfilled for slot.request.timeout is notified
// again, with a warning in the log, and again after each further timeout.
//
// Every heartbeat.interval the ResourceManager heartbeats every
// TaskExecutor (the response's slot report is reconciled) and every
// JobMaster. A TaskExecutor not heard from within heartbeat.timeout is
// unregistered and its slots removed; a JobMaster likewise is disconnected
// and its requirement dropped. DisconnectTaskExecutor and a provider's
// WorkerTerminated event act at once.
//
// # Active mode
//
// With Config.Workers set (deployment.provider is local or nomad) the
// ResourceManager starts and stops TaskManagers itself, as Flink's
// ActiveResourceManager does. After every matching round a pure
// workerPlanner (workers.go) decides, from the slots the jobs miss, the
// free slots and the workers still starting:
//
//   - request ceil((missing − free − pending·slots)/slots) workers of
//     taskmanager.numberOfTaskSlots slots each, where pending counts the
//     workers requested or started whose slots are not usable yet, so a
//     burst never over-provisions; and enough to keep
//     slotmanager.number-of-slots.min;
//   - release a worker whose slots were all free for
//     resourcemanager.taskmanager-timeout (never below the minimum), and
//     one not registered within
//     resourcemanager.taskmanager-registration.timeout;
//   - after a failed start (rejected request, exit before registering,
//     registration timeout) pause resourcemanager.start-worker.retry-interval,
//     doubling up to .max-retry-interval, and probe one worker at a time;
//     after resourcemanager.start-worker.max-attempts consecutive failures
//     tell every job short of slots (NotifyNotEnoughResources, and
//     NotifyResourceAllocationFailed with ErrWorkerStartFailed where the
//     gateway implements ResourceAllocationFailureNotifier), then keep
//     probing at the maximum interval.
//
// A worker's ID is its TaskManager's resource ID (the provider passes
// -D taskmanager.resource-id), which is how registrations are matched to
// workers. A WorkerTerminated event unregisters the TaskExecutor at once;
// a TaskExecutor of ours lost otherwise (heartbeat timeout, disconnect) is
// released. Immediate not-enough-resources notices are not sent in active
// mode (workers are on their way); the slot.request.timeout notice is.
// Workers started by hand register as usual and are never released.
//
// # Structure
//
// slotManager holds the bookkeeping and matching as plain methods without
// goroutines, clock or I/O (tested by scenario scripts). ResourceManager
// wraps it: its state lives on one mailbox goroutine (internal/mailbox);
// gRPC handlers and the in-process API use mailbox.Call, outgoing RPCs run
// with mailbox.Go under a per-call timeout and continue on the mailbox, and
// heartbeat.Monitor tracks when peers were last heard. In active mode
// active.go carries out the planner's decisions: RequestWorker and
// ReleaseWorker run with mailbox.Go, the driver's events are posted to the
// mailbox, and one timer wakes the planner at its next deadline. Run starts
// the driver and closes it (stopping every worker) when it returns.
package resourcemanager
