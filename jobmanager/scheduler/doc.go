// Package scheduler is the JobManager's scheduling core for one job, written
// as a pure state machine in the style of etcd's raft package: no
// goroutines, no clock, no I/O.
//
// The driver (the JobMaster) feeds events with Step at a logical time:
// scheduling started, slots offered, task states reported, TaskManagers lost,
// timers due (Tick). After each Step it takes a Ready: job status changes,
// the slot requirement to declare to the ResourceManager, replies to slot
// offers, TaskDeploymentDescriptors to submit, tasks to cancel, partitions
// and slots to release, and the time of the next Tick. Its outcome comes
// back as further events.
//
// Inside, the pieces follow Flink's DefaultScheduler:
//   - a SchedulingStrategy (pipelined-region, eager, lazy-from-sources,
//     lazy-from-sources with batch slot requests) picks what to schedule;
//   - the deployer moves a bulk to SCHEDULED, allocates its slots through the
//     slot allocator (slot-sharing or simple) and the declarative slot pool
//     with its slot selection strategy (locality-preferring,
//     evenly-spread-out, previous-allocation), and deploys the bulk in
//     topological order once every slot is there;
//   - failures are classified (jobmanager/failover), a FailoverStrategy
//     (restart-all or restart-pipelined-region) picks what to restart, and a
//     restart backoff strategy decides whether and when;
//   - the partition tracker releases BLOCKING partitions once consumed.
//
// Everything is linear in vertices plus partitions, so a 10,000 × 10,000
// ALL_TO_ALL job schedules, deploys and fails over in milliseconds.
package scheduler
