package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// ErrCacheClosed is returned by Get once the cache is closed.
var ErrCacheClosed = errors.New("blob: cache closed")

// Cache fills a local Store on demand, as Flink's BlobCache does for a
// TaskManager: a blob is fetched once however many callers ask for it at
// the same time, and what was fetched is verified against its key before
// anyone sees it.
//
// A shared download belongs to the cache, not to the caller that started
// it: it runs on a context of the cache's, cancelled once every caller
// waiting for it gave up or the cache closed.
type Cache struct {
	store  *Store
	ctx    context.Context // parent of every download; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // download goroutines

	mu       sync.Mutex
	closed   bool
	inflight map[string]*fetchCall
}

// fetchCall is one shared download. waiters and the map entry are guarded
// by Cache.mu; path and err are written before done is closed.
type fetchCall struct {
	done    chan struct{}
	cancel  context.CancelFunc
	waiters int
	path    string
	err     error
}

// NewCache returns a cache over s. Close it to stop its downloads.
func NewCache(s *Store) *Cache {
	ctx, cancel := context.WithCancel(context.Background())
	return &Cache{store: s, ctx: ctx, cancel: cancel, inflight: map[string]*fetchCall{}}
}

// Store is the local store behind the cache.
func (c *Cache) Store() *Store { return c.store }

// Get returns the local path of key, calling fetch if the blob is not there
// yet. It blocks until the blob is local or ctx ends; concurrent calls for
// one key share a single fetch. Bytes that do not hash to key are rejected
// with ErrDigestMismatch and not stored.
//
// fetch runs on its own goroutine with a context of the cache's, which ends
// once every Get waiting for that key returned or the cache closed; fetch
// must honour it and must not use anything its caller releases when Get
// returns (such as the caller's connection), since other callers may still
// wait for the download. A Get whose ctx ends returns ctx.Err() and leaves
// the download to the others.
func (c *Cache) Get(ctx context.Context, key string, fetch func(ctx context.Context) (io.ReadCloser, error)) (string, error) {
	if p, err := c.store.Path(key); err == nil {
		return p, nil
	} else if _, perr := ParseKey(key); perr != nil {
		return "", perr
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return "", ErrCacheClosed
	}
	call := c.inflight[key]
	if call == nil {
		fctx, cancel := context.WithCancel(c.ctx)
		call = &fetchCall{done: make(chan struct{}), cancel: cancel}
		c.inflight[key] = call
		c.wg.Add(1)
		go c.fetch(fctx, key, call, fetch)
	}
	call.waiters++
	c.mu.Unlock()
	select {
	case <-call.done:
		return call.path, call.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	call.waiters--
	if call.waiters == 0 {
		// Nobody wants it any more: stop the download, and let the next
		// Get for this key start afresh rather than join a cancelled one.
		call.cancel()
		if c.inflight[key] == call {
			delete(c.inflight, key)
		}
	}
	c.mu.Unlock()
	return "", ctx.Err()
}

// Waiters is how many Get calls wait for the download of key in flight
// (0 if none is), for tests and diagnostics.
func (c *Cache) Waiters(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if call := c.inflight[key]; call != nil {
		return call.waiters
	}
	return 0
}

// Close cancels the downloads in flight, whose waiters get an error, and
// makes later Gets of blobs not stored yet fail with ErrCacheClosed. It
// blocks until every download goroutine ended, and is idempotent.
func (c *Cache) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

func (c *Cache) fetch(ctx context.Context, key string, call *fetchCall, fetch func(ctx context.Context) (io.ReadCloser, error)) {
	defer c.wg.Done()
	defer func() {
		call.cancel()
		c.mu.Lock()
		if c.inflight[key] == call {
			delete(c.inflight, key)
		}
		c.mu.Unlock()
		if call.err != nil && c.ctx.Err() != nil {
			call.err = fmt.Errorf("%w: %w", ErrCacheClosed, call.err)
		}
		close(call.done)
	}()
	rc, err := fetch(ctx)
	if err != nil {
		call.err = fmt.Errorf("blob: fetching %s: %w", key, err)
		return
	}
	defer rc.Close()
	if _, _, err := c.store.Put(rc, key, 0); err != nil {
		call.err = fmt.Errorf("blob: fetching %s: %w", key, err)
		return
	}
	call.path, call.err = c.store.Path(key)
}
