package checkpointing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/stream/runtime"
)

// Files shared between incremental checkpoints (Flink's
// IncrementalRemoteKeyedStateHandle shared state) live in
// "<state.checkpoints.dir>/<job-id>/shared/<name>", next to the chk-<n>
// directories: a checkpoint uploads only the files no completed checkpoint
// uploaded before, and every handle lists all the files its state needs by
// absolute URI. The JobMaster's SharedStateRegistry deletes a file once no
// retained checkpoint refers to it.

// SharedDirName is the name of the directory of shared files.
const SharedDirName = "shared"

// ErrSharedInSavepoint is a savepoint snapshot with shared files: savepoints
// must be self-contained.
var ErrSharedInSavepoint = errors.New("checkpointing: a savepoint snapshot refers to shared files")

// SharedDir is the directory of shared files of the job whose checkpoint
// directory is location (".../<job-id>/chk-<n>"): ".../<job-id>/shared".
func SharedDir(location string) string {
	location = strings.TrimRight(location, "/")
	if i := strings.LastIndex(location, "/"); i >= 0 {
		return location[:i+1] + SharedDirName
	}
	return SharedDirName
}

// sizes are a snapshot's bytes: all of its state, and what this
// checkpoint wrote (the rest was uploaded by earlier checkpoints).
type sizes struct{ state, checkpointed int64 }

// writeWithShared uploads the snapshot's new shared files, writes its
// state file (write) and lists the shared files in each operator's handle.
func (r *Responder) writeWithShared(b runtime.CheckpointBarrier, snap *runtime.TaskSnapshot) ([]*pb.OperatorSubtaskStateHandle, sizes, error) {
	shared := map[string][]*pb.StateFile{}
	var sz sizes
	if snap != nil {
		for _, op := range snap.Operators {
			if op == nil || len(op.SharedFiles) == 0 {
				continue
			}
			files, all, uploaded, err := r.uploadShared(b, op.SharedFiles)
			if err != nil {
				return nil, sizes{}, fmt.Errorf("operator %s: %w", op.OperatorID, err)
			}
			shared[op.OperatorID] = files
			sz.state += all
			sz.checkpointed += uploaded
		}
	}
	hs, size, err := r.write(b, snap)
	if err != nil {
		return nil, sizes{}, err
	}
	for _, h := range hs {
		h.SharedFiles = shared[h.OperatorId]
	}
	sz.state += size
	sz.checkpointed += size
	return hs, sz, nil
}

// uploadShared uploads the files not uploaded yet to the shared directory
// (temporary name and rename, so a reader never sees a partial file) and
// returns every file as a handle with its absolute URI, the size of all and
// the bytes uploaded. It blocks on storage, bounded by WriteTimeout.
func (r *Responder) uploadShared(b runtime.CheckpointBarrier, files []runtime.SharedStateFile) ([]*pb.StateFile, int64, int64, error) {
	if b.Options.Type != runtime.Checkpoint {
		return nil, 0, 0, fmt.Errorf("%w (checkpoint %d)", ErrSharedInSavepoint, b.ID)
	}
	if b.Options.TargetLocation == "" {
		return nil, 0, 0, fmt.Errorf("checkpoint %d has no target location", b.ID)
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.WriteTimeout)
	defer cancel()
	dirURI := SharedDir(b.Options.TargetLocation)
	fsys, dir, err := r.cfg.FileSystems.Resolve(ctx, dirURI)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("shared state directory %s: %w", dirURI, err)
	}
	var out []*pb.StateFile
	var all, uploaded int64
	for _, f := range files {
		if f.Name == "" || strings.ContainsAny(f.Name, "/\\") || f.Name == "." || f.Name == ".." {
			return nil, 0, 0, fmt.Errorf("%w: shared state file name %q", ErrCorrupt, f.Name)
		}
		uri := dirURI + "/" + f.Name
		if !f.Uploaded {
			n, err := uploadFile(ctx, fsys, path.Join(dir, f.Name), f.LocalPath)
			if err != nil {
				return nil, 0, 0, fmt.Errorf("shared state file %s: %w", uri, err)
			}
			if n != f.Size {
				return nil, 0, 0, fmt.Errorf("shared state file %s: uploaded %d bytes of %s, the snapshot says %d", uri, n, f.LocalPath, f.Size)
			}
			uploaded += n
		}
		all += f.Size
		out = append(out, &pb.StateFile{Path: uri, Size: f.Size})
	}
	return out, all, uploaded, nil
}

