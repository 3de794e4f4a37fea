package logs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"sync"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/internal/ids"
	"github.com/gofl/gofl/storage"
)

// Process names a process's directory in an archive: JobManagerProcess or
// TaskManagerProcess(id).
type Process string

// JobManagerProcess is the JobManager's directory in an archive.
const JobManagerProcess Process = "jobmanager"

const taskManagersDir = "taskmanagers"

// TaskManagerProcess is a TaskManager's directory in an archive.
func TaskManagerProcess(resourceID string) (Process, error) {
	if err := ids.ResourceID("resource id", resourceID); err != nil || resourceID == "." || resourceID == ".." {
		return "", fmt.Errorf("%w: TaskManager id %q", ErrInvalid, resourceID)
	}
	return Process(taskManagersDir + "/" + resourceID), nil
}

// TaskManagerID is the resource ID of a TaskManager's Process, or "".
func (p Process) TaskManagerID() string {
	id, _ := strings.CutPrefix(string(p), taskManagersDir+"/")
	if id == string(p) {
		return ""
	}
	return id
}

// RootURI is where cluster clusterID's logs are archived:
// <cluster.log-archive.dir>/<cluster-id>, or
// <staging.dir>/.gofl/<cluster-id>/logs.
func RootURI(c *conf.Configuration, clusterID string) (string, error) {
	if err := storage.ValidateClusterID(clusterID); err != nil {
		return "", err
	}
	if dir := conf.ExpandEnv(conf.LogArchiveDir.Get(c)); dir != "" {
		return strings.TrimRight(dir, "/") + "/" + clusterID, nil
	}
	return strings.TrimRight(conf.ExpandEnv(conf.StagingDir.Get(c)), "/") + "/" + storage.StagingSubdir + "/" + clusterID + "/" + storage.LogsSubdir, nil
}

// Archive is one cluster's log archive. Safe for concurrent use.
type Archive struct {
	fs      storage.FileSystem
	root    string
	ownFS   bool
	mu      sync.Mutex
	shipped map[string]int64 // archive path -> size copied, to skip unchanged files
}

// OpenArchive opens cluster clusterID's archive per c's options. Close it.
func OpenArchive(ctx context.Context, c *conf.Configuration, clusterID string) (*Archive, error) {
	uri, err := RootURI(c, clusterID)
	if err != nil {
		return nil, err
	}
	fsys, root, err := storage.Open(ctx, uri, storage.OptionsFromConf(c))
	if err != nil {
		return nil, fmt.Errorf("logs: archive %s: %w", uri, err)
	}
	a := NewArchive(fsys, root)
	a.ownFS = true
	return a, nil
}

// NewArchive is the archive at root in fsys; the caller keeps fsys.
func NewArchive(fsys storage.FileSystem, root string) *Archive {
	return &Archive{fs: fsys, root: path.Clean("/" + root), shipped: map[string]int64{}}
}

// URI is the archive's root as a URI, or a file's when proc and name are given.
func (a *Archive) URI(proc Process, name string) string {
	return a.fs.URI(path.Join(a.root, string(proc), name))
}

// Close closes the file system if OpenArchive opened it.
func (a *Archive) Close() error {
	if a.ownFS {
		return a.fs.Close()
	}
	return nil
}

// Put copies the local files into proc's directory, each atomically,
// skipping those whose size did not change since this Archive last copied
// them. It goes on past a failed file and returns every error. Blocking;
// any goroutine.
func (a *Archive) Put(ctx context.Context, proc Process, files []File) error {
	var errs []error
	for _, f := range files {
		if err := a.put(ctx, proc, f); err != nil {
			errs = append(errs, fmt.Errorf("logs: archiving %s to %s: %w", f.path, a.URI(proc, f.Name), err))
		}
	}
	return errors.Join(errs...)
}

func (a *Archive) put(ctx context.Context, proc Process, f File) error {
	if err := CheckName(f.Name); err != nil {
		return err
	}
	dst := path.Join(a.root, string(proc), f.Name)
	src, err := os.Open(f.path)
	if err != nil {
		return err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	a.mu.Lock()
	done := a.shipped[dst] == st.Size() && st.Size() > 0
	a.mu.Unlock()
	if done || archivedAlready(ctx, a.fs, dst, st) {
		a.mu.Lock()
		a.shipped[dst] = st.Size()
		a.mu.Unlock()
		return nil
	}
	// Only the size seen now: a file growing meanwhile is copied in full next time.
	n, err := storage.WriteFileAtomic(ctx, a.fs, dst, io.LimitReader(src, st.Size()))
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.shipped[dst] = n
	a.mu.Unlock()
	return nil
}

// archivedAlready reports whether dst already holds src as it is now:
// another process archived it (a TaskManager its own logs, then its
// JobManager and the client theirs of the whole cluster) and nothing was
// appended since. Log files only grow, so a copy of the same size written
// no earlier than the file's last change is the file; a rewritten one (a
// new cluster with the same ID) is newer than the copy and is copied again.
// This saves the repeated copies (and their syncs) at a cluster's end.
func archivedAlready(ctx context.Context, fsys storage.FileSystem, dst string, src os.FileInfo) bool {
	if src.Size() == 0 {
		return false
	}
	fi, err := fsys.Stat(ctx, dst)
	return err == nil && !fi.IsDir && fi.Size == src.Size() && !fi.ModTime.Before(src.ModTime())
}

// Processes lists the processes with a directory in the archive: the
// JobManager first, then TaskManagers by ID. A missing archive has none.
func (a *Archive) Processes(ctx context.Context) ([]Process, error) {
	var out []Process
	if _, err := a.fs.Stat(ctx, path.Join(a.root, string(JobManagerProcess))); err == nil {
		out = append(out, JobManagerProcess)
	}
	ents, err := a.fs.ReadDir(ctx, path.Join(a.root, taskManagersDir))
	if errors.Is(err, storage.ErrNotFound) {
		return out, nil
	} else if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if p, err := TaskManagerProcess(e.Name); e.IsDir && err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// List lists proc's archived files by name.
func (a *Archive) List(ctx context.Context, proc Process) ([]File, error) {
	ents, err := a.fs.ReadDir(ctx, path.Join(a.root, string(proc)))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var out []File
	for _, e := range ents {
		if e.IsDir || storage.IsTempName(e.Name) || CheckName(e.Name) != nil {
			continue
		}
		out = append(out, File{Name: e.Name, Size: e.Size, MTime: e.ModTime.UnixMilli(), path: e.Path})
	}
	return out, nil
}

// Open opens an archived file. Missing: ErrNotFound.
func (a *Archive) Open(ctx context.Context, proc Process, name string) (io.ReadCloser, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	r, err := a.fs.Open(ctx, path.Join(a.root, string(proc), name))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, a.URI(proc, name))
	}
	return r, err
}
