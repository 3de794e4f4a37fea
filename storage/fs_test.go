package storage

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestFileSystemBasics(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FileSystem, dir string) {
		ctx := testCtx(t)
		p := join(dir, "a", "b", "file.txt")

		if _, err := fsys.Open(ctx, p); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Open(missing) = %v, want ErrNotFound", err)
		}
		if _, err := fsys.Stat(ctx, p); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Stat(missing) = %v, want ErrNotFound", err)
		} else if !strings.HasPrefix(err.Error(), "storage: ") || !strings.Contains(err.Error(), fsys.URI(p)) {
			t.Errorf("error %q: want a storage: prefix and the URI %s", err, fsys.URI(p))
		}

		n, err := WriteFileAtomic(ctx, fsys, p, strings.NewReader("hello"))
		if err != nil || n != 5 {
			t.Fatalf("WriteFileAtomic = %d, %v", n, err)
		}
		got, err := ReadFile(ctx, fsys, p)
		if err != nil || string(got) != "hello" {
			t.Fatalf("ReadFile = %q, %v", got, err)
		}
		st, err := fsys.Stat(ctx, p)
		if err != nil || st.Size != 5 || st.IsDir || st.Name != "file.txt" || st.Path != p {
			t.Fatalf("Stat = %+v, %v", st, err)
		}
		if st, err := fsys.Stat(ctx, join(dir, "a")); err != nil || !st.IsDir {
			t.Fatalf("Stat(dir) = %+v, %v", st, err)
		}

		// Create refuses to clobber.
		if _, err := fsys.Create(ctx, p); !errors.Is(err, ErrExist) {
			t.Fatalf("Create(existing) = %v, want ErrExist", err)
		}

		// Rename replaces the target.
		q := join(dir, "a", "b", "other.txt")
		if _, err := WriteFileAtomic(ctx, fsys, q, strings.NewReader("other")); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Rename(ctx, q, p); err != nil {
			t.Fatalf("Rename over an existing file: %v", err)
		}
		if got, _ := ReadFile(ctx, fsys, p); string(got) != "other" {
			t.Fatalf("after rename: %q", got)
		}
		if err := fsys.Rename(ctx, q, p); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Rename(missing) = %v, want ErrNotFound", err)
		}
		if got := names(t, fsys, join(dir, "a", "b")); len(got) != 1 || got[0] != "file.txt" {
			t.Fatalf("ReadDir = %v", got)
		}

		// MkdirAll and RemoveAll are idempotent.
		for range 2 {
			if err := fsys.MkdirAll(ctx, join(dir, "x", "y")); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 {
			if err := fsys.RemoveAll(ctx, join(dir, "a")); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := fsys.Stat(ctx, p); !errors.Is(err, ErrNotFound) {
			t.Fatalf("after RemoveAll: %v", err)
		}
		if _, err := fsys.ReadDir(ctx, join(dir, "a")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("ReadDir(missing) = %v", err)
		}
		if err := fsys.MkdirAll(ctx, "relative/path"); !errors.Is(err, ErrInvalid) {
			t.Fatalf("relative path: %v", err)
		}

		// A larger file spanning many reads and writes.
		big := bytes.Repeat([]byte("0123456789abcdef"), 300_000) // 4.8 MB
		bp := join(dir, "big.bin")
		if _, err := WriteFileAtomic(ctx, fsys, bp, bytes.NewReader(big)); err != nil {
			t.Fatal(err)
		}
		if got, err := ReadFile(ctx, fsys, bp); err != nil || !bytes.Equal(got, big) {
			t.Fatalf("big file: %d bytes, %v", len(got), err)
		}
	})
}

// gateReader yields first, then blocks until release is closed, then
// yields rest or fails.
type gateReader struct {
	first, rest []byte
	reached     chan struct{}
	release     chan struct{}
	fail        error
	state       int
}

func (g *gateReader) Read(b []byte) (int, error) {
	switch g.state {
	case 0:
		g.state = 1
		return copy(b, g.first), nil
	case 1:
		close(g.reached)
		<-g.release
		g.state = 2
		if g.fail != nil {
			return 0, g.fail
		}
		return copy(b, g.rest), nil
	default:
		return 0, io.EOF
	}
}

