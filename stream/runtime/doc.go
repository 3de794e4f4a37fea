// Package runtime runs operator chains: the part of gofl's streaming runtime
// that a task executes, independent of where its input comes from and where
// its output goes.
//
// A task (one subtask of a JobGraph vertex) is a TaskSpec — operators in
// chain order, the head fed by the task's InputGates (or a Source polled by
// the task), each other operator called directly by the one before it — run
// by RunTask on one goroutine, like Flink's StreamTask with its mailbox:
// records, watermarks, processing-time timers and end of input are all
// handled on that goroutine, so operators need no locks.
//
// In-band events (Event) flow through exchanges: records, watermarks and
// end-of-partition. The task combines watermarks as Flink's
// StatusWatermarkValve does: per channel the maximum seen, across all
// channels of all inputs the minimum, ended channels excluded; the head sees
// the combined watermark whenever it increases. At the end of input pending
// processing-time timers fire, the watermark goes to MaxWatermark (all
// event-time timers fire), operators finish head first, and every writer
// ends its subpartitions with end-of-partition.
//
// The exchange is behind two small interfaces: InputGate (batches of events
// per channel through a Go channel) and ResultWriter (emit, flush, finish
// per subpartition). LocalGate, LocalWriter and BlockingResult implement
// them in-process; the network data plane implements them with serialized
// buffers and credit-based flow control. Partitioners decide the
// subpartition of a record: Forward, Rebalance, Broadcast and
// KeyGroupPartitioner (Flink's key groups: keyGroup = hash(key) mod
// maxParallelism, subtask = keyGroup × parallelism / maxParallelism, with a
// hash that is the same in every process).
//
// Failures: an error returned by an operator, or a panic in it, unwinds the
// task and RunTask returns an *OperatorError naming the operator (with the
// stack for a panic). Keyed operators keep state in a KeyedStateBackend (a
// map per key group) and timers in a TimerService; running aggregations use
// the typed KeyedValues, one map access per record.
//
// Checkpoints (TaskEnv.Control set; nil leaves everything above as it
// is): control messages are handled on the task goroutine between batches
// and polls. A trigger at a source (or a task whose channels all ended)
// snapshots every CheckpointedOperator of the chain, hands the snapshot to
// the CheckpointResponder and sends EventBarrier on every subpartition.
// Tasks with inputs align barriers: exactly once, a channel that delivered
// barrier n has its later events held in the task until every channel not
// ended delivered n; at least once nothing is held. A newer barrier or an
// EventCancelBarrier aborts an alignment (decline, cancel downstream). At
// the end of input (FLIP-147) the task finishes its operators, sends
// EventEndOfData, and ends its partitions only once a checkpoint it took
// after that completed, so sinks commit their last output. Stop-with-
// savepoint ends the sources' data with (terminate) or without (suspend)
// draining. Keyed state, timers and KeyedValues snapshot as sections per
// key group, so a restore at another parallelism reads only its key groups.
//
// State backends: KeyedStateBackend keeps state in maps ("hashmap") or,
// with TaskEnv.StateBackend Type "rocksdb" and Context.NewKeyedStateBackend,
// serialized in an embedded LSM (pebble) under the TaskManager's local
// directory, for state larger than memory. Its full snapshots have the
// hashmap format; incremental ones are a pebble checkpoint whose files
// (OperatorSnapshot.SharedFiles) the responder uploads to shared storage
// only once, described by a manifest section in every key group; a restore
// gets them back in OperatorRestore.SharedFiles.
//
// Accumulators: an operator may hand serialized lists to its task's
// accumulator results (Context.Accumulate, set by the cluster executor and
// nil locally), which travel with the task's FINISHED state to the
// JobMaster and into the job's execution result; Collect sinks return their
// records this way.
package runtime
