package blob

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// markedBlob is a blob of a source store written an hour ago (older than
// any stamp, so its mark is never racy), with its path and mtime.
func markedBlob(t *testing.T, data []byte) (key, path string, mtime time.Time) {
	t.Helper()
	src, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	key, _, err = src.Put(bytes.NewReader(data), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	path, _ = src.Path(key)
	mtime = time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	return key, path, mtime
}

// isMarked reports whether the file at p carries a mark vouching for key.
func isMarked(t *testing.T, p, key string) bool {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, ok := marked(f, key)
	return ok
}

func newStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A Link that read a blob marks it, and the next Link of that file (the
// next process's) trusts the mark instead of reading it again. A blob
// changed after its mark is read again and refused; one whose change set
// its old mtime back is not noticed (the limit of a mark).
func TestLinkMarksWhatItVerified(t *testing.T) {
	data := bytes.Repeat([]byte("marked"), 5000)
	key, sp, mtime := markedBlob(t, data)
	if _, err := newStore(t).Link(sp, key); err != nil {
		t.Fatal(err)
	}
	if !isMarked(t, sp, key) {
		if v, ok := getAttr(mustOpen(t, sp), markAttr); !ok {
			t.Skipf("no user extended attributes on %s: nothing is marked (%q)", filepath.Dir(sp), v)
		}
		t.Fatal("a verified blob is not marked")
	}
	if isMarked(t, sp, KeyOf([]byte("other"))) {
		t.Fatal("the mark vouches for another key")
	}

	// Changed after the mark (same size, a new mtime): read and refused.
	bad := bytes.Repeat([]byte("MARKED"), 5000)
	if err := os.WriteFile(sp, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if isMarked(t, sp, key) {
		t.Fatal("a blob changed after its mark is still marked")
	}
	s := newStore(t)
	if stored, err := s.Link(sp, key); !errors.Is(err, ErrDigestMismatch) || stored {
		t.Fatalf("Link of a blob changed after its mark = %v, %v; want ErrDigestMismatch", stored, err)
	}
	if s.Has(key) {
		t.Fatal("the changed blob was stored")
	}

	// Its mtime set back: the mark vouches again, and Link does not read it.
	if err := os.Chtimes(sp, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if stored, err := s.Link(sp, key); err != nil || !stored {
		t.Fatalf("Link of a marked blob = %v, %v; want it trusted", stored, err)
	}
}

// A mark made in the tick of the file's last change is not trusted: a
// write in the same tick could have left the mtime as it was.
func TestRacyMarkIsNotTrusted(t *testing.T) {
	data := bytes.Repeat([]byte("racy"), 5000)
	key, sp, mtime := markedBlob(t, data)
	f := mustOpen(t, sp)
	mark(f, key, mtime) // stamped in the mtime's own tick
	if _, ok := marked(f, key); ok {
		t.Fatal("a mark stamped at the file's mtime is trusted")
	}
	mark(f, key, mtime.Add(time.Millisecond))
	if _, ok := marked(f, key); !ok {
		if _, ok := getAttr(f, markAttr); !ok {
			t.Skip("no user extended attributes here")
		}
		t.Fatal("a mark stamped after the file's mtime is not trusted")
	}
}

// The writer of a blob marks it (MarkWritten) so that not even the first
// Link reads it; concurrent Links of one file all get it.
func TestMarkWrittenAndConcurrentLinks(t *testing.T) {
	data := bytes.Repeat([]byte("written"), 5000)
	key, sp, _ := markedBlob(t, data)
	MarkWritten(sp, key)
	if !isMarked(t, sp, key) {
		if _, ok := getAttr(mustOpen(t, sp), markAttr); !ok {
			t.Skip("no user extended attributes here")
		}
		t.Fatal("MarkWritten left no mark")
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		s := newStore(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Link(sp, key); err != nil {
				errs[i] = err
				return
			}
			errs[i] = s.Verify(key)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func mustOpen(t *testing.T, p string) *os.File {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
