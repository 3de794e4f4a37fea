package conf

import (
	"fmt"
	"time"
)

// Values of CheckpointingMode.
const (
	CheckpointingExactlyOnce = "EXACTLY_ONCE"
	CheckpointingAtLeastOnce = "AT_LEAST_ONCE"
)

// Values of ExternalizedCheckpointRetention (Flink's
// ExternalizedCheckpointRetention).
const (
	NoExternalizedCheckpoints = "NO_EXTERNALIZED_CHECKPOINTS"
	DeleteOnCancellation      = "DELETE_ON_CANCELLATION"
	RetainOnCancellation      = "RETAIN_ON_CANCELLATION"
)

// Values of StateBackendType.
const (
	StateBackendHashMap = "hashmap"
	StateBackendRocksDB = "rocksdb"
	StateBackendLSM     = "lsm"
)

var (
	// CheckpointsDir is where checkpoint data and metadata go.
	CheckpointsDir = StringOption("state.checkpoints.dir", "",
		"Directory URI (file:// or hdfs://) under which checkpoint data and metadata are written, as <dir>/<job-id>/chk-<n>; required when checkpointing is enabled.")
	// CheckpointingInterval is the time between checkpoints; 0 disables checkpointing.
	CheckpointingInterval = DurationOption("execution.checkpointing.interval", 0,
		"Time between the starts of two checkpoints; 0 disables checkpointing, otherwise at least 10 ms.")
	// CheckpointingTimeout aborts a checkpoint that has not completed in time.
	CheckpointingTimeout = DurationOption("execution.checkpointing.timeout", 10*time.Minute,
		"Time after which a checkpoint that has not completed is aborted.").WithCheck(positive)
	// CheckpointingMinPause is the least time between the end of one
	// checkpoint and the start of the next.
	CheckpointingMinPause = DurationOption("execution.checkpointing.min-pause", 0,
		"Minimum time between the end of a checkpoint and the start of the next; with a pause above 0 at most one checkpoint is in progress.").
		WithCheck(nonNegative)
	// CheckpointingMaxConcurrent bounds the checkpoints in progress at once.
	CheckpointingMaxConcurrent = IntOption("execution.checkpointing.max-concurrent-checkpoints", 1,
		"Maximum number of checkpoints in progress at the same time.").WithCheck(atLeast(1))
	// CheckpointingTolerableFailures is how many consecutive checkpoint
	// failures the job tolerates before it fails.
	CheckpointingTolerableFailures = IntOption("execution.checkpointing.tolerable-failed-checkpoints", 0,
		"Number of consecutive checkpoint failures (timeouts, declines, metadata write errors) tolerated; one more fails the job.").
		WithCheck(atLeast(0))
	// CheckpointingMode picks exactly-once (aligned barriers) or at-least-once.
	CheckpointingMode = EnumOption("execution.checkpointing.mode", CheckpointingExactlyOnce,
		[]string{CheckpointingExactlyOnce, CheckpointingAtLeastOnce},
		"Checkpointing guarantee: EXACTLY_ONCE aligns barriers, AT_LEAST_ONCE does not block channels.")
	// CheckpointingUnaligned enables unaligned checkpoints.
	CheckpointingUnaligned = BoolOption("execution.checkpointing.unaligned.enabled", false,
		"Unaligned checkpoints: barriers overtake in-flight data, which is stored with the checkpoint (EXACTLY_ONCE only).")
	// CheckpointingAlignedTimeout switches an aligned checkpoint to unaligned after this long.
	CheckpointingAlignedTimeout = DurationOption("execution.checkpointing.aligned-checkpoint-timeout", 0,
		"With unaligned checkpoints enabled, a checkpoint starts aligned and switches to unaligned after this long; 0 means unaligned from the start.").
		WithCheck(nonNegative)
	// ExternalizedCheckpointRetention says what happens to retained
	// checkpoints when the job ends.
	ExternalizedCheckpointRetention = EnumOption("execution.checkpointing.externalized-checkpoint-retention", NoExternalizedCheckpoints,
		[]string{NoExternalizedCheckpoints, DeleteOnCancellation, RetainOnCancellation},
		"What happens to completed checkpoints when the job ends: NO_EXTERNALIZED_CHECKPOINTS deletes them at any terminal state, DELETE_ON_CANCELLATION when the job is cancelled, RETAIN_ON_CANCELLATION keeps them.")
	// CheckpointsNumRetained is how many completed checkpoints are kept.
	CheckpointsNumRetained = IntOption("state.checkpoints.num-retained", 1,
		"Number of completed checkpoints retained; older ones are deleted when a newer one completes (savepoints never are).").
		WithCheck(atLeast(1))
	// SavepointsDir is the default target directory of savepoints.
	SavepointsDir = StringOption("state.savepoints.dir", "",
		"Default directory URI (file:// or hdfs://) for savepoints when a savepoint request names none.")
	// StateBackendType picks the state backend.
	StateBackendType = EnumOption("state.backend.type", StateBackendHashMap,
		[]string{StateBackendHashMap, StateBackendRocksDB, StateBackendLSM},
		"State backend: hashmap keeps keyed state as objects in memory and writes full snapshots; rocksdb (alias lsm) keeps it serialized in an embedded LSM (pebble) on the TaskManager's local disk, for state larger than memory.")
	// StateBackendIncremental makes the rocksdb backend's checkpoints
	// incremental.
	StateBackendIncremental = BoolOption("state.backend.incremental", false,
		"With state.backend.type rocksdb: checkpoints upload only the LSM files that are new since the last completed checkpoint, into <state.checkpoints.dir>/<job-id>/shared; savepoints stay full. No effect with hashmap.")
	// SavepointPath is the savepoint or retained checkpoint a job restores from.
	SavepointPath = StringOption("execution.savepoint.path", "",
		"Savepoint or retained checkpoint directory (or its _metadata file) the job restores its state from when it starts.")
	// SavepointIgnoreUnclaimedState allows a restore that leaves savepoint
	// state of vanished operators unused.
	SavepointIgnoreUnclaimedState = BoolOption("execution.savepoint.ignore-unclaimed-state", false,
		"Allow restoring from a savepoint that holds state of operators the job no longer has (--allowNonRestoredState).")
)

func nonNegative(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("must not be negative")
	}
	return nil
}

// checkpointingProblems are the cross-option rules of checkpointing.
func checkpointingProblems(c *Configuration, report func(key, msg string)) {
	if ci := CheckpointingInterval.Get(c); ci > 0 && CheckpointsDir.Get(c) == "" {
		report(CheckpointsDir.Key(), fmt.Sprintf("must be set when %s is above 0 (%s): checkpoints need a directory",
			CheckpointingInterval.Key(), FormatDuration(ci)))
	}
	if CheckpointingUnaligned.Get(c) && CheckpointingMode.Get(c) != CheckpointingExactlyOnce {
		report(CheckpointingUnaligned.Key(), fmt.Sprintf("unaligned checkpoints need %s %s", CheckpointingMode.Key(), CheckpointingExactlyOnce))
	}
}
