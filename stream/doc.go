// Package stream is gofl's DataStream SDK: users write jobs in Go with
// typed streams, and gofl translates them into a JobGraph and runs them.
//
// # Building a job
//
// An Environment collects transformations. Sources (FromCollection,
// Generate, TextFile) return a DataStream[T]; functions transform it (Map,
// FlatMap, Filter, Process, Union, KeyBy, Window, Join, Aggregate,
// KeyedProcess; package-level because Go methods cannot add type
// parameters); Connect pairs two keyed streams for a two-input operator
// (CoProcess with keyed state and timers shared by both inputs, CoMap,
// CoFlatMap), IntervalJoin joins them on event-time intervals; sinks end it
// (Print, WriteAsText, Collect). Setters on a
// stream configure the operator that produced it: Name, Uid,
// SetParallelism, SetMaxParallelism, SlotSharingGroup, DisableChaining,
// StartNewChain. Rebalance, Broadcast, Forward and KeyBy choose how records
// reach the next operator; with none, records go forward when both sides
// have the same parallelism and round-robin otherwise, as in Flink.
//
// Record values are shared by chained operators and must not be mutated
// after they are emitted.
//
// # Keys, state and time
//
// KeyBy hashes a key into one of maxParallelism key groups (Flink's rule:
// keyGroup = hash(key) mod maxParallelism, subtask = keyGroup × parallelism
// / maxParallelism) with a hash that is the same in every process. Keyed
// operators keep state per key group in memory: running Reduce and
// Aggregate (one result per update in Streaming mode, only the final one
// per key in Batch mode), KeyedProcess with ValueState and event- or
// processing-time timers, and windows.
//
// Event time comes from AssignTimestampsAndWatermarks. Watermarks flow
// in-band through operators and exchanges; an operator's watermark is the
// minimum over its input channels; at the end of a bounded input it becomes
// +inf, so every event-time window and timer fires. Windows (tumbling and
// sliding, on event or processing time) fire when the watermark or the clock
// passes their end; a record whose windows have all fired already (it is
// behind the watermark) is dropped, there is no allowed lateness yet.
// Pending processing-time timers fire at the end of input.
//
// More keyed state types follow Flink's: ListState (Get, Add, AddAll,
// Update, Clear), MapState (Get, Put, PutAll, Remove, Contains, Entries,
// Keys, Values, IsEmpty, Clear), ReducingState and AggregatingState (Get,
// Add, Clear). Each is declared once with a name (NewListState[T]("l"),
// ...) and takes WithTTL(StateTtlConfig{TTL, UpdateType, Visibility}) to
// expire values in processing time: OnCreateAndWrite or OnReadAndWrite
// renew a value, NeverReturnExpired or ReturnExpiredIfNotCleanedUp say
// whether an expired one is still read; list elements and map entries
// expire one by one.
//
// # Checkpoints
//
// With checkpointing on, every stateful operator snapshots its state when
// a checkpoint barrier passes and restores it, at the same or another
// parallelism, after a failure or from a savepoint: keyed state and timers
// by key group (running Reduce and Aggregate, KeyedProcess, CoProcess,
// windows of both time kinds, Join and IntervalJoin), sources their
// positions (FromCollection, Generate and TextFile resume exactly where
// the checkpoint was, an unbounded Generate with no index missed or
// repeated; on a scale-up beyond the number of position splits, the extra
// subtasks idle). State is serialized with the codec of its Go type
// (stream/codec); the type is recorded, so restoring a state declared
// with another type, kind or TTL fails the operator with
// runtime.ErrIncompatibleState naming it. Give stateful operators a Uid so
// a changed job still finds its state.
//
// Non-keyed functions keep operator state with ProcessWithState and a
// CheckpointedProcessFunction (Flink's CheckpointedFunction): in Open they
// get lists from the OperatorStateStore, ListStateOf (split over the
// subtasks on restore) or UnionListStateOf (every subtask gets all), fill
// them in SnapshotState and read them back in Open when IsRestored.
//
// The broadcast state pattern: BroadcastWithState(s, NewMapStateDescriptor
// [K, V]("rules")) sends s to every subtask of the operator
// ConnectBroadcast (any stream) or ConnectKeyedBroadcast (a keyed stream,
// with keyed state and timers) builds; the broadcast side reads and writes
// the BroadcastState, the other side reads it only. Each subtask holds the
// same copy, and a restore gives every subtask one of them.
//
// Sinks are exactly once through two-phase commit: AddTwoPhaseCommitSink
// takes a TwoPhaseCommitSink (BeginTransaction, Write, PreCommit when the
// checkpoint is taken, Commit once it completed, Abort), keeps the
// pre-committed transactions in its state and commits them again on
// restore. WriteAsText is one with checkpointing: hidden in-progress and
// pending part files, renamed to "part-<subtask>-<checkpoint>" on commit.
// Collect keeps its records in its state.
//
// # Translation
//
// Plan turns the stream graph into a JobGraph with Flink's operator
// chaining: an operator joins its input's chain when that input is its only
// one, the edge is forward, parallelism, max parallelism and slot sharing
// group are equal and neither side disables chaining. A chain is one vertex
// with invokable "stream" whose Operators list the chain in order (Kind is
// the operator kind, Config its parameters as JSON) and whose Config
// describes the chain's wiring. Edges are POINTWISE for forward and
// ALL_TO_ALL otherwise, PIPELINED in Streaming mode and BLOCKING in Batch
// mode. Operator IDs hash the uid, or the operator's position, kind, name
// and inputs; vertex IDs hash their operators' IDs; Fingerprint hashes the
// canonical graph. So re-running a deterministic builder yields the same
// graph, and the runner, which re-runs a builder registered with
// RegisterJob to get the closures back (PlanJob keeps one Plan per job and
// arguments per process), detects a non-deterministic one with
// CheckFingerprint.
//
// # Execution
//
// Execute runs the job in-process (like Flink's MiniCluster): every subtask
// of every vertex is a goroutine running its chain with package runtime;
// exchanges are bounded Go channels (BLOCKING ones are held in memory until
// their producers finished). A failing user function (an error or a panic)
// fails Execute with an error naming the operator; cancelling the context
// stops every goroutine.
//
// On a cluster, a job binary's main calls Main after registering its jobs
// with RegisterJob; `gofl run` plans it (GOFL_ROLE=plan), uploads and submits
// it, and TaskManagers start it as the job's runner, which re-plans the job
// and runs its tasks with the network data plane (taskmanager/network).
// Records cross exchanges encoded by the codec of their DataStream[T]
// (stream/codec's For[T]); Plan fails for an exchange whose type has none.
//
// A program can also drive its registered jobs itself: ExecuteOn runs an
// environment from BuildJob on a session cluster with the program as its
// own job binary (it calls ServeRole first), waits for the job and fills
// its Collect sinks from the job's execution result, where each sink
// subtask's records arrive as an accumulator (see runtime.Context's
// Accumulate); CollectedValues reads them by sink uid or name.
package stream
