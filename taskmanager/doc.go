// Package taskmanager is the TaskManager process's endpoint, Flink's
// TaskExecutor: it registers at the ResourceManager, keeps the slot table,
// connects to the JobMasters of the jobs its slots are allocated to, runs
// their tasks and reports task states back.
//
// # One goroutine owns the state
//
// All mutable state (slot table, JobMaster connections, tasks, produced
// partitions, the ResourceManager registration) lives on one
// internal/mailbox goroutine. gRPC handlers (service.go) hand their work to
// it with mailbox.Call; outgoing calls run with mailbox.Go under the RPC
// timeout and continue on the mailbox. Timers are mailbox.Go calls that
// sleep, so everything the TaskExecutor starts ends before Run returns.
// Continuations check that the connection or registration they belong to is
// still current (rmConnection.gen, te.jobs[job] == jc, slot.allocSeq) and
// otherwise do nothing.
//
// # Lifecycle
//
//   - Registration. RegisterTaskExecutor is retried with exponential
//     backoff (Config.RegistrationBackoff doubling to 10 s). FAILED_PRECONDITION
//     (protocol mismatch) and ALREADY_EXISTS (resource ID taken) are fatal:
//     Run returns an error naming the cause. After registering, a slot
//     report follows; heartbeats (HeartbeatFromResourceManager) are answered
//     with the slot report, and when they stop for the heartbeat timeout the
//     TaskExecutor registers again, keeping slots and tasks.
//   - Slots. RequestSlot allocates a free slot (idempotent for the same
//     allocation; RESOURCE_EXHAUSTED if another allocation holds it), then
//     registers at the job's JobMaster if not yet connected and offers the
//     slot. Accepted slots become active; rejected ones, and ones not
//     accepted within Config.SlotTimeout, are freed and reported. FreeSlot
//     cancels the slot's tasks; the slot is free once they ended.
//   - Tasks. SubmitTask needs an active slot of the job holding the TDD's
//     allocation. A task is a goroutine running a registered invokable
//     (package invokable); it reports INITIALIZING, RUNNING and then
//     FINISHED, FAILED (with FailureInfo classified by jobmanager/failover;
//     panics are recovered and carry their stack) or CANCELED. Updates go
//     through one FIFO per job, one call at a time, so they never overtake
//     each other; an update failing maxReportAttempts times means the
//     JobMaster is lost. NOT_FOUND (unknown attempt) drops the update.
//   - JobMaster loss. A JobMaster silent for its heartbeat timeout, or a
//     DisconnectJobManager, cancels the job's tasks, frees its slots,
//     releases its partitions, reports slots to the ResourceManager and
//     forgets the connection; the next RequestSlot for the job connects
//     again. A connection is also closed when its job holds no slot and no
//     partition here any more.
//   - Partitions. BLOCKING partitions of finished tasks are recorded until
//     ReleasePartitions (there is no data plane yet; the table is what it
//     will serve).
//   - Shutdown. When Run's context ends, every task is cancelled, its final
//     state reported, the JobMasters and the ResourceManager are told
//     (DisconnectTaskManager, DisconnectTaskExecutor), all bounded by the
//     RPC timeout.
package taskmanager
