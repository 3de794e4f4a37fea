package runtime

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rs/zerolog"
)

// State backend types (Flink's state.backend.type).
const (
	// HashMapStateBackend keeps keyed state as objects in memory.
	HashMapStateBackend = "hashmap"
	// RocksDBStateBackend keeps keyed state serialized in an embedded LSM
	// (pebble) on the TaskManager's local disk, for state larger than
	// memory; "lsm" is accepted as an alias.
	RocksDBStateBackend = "rocksdb"
)

// ErrUnknownStateBackend is a StateBackendOptions.Type that is none of
// "hashmap", "rocksdb" and "lsm".
var ErrUnknownStateBackend = errors.New("runtime: unknown state backend type")

// ErrSharedFileMissing is an incremental restore whose manifest names a
// shared file that OperatorRestore.SharedFiles does not provide.
var ErrSharedFileMissing = errors.New("runtime: shared state file missing from the restore")

// StateBackendOptions choose and configure the engine of a
// KeyedStateBackend. The zero value is the in-memory hashmap backend.
type StateBackendOptions struct {
	// Type is "hashmap" (or empty), "rocksdb" or "lsm".
	Type string
	// LocalDir is the TaskManager's local working directory, under which
	// the LSM engine creates one directory per backend (os.TempDir when
	// empty). Close removes it.
	LocalDir string
	// Incremental makes checkpoints (not savepoints) of the LSM engine
	// incremental: the DB's files are described in
	// OperatorSnapshot.SharedFiles and only new ones are uploaded.
	Incremental bool
	// MemTableSize is the LSM engine's memtable size in bytes (4 MiB when
	// 0): state beyond it is flushed to disk.
	MemTableSize int
	// OperatorID and SubtaskIndex name the shared files; Parallelism with
	// SubtaskIndex gives the key-group range (all key groups when 0).
	// Context.NewKeyedStateBackend sets them.
	OperatorID   string
	SubtaskIndex int
	Parallelism  int
	// Logger receives the LSM engine's messages (none when nil).
	Logger *zerolog.Logger
}

// SharedStateFile is one file of an incremental snapshot (an entry of
// Flink's IncrementalRemoteKeyedStateHandle). The CheckpointResponder
// uploads a file whose Uploaded is false to "<checkpoints
// dir>/<job-id>/shared/<Name>" and lists every file of the snapshot in
// the operator's handle; a restore downloads them and passes them back in
// OperatorRestore.SharedFiles with LocalPath set.
type SharedStateFile struct {
	// Name is unique, and stable: the same immutable file has the same
	// name in every checkpoint that contains it.
	Name string
	// LocalPath is where the file is on local disk; it stays there until
	// the checkpoint completed or was aborted (or the backend closed).
	LocalPath string
	Size      int64
	// Uploaded: the file was part of a checkpoint that completed before, so
	// it is in shared storage already and must not be uploaded again.
	Uploaded bool
}

// NewKeyedStateBackendWithOptions returns an empty backend of the engine
// opts.Type for keys hashed into maxParallelism key groups. The LSM engine
// opens its DB here; Close releases it.
func NewKeyedStateBackendWithOptions(maxParallelism int, opts StateBackendOptions) (*KeyedStateBackend, error) {
	b := NewKeyedStateBackend(maxParallelism)
	switch strings.ToLower(opts.Type) {
	case "", HashMapStateBackend:
		return b, nil
	case RocksDBStateBackend, "lsm":
	default:
		return nil, fmt.Errorf("%w: %q (want hashmap, rocksdb or lsm)", ErrUnknownStateBackend, opts.Type)
	}
	e, err := newLSMEngine(maxParallelism, opts)
	if err != nil {
		return nil, err
	}
	b.lsm = e
	return b, nil
}

// NewKeyedStateBackend returns a backend of the task's configured engine
// (TaskEnv.StateBackend; hashmap by default) for this operator subtask.
// The operator closes it in its Close.
func (c *Context) NewKeyedStateBackend() (*KeyedStateBackend, error) {
	var opts StateBackendOptions
	if c.task != nil {
		opts = c.task.env.StateBackend
	}
	opts.OperatorID, opts.SubtaskIndex, opts.Parallelism = c.OperatorID, c.SubtaskIndex, c.Parallelism
	return NewKeyedStateBackendWithOptions(c.MaxParallelism, opts)
}

// Close releases the backend's resources: for the LSM engine it closes the
// DB (stopping pebble's goroutines) and removes its local files, including
// those of checkpoints not completed yet. The operator calls it from its
// Close; idempotent; a no-op for the hashmap backend.
func (b *KeyedStateBackend) Close() error {
	if b.lsm == nil {
		return nil
	}
	return b.lsm.close()
}

// NotifyCheckpointComplete tells the backend that checkpoint id completed,
// so the files of its incremental snapshot count as uploaded for later
// snapshots and the local copies of checkpoints up to id go. The operator
// forwards its CheckpointListener call here. No-op for the hashmap backend.
func (b *KeyedStateBackend) NotifyCheckpointComplete(id int64) {
	if b.lsm != nil {
		b.lsm.notifyComplete(id)
	}
}

// NotifyCheckpointAborted drops the local files of checkpoint id's
// incremental snapshot. No-op for the hashmap backend.
func (b *KeyedStateBackend) NotifyCheckpointAborted(id int64) {
	if b.lsm != nil {
		b.lsm.notifyAborted(id)
	}
}

// Engine names the backend's engine: "hashmap" or "rocksdb".
// KeepsInPlaceUpdates reports whether a value taken with GetForUpdate and
// changed in place stays changed without a Put (the hashmap engine); the
// rocksdb engine decodes a fresh value on every Get.
func (b *KeyedStateBackend) KeepsInPlaceUpdates() bool { return b.lsm == nil }

func (b *KeyedStateBackend) Engine() string {
	if b.lsm != nil {
		return RocksDBStateBackend
	}
	return HashMapStateBackend
}

// pebbleLogger sends pebble's messages to the backend's logger.
type pebbleLogger struct{ log zerolog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug().Str("component", "pebble").Msgf(format, args...)
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error().Str("component", "pebble").Msgf(format, args...)
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	l.log.Error().Str("component", "pebble").Msgf(format, args...)
	panic(fmt.Sprintf("pebble: "+format, args...))
}
