package storage

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofl/gofl/internal/blob"
)

// digestCache remembers the digest of the local files a client staged
// (the job binary, gofl), so that staging an unchanged file again reads
// nothing: tens of MB hashed on every run otherwise. An entry, one per
// file path under dir, holds the file's stat identity (device, inode,
// size, mtime and ctime, which nobody can set back: git's index keys its
// entries the same way) and a stamp of the file system's clock taken
// before the file was read. As for blob's verified marks, an entry counts
// only if the file's mtime and ctime are older than its stamp: a write in
// the tick the file was read in could leave both as they were.
type digestCache struct{ dir string }

// entry is where the digest of the file at p is kept.
func (c digestCache) entry(p string) string {
	sum := sha256.Sum256([]byte(p))
	return filepath.Join(c.dir, hex.EncodeToString(sum[:12]))
}

// lookup returns the remembered digest of f, opened from p, if f is
// unchanged since.
func (c digestCache) lookup(p string, f *os.File) (string, bool) {
	id, ok := fileIdentity(f)
	if !ok {
		return "", false
	}
	b, err := os.ReadFile(c.entry(p))
	if err != nil {
		return "", false
	}
	var stamp int64
	var got, key string
	fields := strings.Fields(string(b))
	if len(fields) != 3 {
		return "", false
	}
	got, key = fields[0], fields[2]
	if _, err := fmt.Sscan(fields[1], &stamp); err != nil || got != id.String() || !id.olderThan(stamp) {
		return "", false
	}
	return key, true
}

// now is the stamp for a file about to be read: the clock of the cache's
// file system, which is the file's clock where both are on this host.
func (c digestCache) now() (time.Time, bool) {
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return time.Time{}, false
	}
	t, err := blob.FileSystemNow(c.dir)
	return t, err == nil
}

// record remembers key as the digest of f, opened from p and read after
// stamp (now), if f is the file it was (before) and older than stamp.
// Best effort.
func (c digestCache) record(p string, f *os.File, before identity, stamp time.Time, key string) {
	id, ok := fileIdentity(f)
	if !ok || id != before || !id.olderThan(stamp.UnixNano()) {
		return
	}
	// Renamed into place: a concurrent client reads a whole entry or none.
	tmp, err := os.CreateTemp(c.dir, ".entry.tmp-*")
	if err != nil {
		return
	}
	_, err = fmt.Fprintf(tmp, "%s %d %s\n", id, stamp.UnixNano(), key)
	if cerr := tmp.Close(); err == nil && cerr == nil {
		err = os.Rename(tmp.Name(), c.entry(p))
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
}

// identity is what tells a changed file: stat's device, inode, size,
// mtime and ctime (nanoseconds).
type identity struct {
	dev, ino           uint64
	size, mtime, ctime int64
}

func (id identity) String() string {
	return fmt.Sprintf("%x:%x:%d:%d:%d", id.dev, id.ino, id.size, id.mtime, id.ctime)
}

// olderThan reports whether the file's last change precedes stamp.
func (id identity) olderThan(stamp int64) bool { return id.mtime < stamp && id.ctime < stamp }
