package checkpointing

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"strings"
	"sync"

	"github.com/gofl/gofl/storage"
)

// FileSystems opens checkpoint storage by URI and keeps one FileSystem
// per scheme and authority (an HDFS client holds a NameNode connection), so
// every task of a runner shares them. Safe for concurrent use.
type FileSystems struct {
	// open is storage.Open with the runner's options; tests replace it.
	open func(ctx context.Context, uri string) (storage.FileSystem, string, error)

	mu     sync.Mutex
	byKey  map[string]storage.FileSystem
	closed bool
}

// NewFileSystems returns an empty cache opening with opts.
func NewFileSystems(opts storage.Options) *FileSystems {
	return &FileSystems{
		open: func(ctx context.Context, uri string) (storage.FileSystem, string, error) {
			return storage.Open(ctx, uri, opts)
		},
		byKey: map[string]storage.FileSystem{},
	}
}

// Resolve returns the file system a directory or file URI names and the
// path inside it. A plain absolute path is a local one. It blocks while an
// HDFS client connects (bounded by storage's timeouts and ctx).
func (f *FileSystems) Resolve(ctx context.Context, uri string) (storage.FileSystem, string, error) {
	if strings.HasPrefix(uri, "/") {
		uri = "file://" + uri
	}
	u, err := url.Parse(uri)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %q is not a URI: %v", storage.ErrInvalid, uri, err)
	}
	key := u.Scheme + "://" + u.Host
	p := path.Clean("/" + u.Path)
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, "", fmt.Errorf("checkpointing: file systems closed")
	}
	fsys := f.byKey[key]
	f.mu.Unlock()
	if fsys != nil {
		return fsys, p, nil
	}
	fsys, root, err := f.open(ctx, uri)
	if err != nil {
		return nil, "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		fsys.Close()
		return nil, "", fmt.Errorf("checkpointing: file systems closed")
	}
	if old := f.byKey[key]; old != nil { // a concurrent Resolve won
		fsys.Close()
		return old, root, nil
	}
	f.byKey[key] = fsys
	return fsys, root, nil
}

// Close closes every file system opened. Later Resolves fail.
func (f *FileSystems) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	var first error
	for k, fsys := range f.byKey {
		if err := fsys.Close(); err != nil && first == nil {
			first = err
		}
		delete(f.byKey, k)
	}
	return first
}
