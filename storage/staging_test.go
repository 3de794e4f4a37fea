package storage

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/internal/blob"
)

func TestBlobCacheUploadsABinaryOnce(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FileSystem, dir string) {
		ctx := testCtx(t)
		cfs := &countingFS{FileSystem: fsys}
		s := NewStaging(cfs, dir)
		bin := bytes.Repeat([]byte("\x7fELF pretend binary "), 50_000) // 1 MB
		local := filepath.Join(t.TempDir(), "job")
		if err := os.WriteFile(local, bin, 0o755); err != nil {
			t.Fatal(err)
		}

		key, written, err := s.PutBlobFile(ctx, local)
		if err != nil || !written {
			t.Fatalf("first PutBlobFile = %s, %v, %v; want written", key, written, err)
		}
		if key != blob.KeyOf(bin) {
			t.Fatalf("key %s, want %s", key, blob.KeyOf(bin))
		}
		p, _ := s.BlobPath(key)
		if want := join(dir, ".gofl", "blobs", "sha256", strings.TrimPrefix(key, "sha256:")); p != want {
			t.Fatalf("BlobPath = %s, want %s", p, want)
		}
		st1, err := fsys.Stat(ctx, p)
		if err != nil || st1.Size != int64(len(bin)) {
			t.Fatalf("Stat(blob) = %+v, %v", st1, err)
		}
		if cfs.creates.Load() != 1 || cfs.bytes.Load() != int64(len(bin)) {
			t.Fatalf("first put: %d creates, %d bytes", cfs.creates.Load(), cfs.bytes.Load())
		}

		time.Sleep(20 * time.Millisecond) // a rewrite would show in the mtime
		for _, put := range []func() (string, bool, error){
			func() (string, bool, error) { return s.PutBlobFile(ctx, local) },
			func() (string, bool, error) { return s.PutBlob(ctx, bytes.NewReader(bin)) },
		} {
			key2, written, err := put()
			if err != nil || written || key2 != key {
				t.Fatalf("second put = %s, written=%v, %v; want %s, not written", key2, written, err, key)
			}
		}
		if cfs.creates.Load() != 1 || cfs.bytes.Load() != int64(len(bin)) {
			t.Fatalf("second put wrote: %d creates, %d bytes in all", cfs.creates.Load(), cfs.bytes.Load())
		}
		st2, err := fsys.Stat(ctx, p)
		if err != nil || !st2.ModTime.Equal(st1.ModTime) || st2.Size != st1.Size {
			t.Fatalf("blob changed: %+v then %+v (%v)", st1, st2, err)
		}
		if ns := names(t, fsys, join(dir, ".gofl", "blobs", "sha256")); len(ns) != 1 {
			t.Fatalf("blob directory holds %v", ns)
		}
		if ok, err := s.HasBlob(ctx, key); !ok || err != nil {
			t.Fatalf("HasBlob = %v, %v", ok, err)
		}

		// Other content is a second blob; the first download verifies.
		key3, written, err := s.PutBlob(ctx, strings.NewReader("gofl binary v2"))
		if err != nil || !written || key3 == key {
			t.Fatalf("PutBlob(other) = %s, %v, %v", key3, written, err)
		}
		store, err := blob.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		lp, err := s.DownloadBlob(ctx, key, store)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(lp); !bytes.Equal(got, bin) {
			t.Fatal("downloaded blob differs")
		}
		if _, err := s.DownloadBlob(ctx, blob.KeyOf([]byte("never staged")), store); !errors.Is(err, ErrNotFound) {
			t.Fatalf("DownloadBlob(missing) = %v, want ErrNotFound", err)
		}
		if _, err := s.BlobPath("sha256:XYZ"); !errors.Is(err, ErrInvalid) || !errors.Is(err, blob.ErrInvalidKey) {
			t.Fatalf("BlobPath(bad key) = %v", err)
		}
	})
}

func TestBlobDownloadDetectsDigestMismatch(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FileSystem, dir string) {
		ctx := testCtx(t)
		s := NewStaging(fsys, dir)
		key, _, err := s.PutBlob(ctx, strings.NewReader("the real binary"))
		if err != nil {
			t.Fatal(err)
		}
		// Corrupt the cached copy behind the cache's back.
		p, _ := s.BlobPath(key)
		if _, err := WriteFileAtomic(ctx, fsys, p, strings.NewReader("a tampered binary")); err != nil {
			t.Fatal(err)
		}

		store, err := blob.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.DownloadBlob(ctx, key, store)
		if !errors.Is(err, ErrDigestMismatch) || !errors.Is(err, blob.ErrDigestMismatch) {
			t.Fatalf("DownloadBlob(corrupt) = %v, want ErrDigestMismatch", err)
		}
		t.Logf("error: %v", err)
		msg := err.Error()
		if !strings.HasPrefix(msg, "storage: digest mismatch: "+fsys.URI(p)) || !strings.Contains(msg, "expected "+key) {
			t.Fatalf("unclear error %q", msg)
		}
		if store.Has(key) {
			t.Fatal("a corrupt blob was stored locally")
		}

		// OpenBlob readers fail at the end rather than report a clean EOF.
		rc, err := s.OpenBlob(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(rc); !errors.Is(err, ErrDigestMismatch) {
			t.Fatalf("reading a corrupt blob: %v", err)
		}

		// blob.Cache (a TaskManager's) can fetch through OpenBlob.
		cache := blob.NewCache(store)
		_, err = cache.Get(ctx, key, func(ctx context.Context) (io.ReadCloser, error) { return s.OpenBlob(ctx, key) })
		if !errors.Is(err, blob.ErrDigestMismatch) {
			t.Fatalf("blob.Cache.Get(corrupt) = %v", err)
		}
	})
}

