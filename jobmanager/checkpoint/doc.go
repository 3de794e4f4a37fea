// Package checkpoint is the JobMaster's CheckpointCoordinator, written like
// jobmanager/scheduler as a pure state machine: events in through Step at a
// logical time, a Ready of actions out, no goroutines, no clock, no I/O.
//
// The driver (the JobMaster) feeds it the tasks' states (TasksChanged), the
// tasks' acknowledgements and declines, savepoint requests, failovers, the
// outcome of the metadata writes it asked for, and Ticks at Ready.WakeAt.
// It answers with checkpoints to trigger at the trigger tasks, _metadata
// files to write, completions and aborts to notify, directories to discard,
// savepoint results and, when more checkpoints failed in a row than
// execution.checkpointing.tolerable-failed-checkpoints allows, a job
// failure. Flink's rules apply: interval, timeout, min-pause,
// max-concurrent-checkpoints, num-retained (subsumed checkpoints are
// deleted, savepoints never), ids strictly increasing and continuing after
// the restored checkpoint's.
//
// The package also holds the pure restore assignment (TaskRestoreFor,
// ValidateRestore) and the _metadata file format (WriteMetadata,
// ReadMetadata), which do I/O through storage.FileSystem and are called off
// the JobMaster's goroutine.
package checkpoint
