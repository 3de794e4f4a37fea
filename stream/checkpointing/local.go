package checkpointing

// Task-local recovery (Flink's TaskLocalStateStore, state.backend.local-
// recovery): the TaskManager keeps a copy of the state files its subtasks
// wrote for the latest completed checkpoint on its own disk, so a task
// restarted there reads them locally instead of from checkpoint storage.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/stream/runtime"
)

// chkPrefix names a checkpoint's directory in a subtask's local state.
const chkPrefix = "chk-"

// TaskLocalStateStore is one subtask's local state directory:
// <root>/<vertexID>-<subtask>/chk-<n>/<state file name>. The copies are an
// optimisation only: a copy that is missing, truncated or corrupt is
// ignored and the file is read from checkpoint storage. Safe for
// concurrent use (the Responder's write goroutines, the runner's
// notifications and the restore).
type TaskLocalStateStore struct {
	dir     string
	subtask int
	log     zerolog.Logger

	mu sync.Mutex
}

// NewTaskLocalStateStore returns the local state of subtask of vertexID
// under root (the job's local state directory on this TaskManager). An
// empty root means no local recovery: nil, which every method accepts.
func NewTaskLocalStateStore(root, vertexID string, subtask int, log zerolog.Logger) *TaskLocalStateStore {
	if root == "" {
		return nil
	}
	return &TaskLocalStateStore{dir: filepath.Join(root, fmt.Sprintf("%s-%d", vertexID, subtask)), subtask: subtask, log: log}
}

// Dir is the subtask's local state directory.
func (s *TaskLocalStateStore) Dir() string { return s.dir }

func (s *TaskLocalStateStore) chkDir(id int64) string {
	return filepath.Join(s.dir, chkPrefix+strconv.FormatInt(id, 10))
}

// localName is the local copy's name of a handle's file: only plain names
// (relative to the checkpoint directory) have one.
func localName(p string) (string, bool) {
	if p == "" || strings.Contains(p, "/") || p == "." || p == ".." {
		return "", false
	}
	return p, true
}

// Create starts the local copy of checkpoint id's state file name, written
// as the file streams to checkpoint storage (a temporary name, renamed by
// Commit; no fsync: a torn copy fails its checksums and is not used). A nil
// store returns nil. Blocking on the local disk.
func (s *TaskLocalStateStore) Create(id int64, name string) (*LocalCopy, error) {
	if s == nil {
		return nil, nil
	}
	n, ok := localName(name)
	if !ok {
		return nil, fmt.Errorf("checkpointing: local copy of %q: not a plain file name", name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	dir := s.chkDir(id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("checkpointing: local state: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+n+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("checkpointing: local state: %w", err)
	}
	return &LocalCopy{f: f, w: bufio.NewWriterSize(f, 1<<20), final: filepath.Join(dir, n)}, nil
}

// LocalCopy is a local copy being written. Write never fails (the first
// error is kept for Commit), so a failing local disk never fails the
// checkpoint's own write.
type LocalCopy struct {
	f     *os.File
	w     *bufio.Writer
	final string
	err   error
}

// Write implements io.Writer; it always reports success.
func (c *LocalCopy) Write(p []byte) (int, error) {
	if c.err == nil {
		_, c.err = c.w.Write(p)
	}
	return len(p), nil
}

// Commit puts the copy in place, or removes it and returns why it failed.
func (c *LocalCopy) Commit() error {
	err := c.err
	if err == nil {
		err = c.w.Flush()
	}
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(c.f.Name(), c.final)
	}
	if err != nil {
		os.Remove(c.f.Name())
		return fmt.Errorf("checkpointing: local state: %w", err)
	}
	return nil
}

// Discard removes the copy.
func (c *LocalCopy) Discard() {
	c.f.Close()
	os.Remove(c.f.Name())
}

// ConfirmCheckpoint is NotifyCheckpointComplete(id): checkpoint id is now
// the one a restart restores, so the copies of older checkpoints go.
// Newer ones (pending) stay. Idempotent; blocking on the local disk.
func (s *TaskLocalStateStore) ConfirmCheckpoint(id int64) {
	s.prune(func(n int64) bool { return n < id })
}

// AbortCheckpoint is NotifyCheckpointAborted(id): its copies go.
func (s *TaskLocalStateStore) AbortCheckpoint(id int64) {
	s.prune(func(n int64) bool { return n == id })
}

func (s *TaskLocalStateStore) prune(drop func(int64) bool) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return // nothing stored yet
	}
	for _, e := range ents {
		n, err := strconv.ParseInt(strings.TrimPrefix(e.Name(), chkPrefix), 10, 64)
		if err != nil || !strings.HasPrefix(e.Name(), chkPrefix) || !drop(n) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.dir, e.Name())); err != nil {
			s.log.Warn().Err(err).Int64("checkpoint_id", n).Msg("deleting a subsumed local state copy")
		}
	}
}

