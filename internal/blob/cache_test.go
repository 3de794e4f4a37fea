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
	time.Sleep(50 * time.Millisecond)
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
