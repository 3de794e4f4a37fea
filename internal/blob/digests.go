package blob

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DigestCache remembers the digests of local files a client stages or
// uploads (the job binary, gofl), so that sending an unchanged file again
// reads nothing: tens of MB hashed on every run otherwise. An entry, one
// per file path under Dir, holds the file's stat identity (device, inode,
// size, mtime and ctime, which nobody can set back: git's index keys its
// entries the same way) and a stamp of the file system's clock taken
// before the file was read. As for the verified marks, an entry counts
// only if the file's mtime and ctime are older than its stamp: a write in
// the tick the file was read in could leave both as they were. Outside
// Linux nothing is remembered. Safe for concurrent use by processes.
type DigestCache struct{ Dir string }

// DigestRead is what Record needs of a read of a file: its identity and
// the clock before the read (StartRead).
type DigestRead struct {
	path  string
	id    identity
	stamp time.Time
	ok    bool
}

// StartRead is called before f, opened from p, is read to hash it.
func (c DigestCache) StartRead(p string, f *os.File) DigestRead {
	id, ok := fileIdentity(f)
	stamp, sok := c.now()
	return DigestRead{path: p, id: id, stamp: stamp, ok: ok && sok}
}

// entry is where the digest of the file at p is kept.
func (c DigestCache) entry(p string) string {
	sum := sha256.Sum256([]byte(p))
	return filepath.Join(c.Dir, hex.EncodeToString(sum[:12]))
}

// Lookup returns the remembered digest (a blob key) of f, opened from p,
// if f is unchanged since it was recorded.
func (c DigestCache) Lookup(p string, f *os.File) (string, bool) {
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
func (c DigestCache) now() (time.Time, bool) {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return time.Time{}, false
	}
	t, err := FileSystemNow(c.Dir)
	return t, err == nil
}

// Record remembers key as the digest of f, read since r; best effort, and
// nothing when f changed meanwhile or in the stamp's tick.
func (c DigestCache) Record(r DigestRead, f *os.File, key string) {
	id, ok := fileIdentity(f)
	if !r.ok || !ok || id != r.id || !id.olderThan(r.stamp.UnixNano()) {
		return
	}
	// Renamed into place: a concurrent client reads a whole entry or none.
	tmp, err := os.CreateTemp(c.Dir, ".entry.tmp-*")
	if err != nil {
		return
	}
	_, err = fmt.Fprintf(tmp, "%s %d %s\n", id, r.stamp.UnixNano(), key)
	if cerr := tmp.Close(); err == nil && cerr == nil {
		err = os.Rename(tmp.Name(), c.entry(r.path))
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
