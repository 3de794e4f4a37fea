package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
)

// Local returns the file:// file system: the local disk, with paths used as
// they are.
func Local() FileSystem { return localFS{} }

type localFS struct{}

func (localFS) URI(p string) string { return "file://" + path.Clean("/"+p) }

func (l localFS) check(ctx context.Context, op, p string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("storage: %s %s: %w", op, l.URI(p), err)
	}
	if !path.IsAbs(p) {
		return "", fmt.Errorf("%w: %s %q: path is not absolute", ErrInvalid, op, p)
	}
	return filepath.FromSlash(path.Clean(p)), nil
}

func (l localFS) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	lp, err := l.check(ctx, "open", p)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(lp)
	if err != nil {
		return nil, wrapErr("open", l.URI(p), err)
	}
	if st, err := f.Stat(); err == nil && st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%w: open %s: is a directory", ErrInvalid, l.URI(p))
	}
	return f, nil
}

func (l localFS) Create(ctx context.Context, p string) (io.WriteCloser, error) {
	lp, err := l.check(ctx, "create", p)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(lp), 0o755); err != nil {
		return nil, wrapErr("create", l.URI(p), err)
	}
	f, err := os.OpenFile(lp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, wrapErr("create", l.URI(p), err)
	}
	return &localWriter{f: f, uri: l.URI(p)}, nil
}

// localWriter makes Close durable, as HDFS's is. It starts the disk
// writing every writebackBytes, so that a large file's Close does not wait
// for all of it (checkpoint files, part files).
type localWriter struct {
	f   *os.File
	uri string
	// written counts the bytes written; queued those handed to writeback.
	written, queued int64
}

// writebackBytes is how much a local writer lets the page cache hold
// before it starts writeback of it.
const writebackBytes = 8 << 20

func (w *localWriter) Write(b []byte) (int, error) {
	n, err := w.f.Write(b)
	w.written += int64(n)
	if w.written-w.queued >= writebackBytes {
		startWriteback(w.f, w.queued, w.written-w.queued)
		w.queued = w.written
	}
	if err != nil {
		return n, wrapErr("write", w.uri, err)
	}
	return n, nil
}

func (w *localWriter) Close() error {
	serr := w.f.Sync()
	if err := w.f.Close(); err != nil {
		return wrapErr("close", w.uri, err)
	}
	if serr != nil {
		return wrapErr("sync", w.uri, serr)
	}
	return nil
}

func (l localFS) Rename(ctx context.Context, from, to string) error {
	lf, err := l.check(ctx, "rename", from)
	if err != nil {
		return err
	}
	lt, err := l.check(ctx, "rename", to)
	if err != nil {
		return err
	}
	if err := os.Rename(lf, lt); err != nil {
		return wrapErr("rename", l.URI(from)+" to "+l.URI(to), err)
	}
	// Make the rename itself durable.
	if d, err := os.Open(filepath.Dir(lt)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

func (l localFS) Stat(ctx context.Context, p string) (FileInfo, error) {
	lp, err := l.check(ctx, "stat", p)
	if err != nil {
		return FileInfo{}, err
	}
	st, err := os.Stat(lp)
	if err != nil {
		return FileInfo{}, wrapErr("stat", l.URI(p), err)
	}
	return localInfo(path.Clean(p), st), nil
}

func localInfo(p string, st fs.FileInfo) FileInfo {
	fi := FileInfo{Name: path.Base(p), Path: p, Size: st.Size(), ModTime: st.ModTime(), IsDir: st.IsDir()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		fi.Owner = strconv.FormatUint(uint64(sys.Uid), 10)
	}
	return fi
}

func (l localFS) MkdirAll(ctx context.Context, p string) error {
	lp, err := l.check(ctx, "mkdir", p)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(lp, 0o755); err != nil {
		return wrapErr("mkdir", l.URI(p), err)
	}
	return nil
}

func (l localFS) RemoveAll(ctx context.Context, p string) error {
	lp, err := l.check(ctx, "remove", p)
	if err != nil {
		return err
	}
	if lp == string(filepath.Separator) {
		return fmt.Errorf("%w: refusing to remove /", ErrInvalid)
	}
	if err := os.RemoveAll(lp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return wrapErr("remove", l.URI(p), err)
	}
	return nil
}

func (l localFS) ReadDir(ctx context.Context, p string) ([]FileInfo, error) {
	lp, err := l.check(ctx, "readdir", p)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(lp)
	if err != nil {
		return nil, wrapErr("readdir", l.URI(p), err)
	}
	out := make([]FileInfo, 0, len(ents))
	for _, e := range ents {
		st, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed meanwhile
		} else if err != nil {
			return nil, wrapErr("readdir", l.URI(p), err)
		}
		out = append(out, localInfo(path.Join(path.Clean(p), e.Name()), st))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (localFS) Close() error { return nil }

// Chmod implements Chmoder.
func (l localFS) Chmod(ctx context.Context, p string, mode os.FileMode) error {
	lp, err := l.check(ctx, "chmod", p)
	if err != nil {
		return err
	}
	return wrapErr("chmod", l.URI(p), os.Chmod(lp, mode))
}