func uploadFile(ctx context.Context, fsys storage.FileSystem, p, local string) (int64, error) {
	in, err := os.Open(local)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	return storage.WriteFileAtomic(ctx, fsys, p, in)
}

// RestoreShared is Restore, plus the shared files of incremental
// snapshots: those listed by every old subtask handle whose key groups
// overlap subtask's range are downloaded into localDir (which the caller
// creates and removes once the task ended) and set as the operator's
// OperatorRestore.SharedFiles. A missing or short file fails the restore
// naming it. The state files are read from local copies in local first
// (nil: none; see TaskLocalStateStore). It blocks on storage, bounded by
// ctx.
func RestoreShared(ctx context.Context, fss *FileSystems, local *TaskLocalStateStore, tr *pb.TaskRestore, subtask, parallelism, maxParallelism int, localDir string) (*runtime.TaskRestore, RestoreStats, error) {
	out, st, err := local.Restore(ctx, fss, tr, subtask, parallelism, maxParallelism)
	if err != nil || out == nil {
		return out, st, err
	}
	if maxParallelism <= 0 {
		maxParallelism = parallelism
	}
	start, end := runtime.KeyGroupRange(subtask, parallelism, maxParallelism)
	got := map[string]string{} // URI -> local path, each file downloaded once
	for _, h := range tr.Operators {
		if h == nil || len(h.SharedFiles) == 0 || !overlaps(h, start, end) {
			continue
		}
		or := out.Operators[h.OperatorId]
		if or == nil {
			continue
		}
		for _, f := range h.SharedFiles {
			name := path.Base(f.Path)
			if !strings.Contains(f.Path, "://") && !strings.HasPrefix(f.Path, "/") {
				return nil, st, fmt.Errorf("%w: operator %s subtask %d: shared file %q is not an absolute URI", ErrCorrupt, h.OperatorId, h.SubtaskIndex, f.Path)
			}
			local, ok := got[f.Path]
			if !ok {
				if localDir == "" {
					return nil, st, fmt.Errorf("checkpointing: restoring operator %s: shared state files but no local directory", h.OperatorId)
				}
				local = filepath.Join(localDir, name)
				if err := downloadFile(ctx, fss, f, local); err != nil {
					return nil, st, fmt.Errorf("checkpointing: restoring operator %s from %s: %w", h.OperatorId, f.Path, err)
				}
				got[f.Path] = local
			}
			or.SharedFiles = append(or.SharedFiles, runtime.SharedStateFile{Name: name, LocalPath: local, Size: f.Size, Uploaded: true})
		}
	}
	return out, st, nil
}

// overlaps reports whether handle h holds a key group in [start, end].
func overlaps(h *pb.OperatorSubtaskStateHandle, start, end int) bool {
	for _, kg := range h.KeyGroups {
		if g := int(kg.KeyGroup); g >= start && g <= end {
			return true
		}
	}
	return false
}

func downloadFile(ctx context.Context, fss *FileSystems, f *pb.StateFile, local string) (err error) {
	fsys, p, err := fss.Resolve(ctx, f.Path)
	if err != nil {
		return err
	}
	in, err := fsys.Open(ctx, p)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		return err
	}
	out, err := os.Create(local)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(local)
		}
	}()
	n, err := io.Copy(out, ctxReader{ctx, in})
	if err != nil {
		return err
	}
	if n != f.Size {
		return fmt.Errorf("%w: %d bytes, the handle says %d", ErrCorrupt, n, f.Size)
	}
	return nil
}

// ctxReader stops a copy once ctx ended.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}
