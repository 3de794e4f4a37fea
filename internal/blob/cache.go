package blob

import (
	"context"
	"fmt"
	"io"
	"sync"
)

// Cache fills a local Store on demand, as Flink's BlobCache does for a
// TaskManager: a blob is fetched once however many callers ask for it at
// the same time, and what was fetched is verified against its key before
// anyone sees it.
type Cache struct {
	store    *Store
	mu       sync.Mutex
	inflight map[string]*fetchCall
}

type fetchCall struct {
	done chan struct{}
	path string
	err  error
}

// NewCache returns a cache over s.
func NewCache(s *Store) *Cache { return &Cache{store: s, inflight: map[string]*fetchCall{}} }

// Store is the local store behind the cache.
func (c *Cache) Store() *Store { return c.store }

// Get returns the local path of key, calling fetch if the blob is not there
// yet. It blocks until the blob is local or ctx ends; concurrent calls for
// one key share a single fetch. Bytes that do not hash to key are rejected
// with ErrDigestMismatch and not stored.
func (c *Cache) Get(ctx context.Context, key string, fetch func(ctx context.Context) (io.ReadCloser, error)) (string, error) {
	if p, err := c.store.Path(key); err == nil {
		return p, nil
	} else if _, perr := ParseKey(key); perr != nil {
		return "", perr
	}
	c.mu.Lock()
	call := c.inflight[key]
	if call == nil {
		call = &fetchCall{done: make(chan struct{})}
		c.inflight[key] = call
		go c.fetch(key, call, fetch)
	}
	c.mu.Unlock()
	select {
	case <-call.done:
		return call.path, call.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// fetch runs the download without the caller's context, so one caller giving
// up does not fail the others; fetch itself must bound its duration.
func (c *Cache) fetch(key string, call *fetchCall, fetch func(ctx context.Context) (io.ReadCloser, error)) {
	defer func() {
		c.mu.Lock()
		delete(c.inflight, key)
		c.mu.Unlock()
		close(call.done)
	}()
	rc, err := fetch(context.Background())
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
