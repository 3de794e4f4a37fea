package blob

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestCacheFetchesOnceAndVerifies(t *testing.T) {
	s, _ := Open(t.TempDir())
	c := NewCache(s)
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
	// Release the fetch only once all five callers wait for it in Get's
	// select: each has joined the one fetch under way.
	waitGoroutinesIn(t, "blob.(*Cache).Get(", len(paths))
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

// waitGoroutinesIn waits until n goroutines block in a select with fn on
// their stack. The deadline only bounds a hang.
func waitGoroutinesIn(t *testing.T, fn string, n int) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		got := 0
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.HasPrefix(g, "goroutine ") && strings.Contains(g, " [select") && strings.Contains(g, fn) {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines in %s, want %d", got, fn, n)
		}
	}
}
