package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"path"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofl/gofl/storage/storagetest"
)

// testHDFSUser is the user HDFS tests act as (permissions are off in
// MiniDFSCluster, so any name works).
const testHDFSUser = "gofltest"

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func hdfsTestURI(t *testing.T) string { return storagetest.HDFS(t) }

// openTestHDFS connects to the test HDFS and returns a fresh directory in
// it, removed when the test ends.
func openTestHDFS(t *testing.T, opts Options) (FileSystem, string) {
	t.Helper()
	uri := hdfsTestURI(t)
	if opts.User == "" {
		opts.User = testHDFSUser
	}
	ctx := testCtx(t)
	fsys, _, err := Open(ctx, uri+"/", opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", uri, err)
	}
	return fsys, testDir(t, fsys, "/gofl-test/")
}

// testDir makes a fresh directory for the test under prefix in fsys, and
// removes it and closes fsys when the test ends.
func testDir(t *testing.T, fsys FileSystem, prefix string) string {
	t.Helper()
	dir := prefix + strings.ReplaceAll(t.Name(), "/", "_") + "-" + randHex(4)
	if err := fsys.MkdirAll(testCtx(t), dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := fsys.RemoveAll(ctx, dir); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		fsys.Close()
	})
	return dir
}

// eachFS runs fn against file:// always and against hdfs:// when the test
// HDFS is there (see hdfsTestURI).
func eachFS(t *testing.T, fn func(t *testing.T, fsys FileSystem, dir string)) {
	t.Run("file", func(t *testing.T) {
		t.Parallel()
		fn(t, Local(), t.TempDir())
	})
	t.Run("hdfs", func(t *testing.T) {
		t.Parallel()
		fsys, dir := openTestHDFS(t, Options{})
		fn(t, fsys, dir)
	})
	t.Run("hdfs-delegation-token", func(t *testing.T) {
		t.Parallel()
		fsys, dir := openTokenHDFS(t)
		fn(t, fsys, dir)
	})
}

// countingFS counts the calls that write bytes.
type countingFS struct {
	FileSystem
	creates atomic.Int64
	bytes   atomic.Int64
}

func (c *countingFS) Create(ctx context.Context, p string) (io.WriteCloser, error) {
	w, err := c.FileSystem.Create(ctx, p)
	if err != nil {
		return nil, err
	}
	c.creates.Add(1)
	return &countingWriter{WriteCloser: w, n: &c.bytes}, nil
}

type countingWriter struct {
	io.WriteCloser
	n *atomic.Int64
}

func (w *countingWriter) Write(b []byte) (int, error) {
	n, err := w.WriteCloser.Write(b)
	w.n.Add(int64(n))
	return n, err
}

// names lists a directory's entry names.
func names(t *testing.T, fsys FileSystem, dir string) []string {
	t.Helper()
	ents, err := fsys.ReadDir(testCtx(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name)
	}
	return out
}

func join(elem ...string) string { return path.Join(elem...) }
