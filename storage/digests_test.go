package storage

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/internal/blob"
)

// readBytes is how many bytes this process read so far (rchar).
func readBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no /proc/self/io: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "rchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Skip("no rchar in /proc/self/io")
	return 0
}

// writeSettled writes data to p and waits until the file system's clock
// passed the file's last change, as it has for a binary built earlier: a
// digest read in the tick of the change is not remembered.
func writeSettled(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.WriteFile(p, data, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	id, ok := fileIdentity(f)
	if !ok {
		t.Skip("no stat identity on this platform: no digest cache")
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		now, err := blob.FileSystemNow(filepath.Dir(p))
		if err != nil {
			t.Fatal(err)
		}
		if id.olderThan(now.UnixNano()) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the file system's clock did not move past the file's change")
		}
	}
}

// Staging an unchanged local file again reads nothing: its digest is
// remembered with its stat identity. A changed file (same size, same
// path) is read again and staged under its new key.
func TestPutBlobFileRemembersDigests(t *testing.T) {
	ctx := testCtx(t)
	s := NewStaging(Local(), t.TempDir())
	bin := filepath.Join(t.TempDir(), "job")
	data := bytes.Repeat([]byte("job binary "), 100_000)
	writeSettled(t, bin, data)
	key, written, err := s.PutBlobFile(ctx, bin)
	if err != nil || !written || key != blob.KeyOf(data) {
		t.Fatalf("PutBlobFile = %s, %v, %v; want %s written", key, written, err, blob.KeyOf(data))
	}
	before := readBytes(t)
	if k, written, err := s.PutBlobFile(ctx, bin); err != nil || written || k != key {
		t.Fatalf("again: %s, %v, %v; want %s present", k, written, err, key)
	}
	if n := readBytes(t) - before; n >= int64(len(data)) {
		t.Fatalf("staging an unchanged file again read %d bytes", n)
	}

	other := bytes.Repeat([]byte("JOB BINARY "), 100_000)
	if err := os.WriteFile(bin, other, 0o755); err != nil { // no wait: changed in the stamp's tick or later
		t.Fatal(err)
	}
	if k, written, err := s.PutBlobFile(ctx, bin); err != nil || !written || k != blob.KeyOf(other) {
		t.Fatalf("after a change: %s, %v, %v; want %s written", k, written, err, blob.KeyOf(other))
	}
}

// A digest read in the tick of the file's last change is not used.
func TestDigestCacheRacyEntry(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "job")
	writeSettled(t, bin, []byte("job"))
	f, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	id, _ := fileIdentity(f)
	c := digestCache{dir: t.TempDir()}
	key := blob.KeyOf([]byte("job"))
	c.record(bin, f, id, time.Unix(0, max(id.mtime, id.ctime)), key)
	if _, ok := c.lookup(bin, f); ok {
		t.Fatal("a digest stamped in the file's last tick is used")
	}
	c.record(bin, f, id, time.Unix(0, max(id.mtime, id.ctime)+1), key)
	if k, ok := c.lookup(bin, f); !ok || k != key {
		t.Fatalf("lookup = %s, %v; want %s", k, ok, key)
	}
	if _, ok := c.lookup(bin+"2", f); ok {
		t.Fatal("the digest of another path is used")
	}
}
