// Package failover decides whether, and after what delay, a failed job may be
// restarted. It is the Go counterpart of the first two steps of Flink's
// failure handling (see "Execution model" in DESIGN.md):
//
//  1. Classification. A failure is classified into a [FailureType] by
//     [Classify]: non-recoverable, partition-data-missing, environment or
//     recoverable. Task code and the runtime mark errors with
//     [NonRecoverable], [EnvironmentError] and [PartitionNotFoundError]; the
//     marks survive wrapping with fmt.Errorf("...: %w", err) and errors.Join,
//     and are tested with errors.Is / errors.As.
//
//  2. Restart backoff. A [RestartBackoffTimeStrategy] is told about every
//     failure and answers two questions: may the job restart at all
//     ([RestartBackoffTimeStrategy.CanRestart]), and how long should the
//     scheduler wait first ([RestartBackoffTimeStrategy.BackoffTime]). The
//     strategies are none, fixed-delay, failure-rate and exponential-delay,
//     with Flink's semantics and defaults; [NewRestartBackoffTimeStrategy]
//     builds one from a [RestartConfig] the way Flink's
//     RestartBackoffTimeStrategyFactoryLoader does.
//
// Choosing which tasks to restart (restart-all, restart-pipelined-region) is
// the failover strategy's job and lives elsewhere.
//
// # Purity
//
// The package is pure, like the scheduler state machine that drives it (in
// the style of etcd's raft package): it starts no goroutines, performs no I/O
// and never reads a clock. Time is an input: every event carries "now", a
// logical monotonic [time.Duration] measured from an arbitrary epoch chosen
// by the driver, and callers must pass non-decreasing values. The only source
// of randomness is the jitter function injected into the exponential-delay
// strategy, so a test that injects a fixed function gets fully reproducible
// backoffs.
//
// Strategies are not safe for concurrent use. They are owned by the
// scheduler and are only ever called from its single goroutine.
//
// # Driving a strategy
//
// For each failure the scheduler does, in order:
//
//	t := failover.Classify(err)
//	if t == failover.FailureNonRecoverable { fail the job }
//	strategy.NotifyFailure(now, err)
//	if !strategy.CanRestart() { fail the job }
//	set a timer for strategy.BackoffTime(), then restart
//
// Queries (CanRestart, BackoffTime) answer relative to the "now" of the most
// recent NotifyFailure, which is the moment the scheduler asks them in
// Flink too.
package failover
