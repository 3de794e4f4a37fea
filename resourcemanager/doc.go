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
// Slot reports are level-triggered and safe against reordering. Every
// heartbeat's answer carries a report, stamped with the slot manager's
// version when the heartbeat was sent; at most one heartbeat per
// TaskExecutor is in flight, so answers arrive in order. An answer is the
// truth for every slot except one with a RequestSlot in flight or one that
// changed after the heartbeat was sent (the answer may predate the
// change): allocations the RM did not know are adopted, allocations the
// TaskExecutor no longer reports are freed. A report the TaskExecutor
// pushes itself (SendSlotReport, e.g. after freeing a slot) carries no
// such stamp, so after the first one it is a hint: if it disagrees with the
// RM's view, or a heartbeat answer that may predate it is on its way, the
// RM sends a heartbeat at once (as soon as no RequestSlot to that
// TaskExecutor is in flight), and that answer decides. A failed RequestSlot
// prompts one too. Late, duplicated or reordered reports thus cost a
// heartbeat, never a wrong view; the view converges to the TaskExecutor's
// once the RM stops changing its slots. (Sequence numbers in reports would
// let pushed reports be applied directly.)
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
// allocation ID, and calls TaskExecutor.RequestSlot through the
// TaskExecutor's outbox (internal/outbox: FIFO, one call in flight,
// transient failures retried with jittered backoff until the RPC timeout).
// The TaskExecutor then offers the slot to the JobMaster itself. On success
// the slot is allocated; on final failure it is free again and is not
// picked again before the next heartbeat tick, so failures never loop hot.
// A pending slot keeps its state whatever slot reports say until its call
// returns.
//
// A slot the RM allocated to a job that a report shows free again within
// two heartbeat intervals, while the job has not declared since, was
// refused by the job: its JobMaster rejected the offer (say, still counting
// a dead TaskManager's slots) and the TaskExecutor freed it. The RM then
// pauses requesting slots for that job (internal/backoff from 100 ms,
// doubling, jittered, capped at the heartbeat interval; refusals during a
// pause count once) until the pause ends or the job declares again, and a
// slot the job keeps past that window ends the run. Without it the RM and
// the JobMaster would trade offers as fast as the network allows.
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
// JobMaster, at most one heartbeat in flight per peer, off the mailbox, so
// a hung JobMaster or TaskExecutor delays no other. A TaskExecutor not
// heard from within heartbeat.timeout is unregistered and its slots
// removed; a JobMaster likewise is disconnected and its requirement
// dropped. DisconnectTaskExecutor and a provider's WorkerTerminated event
// act at once. Whenever a TaskExecutor is unregistered (heartbeat timeout,
// disconnect, replacement by a new process, release) or the provider
// reports its worker terminated, every JobMaster is told through
// JobMasterGateway.NotifyTaskManagerLost, so a job drops a dead TaskManager
// as fast as the provider notices (0.1 s locally), not at its own
// heartbeat timeout.
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
// goroutines, clock or I/O (tested by scenario scripts and a model of a
// TaskExecutor behind a reordering network). ResourceManager wraps it: its
// state lives on one mailbox (internal/mailbox); gRPC handlers and the
// in-process API use mailbox.Call, calls to a TaskExecutor go through its
// outbox and heartbeats through mailbox.Go, all continuing on the mailbox,
// and heartbeat.Monitor tracks when peers were last heard. Calls to
// JobMasters are Go calls that must not block (the JobMaster posts to its
// own mailbox). In active mode active.go carries out the planner's
// decisions: RequestWorker and ReleaseWorker run with mailbox.Go, the
// driver's events are posted to the mailbox. One timer wakes the RM at the
// next deadline (a job's pause, the planner's), another ticks the
// heartbeat interval; both are clock.AfterFunc re-armed from the mailbox.
//
// For the fault simulator, Config injects the clock, the mailbox's
// Executor, the TaskExecutor dialer and the random source (IDs, jitter);
// Start posts the first turn without blocking, and Run is Start plus the
// mailbox loop plus cleanup: it starts the driver and closes it (stopping
// every worker) when it returns.
package resourcemanager
