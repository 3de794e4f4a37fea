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
// it with mailbox.Call. Time is read and timers are set only through the
// injected clock (Config.Clock); a timer posts its work to the mailbox.
// Continuations check that the connection or registration they belong to
// is still current (rmConnection.gen, te.jobs[job] == jc, slot.allocSeq)
// and otherwise do nothing.
//
// # Calls to peers go through outboxes
//
// Every call to a peer goes through that peer's internal/outbox: FIFO, one
// call in flight, retried with jittered backoff until it succeeds, is
// answered with a final error, or its deadline passes. The ResourceManager
// gets one outbox per registration (RegisterTaskExecutor, SendSlotReport
// keyed "slot-report" so only the latest report waits, and
// DisconnectTaskExecutor); each JobMaster connection gets one
// (RegisterTaskManager, OfferSlots, UpdateTaskExecutionState,
// ReportPartitionsLost, DisconnectTaskManager). So a task's states never
// overtake each other, and a disconnect follows what was sent before it.
//
// # Lifecycle
//
//   - Registration. RegisterTaskExecutor is retried by the outbox until the
//     ResourceManager answers. FAILED_PRECONDITION (protocol mismatch) and
//     ALREADY_EXISTS (resource ID taken) are fatal: Run returns an error
//     naming the cause; other refusals register again after a backoff
//     pause (internal/backoff), as does a ResourceManager that forgot this
//     TaskManager (a slot report answered NOT_FOUND). After registering, a
//     slot report follows; heartbeats (HeartbeatFromResourceManager) are
//     answered with the slot report, and when they stop for the heartbeat
//     timeout the TaskExecutor registers again, keeping slots and tasks.
//   - Slots. RequestSlot allocates a free slot (idempotent for the same
//     allocation; RESOURCE_EXHAUSTED if another allocation holds it), then
//     registers at the job's JobMaster if not yet connected and offers the
//     slot. Accepted slots become active; rejected ones, and ones not
//     accepted within Config.SlotTimeout, are freed and reported. FreeSlot
//     cancels the slot's tasks; the slot is free once they ended.
//   - Leader loss (high availability). On a new ResourceManager leader
//     session the jobs of the old leader's JobMasters lose their tasks but
//     keep their slots, allocated and inactive, for Config.SlotTimeout: they
//     are reported allocated and offered to the job's JobMaster at the new
//     leader (retried while it refuses), and freed if none took them.
//   - Rejections are paced. A JobMaster that rejects the registration or
//     offered slots starts a per-job backoff that outlives the connection:
//     the next registration or offer for the job waits for it. A
//     ResourceManager that re-requests the freed slot at once therefore
//     meets a slot waiting for its JobMaster, not a hot loop of reconnects.
//   - Tasks. SubmitTask needs an active slot of the job holding the TDD's
//     allocation. The TaskRunner runs the task; it reports INITIALIZING,
//     RUNNING and then FINISHED, FAILED (with FailureInfo classified by
//     jobmanager/failover; panics are recovered and carry their stack) or
//     CANCELED. A rejected update (NOT_FOUND, INVALID_ARGUMENT,
//     FAILED_PRECONDITION) is dropped; one not delivered within the report
//     deadline (Config.ReportDeadline, default the JobMaster's heartbeat
//     timeout) means the JobMaster is lost.
//   - Cancels. CancelTask cancels the attempt and leaves a tombstone in its
//     job's connection, so a SubmitTask of that attempt arriving after its
//     cancel is refused (FAILED_PRECONDITION) and never runs. Tombstones
//     expire after Config.CancelTombstoneTTL, are bounded per job and go
//     with the connection. A task ends CANCELED only if its JobMaster asked
//     for it (CancelTask, FreeSlot); one the TaskManager stops on its own
//     ends FAILED with an environment failure, which the JobMaster
//     restarts.
//   - JobMaster loss. A JobMaster silent for its heartbeat timeout, a report
//     not delivered in time, or a DisconnectJobManager cancels the job's
//     tasks, frees its slots, releases its partitions and runner, reports
//     slots to the ResourceManager and forgets the connection; the next
//     RequestSlot for the job connects again. A connection is also closed
//     when its job holds no slot and no partition here any more.
//   - Heartbeats. A JobMaster's heartbeat is answered with the slot report,
//     the job's running attempts with their I/O metrics, and the job's
//     partitions held here, so the JobMaster reconciles what it expects
//     with what is.
//   - Partitions. BLOCKING partitions of finished tasks are recorded, with
//     the job runner holding their data, until ReleasePartitions. When a
//     job runner dies (crashed, or killed for not heartbeating), its
//     partitions are dropped and ReportPartitionsLost tells the JobMaster.
//   - Shutdown. When Run's context ends (SIGTERM), every task is stopped
//     and reported FAILED ("TaskManager <id> is shutting down"), the
//     JobMasters and the ResourceManager are told (DisconnectTaskManager,
//     DisconnectTaskExecutor), all bounded by the RPC timeout.
//
// # Job runners
//
// Tasks of a job binary run in the job's runner process (package runner),
// one per job. The job's data port is opened when the job first needs an
// address (its JobMaster registration) and every runner of the job
// inherits it, so the address the JobMaster knows is where the job's
// runner listens, across runner restarts; releasing the job (its
// connection closed) stops the runner and closes the port at once, and a
// later connection gets a new port and a new runner. Runners heartbeat to
// the TaskManager; one silent for Config.HeartbeatTimeout is killed.
//
// # Checkpoints
//
// TriggerCheckpoint and NotifyCheckpoint reach a task running here (else
// NOT_FOUND) through the CheckpointingTask its TaskRunner returned: for a
// job binary, in order per task, to the runner's JobRunnerService, whose
// executor hands them to the task's Control channel. The runner reports
// acknowledgements and declines on one WatchCheckpoints stream per runner;
// the TaskExecutor relays each, never coalesced, through the job's
// JobMaster outbox (TaskRunnerHost.CheckpointReport). Built-in tasks and
// runners of an SDK without checkpoints (UNIMPLEMENTED) have their
// triggers declined with the reason.
//
// # Seams for the fault simulator
//
// A TaskExecutor can run without network, goroutines or wall time:
// Config.NoRPCServer (no listener; the simulator calls Service()),
// Config.DialResourceManager and Config.DialJobMaster (in-memory peers),
// Config.Clock, Config.Executor (the simulator runs every turn and every
// outgoing call), Config.Rand (IDs and jitter from a seed) and
// Config.TaskRunner, which decides how tasks run: the TaskExecutor starts
// a task with TaskRunner.StartTask and learns its states and its end
// through the TaskContext callbacks (posted to its mailbox), cancels it
// with RunningTask.Cancel, asks TaskRunner.DataAddress for the job's data
// address, and hears of a dead runner through TaskRunnerHost.RunnerLost.
// The default runs built-in invokables as goroutines and job binaries in
// runner processes; a simulator plugs in simulated tasks. Start only posts
// the first turn; Run is Start plus the blocking loop and the cleanup.
package taskmanager