func TestStagingClusterLifecycle(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FileSystem, dir string) {
		ctx := testCtx(t)
		s := NewStaging(fsys, dir)
		if err := s.PutConfig(ctx, "cluster-1", []byte("parallelism.default: 4\n")); err != nil {
			t.Fatal(err)
		}
		if err := s.PutJobGraph(ctx, "cluster-1", []byte{0x0a, 0x03, 'j', 'o', 'b'}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutConfig(ctx, "cluster-2", []byte("a: b\n")); err != nil {
			t.Fatal(err)
		}
		key, _, err := s.PutBlob(ctx, strings.NewReader("shared binary"))
		if err != nil {
			t.Fatal(err)
		}
		cd, _ := s.ClusterDir("cluster-1")
		if cd != join(dir, ".gofl", "cluster-1") {
			t.Fatalf("ClusterDir = %s", cd)
		}
		if got := names(t, fsys, cd); strings.Join(got, ",") != "gofl.yaml,jobgraph.pb" {
			t.Fatalf("cluster dir holds %v", got)
		}
		if got, err := s.GetClusterFile(ctx, "cluster-1", ConfigFile); err != nil || string(got) != "parallelism.default: 4\n" {
			t.Fatalf("GetClusterFile = %q, %v", got, err)
		}
		if ids, err := s.ListClusters(ctx); err != nil || strings.Join(ids, ",") != "cluster-1,cluster-2" {
			t.Fatalf("ListClusters = %v, %v", ids, err)
		}
		// Something nested too, as later stagers may add.
		if _, err := WriteFileAtomic(ctx, fsys, join(cd, "lib", "extra"), strings.NewReader("x")); err != nil {
			t.Fatal(err)
		}

		for range 2 { // idempotent
			if err := s.RemoveCluster(ctx, "cluster-1"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := fsys.Stat(ctx, cd); !errors.Is(err, ErrNotFound) {
			t.Fatalf("cluster dir after RemoveCluster: %v", err)
		}
		if _, err := s.GetClusterFile(ctx, "cluster-1", ConfigFile); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetClusterFile after RemoveCluster: %v", err)
		}
		if ok, _ := s.HasBlob(ctx, key); !ok {
			t.Fatal("RemoveCluster removed a shared blob")
		}
		if ids, _ := s.ListClusters(ctx); strings.Join(ids, ",") != "cluster-2" {
			t.Fatalf("ListClusters = %v", ids)
		}
		// Archived logs outlive the cluster's staging directory, and a
		// directory of only logs is no cluster.
		cd2 := join(s.Root(), "cluster-2")
		if _, err := WriteFileAtomic(ctx, fsys, join(cd2, LogsSubdir, "jobmanager", "jobmanager.log"), strings.NewReader("log")); err != nil {
			t.Fatal(err)
		}
		if err := s.RemoveCluster(ctx, "cluster-2"); err != nil {
			t.Fatal(err)
		}
		if b, err := ReadFile(ctx, fsys, join(cd2, LogsSubdir, "jobmanager", "jobmanager.log")); err != nil || string(b) != "log" {
			t.Fatalf("archived log after RemoveCluster: %q, %v", b, err)
		}
		if _, err := s.GetClusterFile(ctx, "cluster-2", ConfigFile); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetClusterFile after RemoveCluster: %v", err)
		}
		if ids, _ := s.ListClusters(ctx); len(ids) != 0 {
			t.Fatalf("ListClusters after RemoveCluster = %v", ids)
		}

		for _, bad := range []string{"", "blobs", "..", ".hidden", "a/b", "x y", strings.Repeat("a", 129)} {
			if err := s.RemoveCluster(ctx, bad); !errors.Is(err, ErrInvalid) {
				t.Errorf("RemoveCluster(%q) = %v, want ErrInvalid", bad, err)
			}
		}
		for _, bad := range []string{"", "../x", "a/b", ".x.tmp-1"} {
			if err := s.PutClusterFile(ctx, "cluster-2", bad, strings.NewReader("")); !errors.Is(err, ErrInvalid) {
				t.Errorf("PutClusterFile(%q) = %v, want ErrInvalid", bad, err)
			}
		}
	})
}

func TestOpenStagingExpandsHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	ctx := testCtx(t)
	s, err := OpenStaging(ctx, conf.ExpandEnv(conf.StagingDir.Default()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Root() != filepath.Join(home, ".gofl") {
		t.Fatalf("Root = %s", s.Root())
	}
	if err := s.PutConfig(ctx, "c", []byte("x: y\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(home, ".gofl", "c", ConfigFile)); err != nil {
		t.Fatal(err)
	}
}

func TestStagingDelegationTokens(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FileSystem, dir string) {
		ctx := testCtx(t)
		st := NewStaging(fsys, dir)
		if _, err := st.GetDelegationTokens(ctx, "c1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("no tokens staged: %v, want ErrNotFound", err)
		}
		tok := DelegationToken{NameNode: "nn:8020", WebHDFS: "nn:9870", Token: "secret", Renewer: "gofl", Expires: time.Unix(1e9, 0)}
		if err := st.PutDelegationTokens(ctx, "c1", []DelegationToken{tok}); err != nil {
			t.Fatal(err)
		}
		got, err := st.GetDelegationTokens(ctx, "c1")
		if err != nil || len(got) != 1 || got[0].Token != "secret" || !got[0].Expires.Equal(tok.Expires) {
			t.Fatalf("staged tokens %v, %v", got, err)
		}
		if _, ok := fsys.(localFS); ok {
			p, _ := st.clusterFile("c1", DelegationTokensFile)
			if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("staged token file mode %v, %v", fi.Mode(), err)
			}
		}
	})
}

// LocalBlobPath names a staged blob on the local disk for linking, and
// nothing for HDFS or a bad key.
func TestLocalBlobPath(t *testing.T) {
	dir := t.TempDir()
	s := NewStaging(Local(), dir)
	data := []byte("a binary")
	key, _, err := s.PutBlob(testCtx(t), bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	for _, sd := range []string{dir, "file://" + dir} {
		p, ok := LocalBlobPath(sd, key)
		if !ok {
			t.Fatalf("LocalBlobPath(%s): not local", sd)
		}
		if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, data) {
			t.Errorf("LocalBlobPath(%s) = %s: %q, %v", sd, p, b, err)
		}
	}
	for _, c := range [][2]string{{"hdfs://nn:8020/user/x", key}, {dir, "sha256:nothex"}, {"relative/dir", key}} {
		if p, ok := LocalBlobPath(c[0], c[1]); ok {
			t.Errorf("LocalBlobPath(%s, %s) = %s, want none", c[0], c[1], p)
		}
	}
}

// countingReadSeeker counts the bytes read through it.
type countingReadSeeker struct {
	io.ReadSeeker
	n int64
}

func (c *countingReadSeeker) Read(b []byte) (int, error) {
	n, err := c.ReadSeeker.Read(b)
	c.n += int64(n)
	return n, err
}

// A blob of a size the cache does not hold is read once (hashed while it
// is uploaded); one of a size it holds is hashed before anything is
// written, and not written when present.
func TestPutBlobReadsANewBlobOnce(t *testing.T) {
	ctx := testCtx(t)
	s := NewStaging(Local(), t.TempDir())
	data := bytes.Repeat([]byte("new binary "), 10_000)
	r := &countingReadSeeker{ReadSeeker: bytes.NewReader(data)}
	key, written, err := s.PutBlob(ctx, r)
	if err != nil || !written || key != blob.KeyOf(data) || r.n != int64(len(data)) {
		t.Fatalf("PutBlob = %s, %v, %v after reading %d bytes; want %s written in one pass of %d", key, written, err, r.n, blob.KeyOf(data), len(data))
	}
	r = &countingReadSeeker{ReadSeeker: bytes.NewReader(data)}
	if _, written, err := s.PutBlob(ctx, r); err != nil || written || r.n != int64(len(data)) {
		t.Fatalf("again: written=%v, %v after reading %d bytes; want only hashed", written, err, r.n)
	}
	// Same size, other content: hashed, then uploaded and checked.
	other := bytes.Repeat([]byte("old binary "), 10_000)
	r = &countingReadSeeker{ReadSeeker: bytes.NewReader(other)}
	key2, written, err := s.PutBlob(ctx, r)
	if err != nil || !written || key2 != blob.KeyOf(other) || r.n != 2*int64(len(other)) {
		t.Fatalf("same size: %s, %v, %v after reading %d bytes", key2, written, err, r.n)
	}
	for _, k := range []string{key, key2} {
		p, _ := s.BlobPath(k)
		if b, err := os.ReadFile(p); err != nil || blob.KeyOf(b) != k {
			t.Errorf("blob %s: %v", k, err)
		}
	}
	ents, _ := os.ReadDir(filepath.Dir(mustBlobPath(t, s, key)))
	if len(ents) != 2 {
		t.Errorf("blob directory holds %d entries, want the 2 blobs and no temporary file", len(ents))
	}
}

func mustBlobPath(t *testing.T, s *Staging, key string) string {
	t.Helper()
	p, err := s.BlobPath(key)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
