package ha

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/gofl/gofl/storage"
)

// fsJobResultStore is Flink's FileSystemJobResultStore in
// <storageDir>/<cluster>/job-result-store: <job-id>_DIRTY.json while the
// job's cleanup is pending, then <job-id>.json. Writes first check the
// leadership against ZooKeeper (a fenced no-op multi), so a deposed leader
// fails with ErrNotLeader; the file operation that follows is not atomic
// with that check (files are not in ZooKeeper), which leaves a window of
// one round trip, as in Flink.
type fsJobResultStore struct {
	s   *zkServices
	dir string
}

const dirtySuffix = "_DIRTY.json"

func (j *fsJobResultStore) dirty(jobID string) string { return path.Join(j.dir, jobID+dirtySuffix) }
func (j *fsJobResultStore) clean(jobID string) string { return path.Join(j.dir, jobID+".json") }

func (j *fsJobResultStore) exists(ctx context.Context, p string) (bool, error) {
	_, err := j.s.fs.Stat(ctx, p)
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("ha: job result store %s: %w", j.s.fs.URI(p), err)
	}
	return true, nil
}

func (j *fsJobResultStore) CreateDirtyResult(ctx context.Context, session SessionID, r JobResult) error {
	if err := validKey("job id", r.JobID); err != nil {
		return err
	}
	if has, err := j.HasJobResultEntry(ctx, r.JobID); err != nil {
		return err
	} else if has {
		return fmt.Errorf("%w: job %s already has a result entry in %s", ErrExists, r.JobID, j.s.fs.URI(j.dir))
	}
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := j.s.fencedMulti(session); err != nil {
		return err
	}
	if _, err := storage.WriteFileAtomic(ctx, j.s.fs, j.dirty(r.JobID), bytes.NewReader(data)); err != nil {
		return fmt.Errorf("ha: writing the job result of %s: %w", r.JobID, err)
	}
	return nil
}

func (j *fsJobResultStore) MarkResultAsClean(ctx context.Context, session SessionID, jobID string) error {
	if err := validKey("job id", jobID); err != nil {
		return err
	}
	if err := j.s.fencedMulti(session); err != nil {
		return err
	}
	err := j.s.fs.Rename(ctx, j.dirty(jobID), j.clean(jobID))
	if errors.Is(err, storage.ErrNotFound) {
		if ok, serr := j.exists(ctx, j.clean(jobID)); serr != nil || ok {
			return serr
		}
		return fmt.Errorf("%w: no result entry for job %s in %s", ErrNotFound, jobID, j.s.fs.URI(j.dir))
	}
	return err
}

func (j *fsJobResultStore) HasJobResultEntry(ctx context.Context, jobID string) (bool, error) {
	if ok, err := j.HasCleanJobResultEntry(ctx, jobID); err != nil || ok {
		return ok, err
	}
	return j.exists(ctx, j.dirty(jobID))
}

func (j *fsJobResultStore) HasCleanJobResultEntry(ctx context.Context, jobID string) (bool, error) {
	if err := validKey("job id", jobID); err != nil {
		return false, err
	}
	return j.exists(ctx, j.clean(jobID))
}

func (j *fsJobResultStore) GetJobResult(ctx context.Context, jobID string) (JobResult, error) {
	if err := validKey("job id", jobID); err != nil {
		return JobResult{}, err
	}
	for _, p := range []string{j.clean(jobID), j.dirty(jobID), j.clean(jobID)} { // clean again: marked clean meanwhile
		data, err := storage.ReadFile(ctx, j.s.fs, p)
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return JobResult{}, fmt.Errorf("ha: job result %s: %w", j.s.fs.URI(p), err)
		}
		var r JobResult
		if err := json.Unmarshal(data, &r); err != nil {
			return JobResult{}, fmt.Errorf("ha: job result %s: %w", j.s.fs.URI(p), err)
		}
		return r, nil
	}
	return JobResult{}, fmt.Errorf("%w: no result entry for job %s in %s", ErrNotFound, jobID, j.s.fs.URI(j.dir))
}

func (j *fsJobResultStore) DirtyResults(ctx context.Context) ([]JobResult, error) {
	entries, err := j.s.fs.ReadDir(ctx, j.dir)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ha: job result store %s: %w", j.s.fs.URI(j.dir), err)
	}
	var out []JobResult
	for _, e := range entries {
		if e.IsDir || storage.IsTempName(e.Name) || !strings.HasSuffix(e.Name, dirtySuffix) {
			continue
		}
		data, err := storage.ReadFile(ctx, j.s.fs, e.Path)
		if errors.Is(err, storage.ErrNotFound) {
			continue // marked clean meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("ha: job result %s: %w", j.s.fs.URI(e.Path), err)
		}
		var r JobResult
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("ha: job result %s: %w", j.s.fs.URI(e.Path), err)
		}
		out = append(out, r)
	}
	return out, nil
}

// fsBlobStore is Flink's FileSystemBlobStore in <storageDir>/<cluster>/blob.
type fsBlobStore struct {
	fs  storage.FileSystem
	dir string
}

func (b *fsBlobStore) Put(ctx context.Context, key string, r io.Reader) error {
	if err := validKey("blob key", key); err != nil {
		return err
	}
	if _, err := storage.WriteFileAtomic(ctx, b.fs, path.Join(b.dir, key), r); err != nil {
		return fmt.Errorf("ha: blob %s: %w", key, err)
	}
	return nil
}

func (b *fsBlobStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := validKey("blob key", key); err != nil {
		return nil, err
	}
	p := path.Join(b.dir, key)
	rc, err := b.fs.Open(ctx, p)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("%w: blob %s in %s", ErrNotFound, key, b.fs.URI(b.dir))
	}
	if err != nil {
		return nil, fmt.Errorf("ha: blob %s: %w", b.fs.URI(p), err)
	}
	return rc, nil
}

func (b *fsBlobStore) Delete(ctx context.Context, key string) error {
	if err := validKey("blob key", key); err != nil {
		return err
	}
	return b.fs.RemoveAll(ctx, path.Join(b.dir, key))
}