func TestWriteFileAtomicNeverShowsPartialFile(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FileSystem, dir string) {
		ctx := testCtx(t)
		p := join(dir, "staged", "gofl.yaml")

		write := func(g *gateReader) chan error {
			done := make(chan error, 1)
			go func() { _, err := WriteFileAtomic(ctx, fsys, p, g); done <- err }()
			select {
			case <-g.reached:
			case err := <-done:
				t.Fatalf("write ended early: %v", err)
			}
			return done
		}

		// First write: while half written, nothing is under the final name.
		g := &gateReader{first: []byte("half "), rest: []byte("and all"), reached: make(chan struct{}), release: make(chan struct{})}
		done := write(g)
		if _, err := fsys.Stat(ctx, p); !errors.Is(err, ErrNotFound) {
			t.Fatalf("final name visible mid-write: %v", err)
		}
		if ns := names(t, fsys, join(dir, "staged")); len(ns) != 1 || !IsTempName(ns[0]) {
			t.Fatalf("mid-write directory = %v, want one temporary name", ns)
		}
		close(g.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got, _ := ReadFile(ctx, fsys, p); string(got) != "half and all" {
			t.Fatalf("got %q", got)
		}

		// Replacing: readers see the old content until the new one is complete.
		g = &gateReader{first: []byte("new "), rest: []byte("content"), reached: make(chan struct{}), release: make(chan struct{})}
		done = write(g)
		if got, _ := ReadFile(ctx, fsys, p); string(got) != "half and all" {
			t.Fatalf("mid-replace read %q, want the old content", got)
		}
		close(g.release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got, _ := ReadFile(ctx, fsys, p); string(got) != "new content" {
			t.Fatalf("got %q", got)
		}

		// A failed write leaves the old file and no temporary behind.
		boom := errors.New("source broke")
		g = &gateReader{first: []byte("doomed"), reached: make(chan struct{}), release: make(chan struct{}), fail: boom}
		done = write(g)
		close(g.release)
		if err := <-done; !errors.Is(err, boom) {
			t.Fatalf("failed write = %v, want the source's error", err)
		}
		if got, _ := ReadFile(ctx, fsys, p); string(got) != "new content" {
			t.Fatalf("after a failed write: %q", got)
		}
		if ns := names(t, fsys, join(dir, "staged")); len(ns) != 1 || ns[0] != "gofl.yaml" {
			t.Fatalf("after a failed write the directory holds %v", ns)
		}

		// A cancelled context stops the write, also leaving nothing.
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := WriteFileAtomic(cctx, fsys, join(dir, "staged", "never"), strings.NewReader("x")); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled write = %v", err)
		}
		if ns := names(t, fsys, join(dir, "staged")); len(ns) != 1 {
			t.Fatalf("after a cancelled write the directory holds %v", ns)
		}
	})
}

func TestOpenURIs(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	for _, uri := range []string{"file://" + dir, "file://localhost" + dir, dir, "file://" + dir + "/"} {
		fsys, root, err := Open(ctx, uri, Options{})
		if err != nil || root != dir {
			t.Errorf("Open(%q) = %q, %v; want root %q", uri, root, err, dir)
			continue
		}
		if fsys.URI(root) != "file://"+dir {
			t.Errorf("URI = %q", fsys.URI(root))
		}
	}
	for _, uri := range []string{"s3://bucket/x", "file://host/x", "relative/path", "file:relative", "::"} {
		if _, _, err := Open(ctx, uri, Options{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("Open(%q) = %v, want ErrInvalid", uri, err)
		}
	}
}

func TestCloseRetriesWhileReplicating(t *testing.T) {
	var sleeps []time.Duration
	sleep := func(d time.Duration) { sleeps = append(sleeps, d) }

	c := &fakeCloser{replicating: 3}
	if err := closeRetrying(c, 8, 100*time.Millisecond, sleep); err != nil {
		t.Fatalf("closeRetrying = %v", err)
	}
	if c.calls != 4 {
		t.Fatalf("Close called %d times, want 4", c.calls)
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	if len(sleeps) != len(want) {
		t.Fatalf("sleeps %v, want %v", sleeps, want)
	}
	for i := range want {
		if sleeps[i] != want[i] {
			t.Fatalf("sleeps %v, want %v", sleeps, want)
		}
	}

	// Bounded: gives up with a clear error, and the backoff is capped.
	sleeps = nil
	c = &fakeCloser{replicating: 100}
	err := closeRetrying(c, 10, time.Second, sleep)
	if err == nil || !isReplicating(err) || !strings.Contains(err.Error(), "still replicating after 10 retries") {
		t.Fatalf("closeRetrying = %v", err)
	}
	if c.calls != 11 || sleeps[len(sleeps)-1] != 5*time.Second {
		t.Fatalf("calls %d, sleeps %v", c.calls, sleeps)
	}

	// Other errors are not retried.
	c = &fakeCloser{other: errors.New("disk on fire")}
	if err := closeRetrying(c, 8, time.Millisecond, sleep); err == nil || c.calls != 1 {
		t.Fatalf("closeRetrying = %v after %d calls", err, c.calls)
	}
}
