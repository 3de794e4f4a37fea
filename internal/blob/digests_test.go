package blob

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A digest read in the tick of the file's last change is not used.
func TestDigestCacheRacyEntry(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "job")
	if err := os.WriteFile(bin, []byte("job"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	id, _ := fileIdentity(f)
	c := DigestCache{Dir: t.TempDir()}
	key := KeyOf([]byte("job"))
	c.Record(DigestRead{path: bin, id: id, stamp: time.Unix(0, max(id.mtime, id.ctime)), ok: true}, f, key)
	if _, ok := c.Lookup(bin, f); ok {
		t.Fatal("a digest stamped in the file's last tick is used")
	}
	c.Record(DigestRead{path: bin, id: id, stamp: time.Unix(0, max(id.mtime, id.ctime)+1), ok: true}, f, key)
	if k, ok := c.Lookup(bin, f); !ok || k != key {
		t.Fatalf("lookup = %s, %v; want %s", k, ok, key)
	}
	if _, ok := c.Lookup(bin+"2", f); ok {
		t.Fatal("the digest of another path is used")
	}
}