// open returns the local copy of a file of checkpoint id if there is one
// of the size the handle gives.
func (s *TaskLocalStateStore) open(id int64, f *pb.StateFile) (*os.File, string, error) {
	n, ok := localName(f.GetPath())
	if !ok {
		return nil, "", os.ErrNotExist
	}
	p := filepath.Join(s.chkDir(id), n)
	file, err := os.Open(p)
	if err != nil {
		return nil, p, err
	}
	info, err := file.Stat()
	if err == nil && f.Size > 0 && info.Size() != f.Size {
		err = fmt.Errorf("%w: local copy has %d bytes, the checkpoint's file %d", ErrCorrupt, info.Size(), f.Size)
	}
	if err != nil {
		file.Close()
		return nil, p, err
	}
	return file, p, nil
}

// RestoreStats says where a restore read its state files from.
type RestoreStats struct {
	// LocalFiles were read from the local copy, RemoteFiles from checkpoint
	// storage; Fallbacks of the remote ones had a local copy that was
	// unusable (wrong size, corrupt). Inline state counts as neither.
	LocalFiles, RemoteFiles, Fallbacks int
	LocalBytes, RemoteBytes            int64
	Duration                           time.Duration
}

// Restore is the package's Restore reading, for the files this subtask
// wrote itself at the same parallelism, the local copy when one exists and
// is intact; any other file, and a copy that fails (missing, wrong size,
// bad checksum), is read from checkpoint storage. A nil store restores
// from checkpoint storage only.
func (s *TaskLocalStateStore) Restore(ctx context.Context, fss *FileSystems, tr *pb.TaskRestore, subtask, parallelism, maxParallelism int) (*runtime.TaskRestore, RestoreStats, error) {
	start := time.Now()
	var st RestoreStats
	out, err := restore(ctx, fss, s, &st, tr, subtask, parallelism, maxParallelism)
	st.Duration = time.Since(start)
	return out, st, err
}

// readLocal reads fr from its local copy if it may have one; false means
// the caller reads it remotely (a failure is logged, not returned).
func (s *TaskLocalStateStore) readLocal(rd *reader, fr *fileReads) bool {
	if s == nil || fr.inline != nil || rd.checkpointID <= 0 || int(fr.subtask) != s.subtask || int(fr.subtask) != rd.subtask ||
		int(fr.parallelism) != rd.parallelism {
		return false
	}
	file, p, err := s.open(rd.checkpointID, fr.file)
	if err != nil {
		if !os.IsNotExist(err) {
			s.log.Warn().Err(err).Str("local", p).Str("remote", fr.uri).Msg("local state copy unusable; reading checkpoint storage")
			rd.stats.Fallbacks++
		} else {
			s.log.Debug().Str("remote", fr.uri).Msg("no local state copy; reading checkpoint storage")
		}
		return false
	}
	defer file.Close()
	if err := rd.readFrom(fr, file); err != nil {
		if rd.ctx.Err() != nil {
			return false // the remote read fails with it as well
		}
		s.log.Warn().Err(err).Str("local", p).Str("remote", fr.uri).Msg("local state copy corrupt; reading checkpoint storage")
		rd.stats.Fallbacks++
		s.mu.Lock()
		os.Remove(p)
		s.mu.Unlock()
		return false
	}
	s.log.Debug().Str("local", p).Int64("bytes", fr.file.GetSize()).Msg("restored a state file from its local copy")
	return true
}

// localChkDirs lists the checkpoint IDs with a local copy (tests).
func (s *TaskLocalStateStore) localChkDirs() []int64 {
	ents, _ := os.ReadDir(s.dir)
	var ids []int64
	for _, e := range ents {
		if n, err := strconv.ParseInt(strings.TrimPrefix(e.Name(), chkPrefix), 10, 64); err == nil {
			ids = append(ids, n)
		}
	}
	return ids
}

// localCopy starts the local copy of a checkpoint's (not a savepoint's)
// state file, written before the acknowledgement so every completed
// checkpoint has one; a failure costs only the local recovery.
func (r *Responder) localCopy(b runtime.CheckpointBarrier, name string) *LocalCopy {
	if r.cfg.LocalState == nil || b.Options.Type != runtime.Checkpoint {
		return nil
	}
	c, err := r.cfg.LocalState.Create(b.ID, name)
	if err != nil {
		r.cfg.Log.Warn().Err(err).Int64("checkpoint_id", b.ID).Msg("keeping a local copy of the task's state failed; a restart reads checkpoint storage")
		return nil
	}
	return c
}

// keepLocal commits (keep) or discards a local copy, logging a failure.
func (r *Responder) keepLocal(b runtime.CheckpointBarrier, c *LocalCopy, keep bool) {
	if c == nil {
		return
	}
	if !keep {
		c.Discard()
		return
	}
	if err := c.Commit(); err != nil {
		r.cfg.Log.Warn().Err(err).Int64("checkpoint_id", b.ID).Msg("keeping a local copy of the task's state failed; a restart reads checkpoint storage")
	}
}

// NotifyCheckpointComplete tells the Responder checkpoint id completed:
// older local copies go. Called by the runner, from any goroutine;
// blocking on the local disk.
func (r *Responder) NotifyCheckpointComplete(id int64) { r.cfg.LocalState.ConfirmCheckpoint(id) }

// NotifyCheckpointAborted tells the Responder checkpoint id was aborted:
// its local copies go.
func (r *Responder) NotifyCheckpointAborted(id int64) { r.cfg.LocalState.AbortCheckpoint(id) }
