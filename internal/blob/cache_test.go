package blob

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestCacheFetchesOnceAndVerifies(t *testing.T) {
	s, _ := Open(t.TempDir())
	c := NewCache(s)
	defer c.Close()
	data := []byte("job binary")
	key := KeyOf(data)
	var fetches atomic.Int32
	release := make(chan struct{})
	fetch := func(context.Context) (io.ReadCloser, error) {
		fetches.Add(1)
		<-release
		return io.NopCloser(bytes.NewReader(data)), nil
	}
	var wg sync.WaitGroup
	paths := make([]string, 5)
	for i := range paths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := c.Get(context.Background(), key, fetch)
			if err != nil {
				t.Error(err)
			}
			paths[i] = p
		}()
	}
	eventually(t, "every caller waits on the one download", func() bool { return c.Waiters(key) == len(paths) })
	close(release)
	wg.Wait()
	if n := fetches.Load(); n != 1 {
		t.Fatalf("%d fetches for one blob, want 1", n)
	}
	for _, p := range paths {
		if p == "" || p != paths[0] {
			t.Fatalf("paths %v", paths)
		}
	}
	if _, err := c.Get(context.Background(), key, func(context.Context) (io.ReadCloser, error) {
		t.Fatal("a cached blob was fetched again")
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestCacheRejectsCorruptDownloads(t *testing.T) {
	s, _ := Open(t.TempDir())
	c := NewCache(s)
	defer c.Close()
	key := KeyOf([]byte("the real binary"))
	_, err := c.Get(context.Background(), key, func(context.Context) (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader([]byte("a tampered binary"))), nil
	})
	if !errors.Is(err, ErrDigestMismatch) || s.Has(key) {
		t.Fatalf("corrupt download: %v (stored: %v)", err, s.Has(key))
	}
	if _, err := c.Get(context.Background(), "sha256:nope", nil); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("bad key: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	block := make(chan struct{})
	defer close(block)
	if _, err := c.Get(ctx, KeyOf([]byte("slow")), func(context.Context) (io.ReadCloser, error) {
		<-block
		return nil, errors.New("gave up")
	}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Get: %v", err)
	}
}

// eventually polls cond until it holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// recv waits for the next value on ch.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

type getResult struct {
	path string
	err  error
}

// blockingFetch serves data once release is closed, or fails with its
// context's error if that ends first; ended reports that error, or nil.
func blockingFetch(data []byte, release <-chan struct{}, started chan<- struct{}, ended chan<- error) func(context.Context) (io.ReadCloser, error) {
	return func(ctx context.Context) (io.ReadCloser, error) {
		started <- struct{}{}
		select {
		case <-release:
			ended <- nil
			return io.NopCloser(bytes.NewReader(data)), nil
		case <-ctx.Done():
			ended <- ctx.Err()
			return nil, ctx.Err()
		}
	}
}

func TestCacheWaiterGivingUpLeavesTheDownloadToOthers(t *testing.T) {
	s, _ := Open(t.TempDir())
	c := NewCache(s)
	defer c.Close()
	data := []byte("job binary")
	key := KeyOf(data)
	release, started, ended := make(chan struct{}), make(chan struct{}, 2), make(chan error, 2)
	fetch := blockingFetch(data, release, started, ended)

	firstCtx, cancelFirst := context.WithCancel(context.Background())
	defer cancelFirst()
	first, second := make(chan getResult, 1), make(chan getResult, 1)
	go func() { p, err := c.Get(firstCtx, key, fetch); first <- getResult{p, err} }()
	recv(t, started, "the download to start")
	go func() { p, err := c.Get(context.Background(), key, fetch); second <- getResult{p, err} }()
	eventually(t, "both callers wait", func() bool { return c.Waiters(key) == 2 })

	cancelFirst()
	if r := recv(t, first, "the first caller"); !errors.Is(r.err, context.Canceled) || r.path != "" {
		t.Fatalf("first caller: %q, %v; want context.Canceled", r.path, r.err)
	}
	if n := c.Waiters(key); n != 1 {
		t.Fatalf("%d waiters after the first gave up, want 1", n)
	}
	close(release)
	if err := recv(t, ended, "the download to end"); err != nil {
		t.Fatalf("the shared download was cancelled: %v", err)
	}
	r := recv(t, second, "the second caller")
	if r.err != nil {
		t.Fatalf("second caller: %v", r.err)
	}
	if err := s.Verify(key); err != nil || r.path == "" {
		t.Fatalf("fetched blob %q: %v", r.path, err)
	}
	select {
	case <-started:
		t.Fatal("the blob was fetched twice")
	default:
	}
}

func TestCacheCancelsADownloadNobodyWaitsFor(t *testing.T) {
	s, _ := Open(t.TempDir())
	c := NewCache(s)
	defer c.Close()
	data := []byte("job binary")
	key := KeyOf(data)
	release, started, ended := make(chan struct{}), make(chan struct{}, 2), make(chan error, 2)
	fetch := blockingFetch(data, release, started, ended)

	ctx1, cancel1 := context.WithCancel(context.Background())
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel1()
	defer cancel2()
	results := make(chan getResult, 2)
	for _, ctx := range []context.Context{ctx1, ctx2} {
		go func() { p, err := c.Get(ctx, key, fetch); results <- getResult{p, err} }()
	}
	recv(t, started, "the download to start")
	eventually(t, "both callers wait", func() bool { return c.Waiters(key) == 2 })
	cancel1()
	recv(t, results, "the first caller to give up")
	select {
	case err := <-ended:
		t.Fatalf("the download ended (%v) while a caller still waited", err)
	default:
	}
	cancel2()
	recv(t, results, "the second caller to give up")
	if err := recv(t, ended, "the abandoned download to be cancelled"); !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned download ended with %v, want context.Canceled", err)
	}

	// The next caller starts afresh rather than joining the cancelled one.
	close(release)
	p, err := c.Get(context.Background(), key, fetch)
	if err != nil || p == "" {
		t.Fatalf("Get after an abandoned download: %q, %v", p, err)
	}
	if err := s.Verify(key); err != nil {
		t.Fatal(err)
	}
}

func TestCacheCloseStopsDownloads(t *testing.T) {
	s, _ := Open(t.TempDir())
	c := NewCache(s)
	key := KeyOf([]byte("job binary"))
	release, started, ended := make(chan struct{}), make(chan struct{}, 1), make(chan error, 1)
	defer close(release)
	result := make(chan getResult, 1)
	go func() {
		p, err := c.Get(context.Background(), key, blockingFetch([]byte("job binary"), release, started, ended))
		result <- getResult{p, err}
	}()
	recv(t, started, "the download to start")
	c.Close()
	select {
	case err := <-ended: // Close waits for the download goroutine
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("download ended with %v, want context.Canceled", err)
		}
	default:
		t.Fatal("Close returned before the download ended")
	}
	if r := recv(t, result, "the waiter"); !errors.Is(r.err, ErrCacheClosed) {
		t.Fatalf("waiter after Close: %q, %v; want ErrCacheClosed", r.path, r.err)
	}
	if _, err := c.Get(context.Background(), key, nil); !errors.Is(err, ErrCacheClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	c.Close() // idempotent
}
