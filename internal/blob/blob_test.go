package blob

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
)

func TestPutGetAndDedup(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("gofl"), 10000)
	key, stored, err := s.Put(bytes.NewReader(data), "", 0)
	if err != nil || !stored || key != KeyOf(data) {
		t.Fatalf("Put = %s, %v, %v", key, stored, err)
	}
	p, _ := s.Path(key)
	before, _ := os.Stat(p)
	key2, stored2, err := s.Put(bytes.NewReader(data), key, 0)
	if err != nil || stored2 || key2 != key {
		t.Fatalf("second Put = %s, %v, %v; want no rewrite", key2, stored2, err)
	}
	after, _ := os.Stat(p)
	if !after.ModTime().Equal(before.ModTime()) {
		t.Fatal("an unchanged blob was rewritten")
	}
	r, size, err := s.Open(key)
	if err != nil || size != int64(len(data)) {
		t.Fatalf("Open = %d, %v", size, err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
	entries, _ := os.ReadDir(s.Dir() + "/sha256")
	if len(entries) != 1 {
		t.Fatalf("store holds %d files, want only the blob (no temporary files left)", len(entries))
	}
}

func TestRejectsBadInput(t *testing.T) {
	s, _ := Open(t.TempDir())
	for _, k := range []string{"", "sha256:", "md5:abc", "sha256:../../etc/passwd", "sha256:" + strings.Repeat("A", 64), "sha256:" + strings.Repeat("0", 63)} {
		if _, err := s.Path(k); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Path(%q) = %v, want ErrInvalidKey", k, err)
		}
	}
	if _, err := s.Path(KeyOf([]byte("absent"))); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing blob: %v", err)
	}
	if _, _, err := s.Put(strings.NewReader("abc"), KeyOf([]byte("abd")), 0); !errors.Is(err, ErrDigestMismatch) {
		t.Errorf("wrong expected digest: %v", err)
	}
	if _, _, err := s.Put(strings.NewReader("0123456789"), "", 5); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("over the limit: %v", err)
	}
	if s.Has(KeyOf([]byte("abc"))) || s.Has(KeyOf([]byte("0123456789"))) {
		t.Error("a rejected upload was stored")
	}
}

func TestCorruptBlobIsDetected(t *testing.T) {
	s, _ := Open(t.TempDir())
	key, _, _ := s.Put(strings.NewReader("the real content"), "", 0)
	p, _ := s.Path(key)
	if err := os.WriteFile(p, []byte("tampered content"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, _, _ := s.Open(key)
	if _, err := io.ReadAll(r); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("reading a corrupt blob: %v", err)
	}
	r.Close()
	if err := s.Verify(key); !errors.Is(err, ErrDigestMismatch) || s.Has(key) {
		t.Fatalf("Verify = %v, still present %v; want the corrupt blob removed", err, s.Has(key))
	}
}

func TestConcurrentPutsOfTheSameBlob(t *testing.T) {
	s, _ := Open(t.TempDir())
	data := bytes.Repeat([]byte{7}, 1<<20)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, err := s.Put(bytes.NewReader(data), KeyOf(data), 0); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := s.Verify(KeyOf(data)); err != nil {
		t.Fatal(err)
	}
}

// Link stores a blob of another store without copying it (the same inode),
// after checking its bytes, and refuses one that does not hash to its key.
func TestLinkVerifiesAndShares(t *testing.T) {
	src, _ := Open(t.TempDir())
	s, _ := Open(t.TempDir())
	data := bytes.Repeat([]byte("linked"), 5000)
	key, _, err := src.Put(bytes.NewReader(data), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	sp, _ := src.Path(key)
	if stored, err := s.Link(sp, KeyOf([]byte("other"))); !errors.Is(err, ErrDigestMismatch) || stored {
		t.Fatalf("Link with the wrong key = %v, %v; want ErrDigestMismatch", stored, err)
	}
	if entries, _ := os.ReadDir(s.Dir() + "/sha256"); len(entries) != 0 {
		t.Fatalf("a refused Link left %d files", len(entries))
	}
	stored, err := s.Link(sp, key)
	if err != nil || !stored {
		t.Fatalf("Link = %v, %v", stored, err)
	}
	p, err := s.Path(key)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.Stat(sp)
	b, _ := os.Stat(p)
	if !os.SameFile(a, b) {
		t.Error("Link copied the blob instead of linking it")
	}
	if s.Usage() != int64(len(data)) {
		t.Errorf("usage %d, want %d", s.Usage(), len(data))
	}
	if stored, err := s.Link(sp, key); err != nil || stored {
		t.Errorf("second Link = %v, %v; want present, not stored", stored, err)
	}
	if err := s.Verify(key); err != nil {
		t.Error(err)
	}
	if _, err := s.Link(sp+".missing", KeyOf([]byte("x"))); err == nil {
		t.Error("Link of a missing file succeeded")
	}
}
