package blob

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A verified mark lets the processes that hard-link one blob (the client
// that staged it, the JobManager, every TaskManager) read and hash it once
// between them instead of once each: whoever knows a file's content hashes
// to its key records that on the inode, which every link shares, as an
// extended attribute "<key> <size> <mtime> <stamp>" (nanoseconds). A later
// reader trusts it while the file's size and mtime are still the recorded
// ones.
//
// A write changes the mtime, but only to the file system's clock, whose
// ticks are coarse (a few ms; a second on some file systems): a write in
// the tick the content was verified in could leave it as it was. So, as
// git does for its index, a mark counts only if the mtime is older than
// stamp, a time of the same clock taken before the content was read (or
// after it was written): any write after stamp gets an mtime of stamp or
// later. A change that sets the old mtime back on purpose (touch -d) is
// not noticed; a change to another file (a new inode) has no mark.
//
// Where the file system keeps no user extended attributes, or the caller
// may not set them, nothing is marked and every reader hashes, as before.
const markAttr = "user.gofl.verified"

// marked reports whether f carries a mark that vouches for its content
// hashing to key, and f's size.
func marked(f *os.File, key string) (int64, bool) {
	st, err := f.Stat()
	if err != nil {
		return 0, false
	}
	v, ok := getAttr(f, markAttr)
	if !ok {
		return 0, false
	}
	fields := strings.Fields(v)
	if len(fields) != 4 || fields[0] != key {
		return 0, false
	}
	var n [3]int64
	for i := range n {
		if n[i], err = strconv.ParseInt(fields[i+1], 10, 64); err != nil {
			return 0, false
		}
	}
	size, mtime, stamp := n[0], n[1], n[2]
	mt := st.ModTime().UnixNano()
	return size, size == st.Size() && mtime == mt && mt < stamp
}

// mark records on f that its content hashes to key, as known at stamp
// (see markAttr), unless f changed in stamp's tick or later. Best effort.
func mark(f *os.File, key string, stamp time.Time) {
	st, err := f.Stat()
	if err != nil || !st.ModTime().Before(stamp) {
		return
	}
	setAttr(f, markAttr, fmt.Sprintf("%s %d %d %d", key, st.Size(), st.ModTime().UnixNano(), stamp.UnixNano()))
}

// FileSystemNow is the clock of dir's file system now: the mtime of a
// file created there (named as a temporary file, which listings of the
// staging cache skip, and removed). Coarse: see markAttr.
func FileSystemNow(dir string) (time.Time, error) {
	f, err := os.CreateTemp(dir, ".stamp.tmp-*")
	if err != nil {
		return time.Time{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return time.Time{}, err
	}
	return st.ModTime(), nil
}

// MarkWritten records on the file at p that its content hashes to key,
// for the processes that link it later (Store.Link): its writer calls it
// once every byte is written, with the digest of what it wrote. A write
// by anyone else before the call, in the tick of the writer's last one,
// would not be noticed: p must be a file only its writer writes, such as
// a temporary file renamed into a store once marked. Best effort: an
// error only means the next reader hashes it.
func MarkWritten(p, key string) {
	stamp, err := FileSystemNow(filepath.Dir(p))
	if err != nil {
		return
	}
	f, err := os.Open(p)
	if err != nil {
		return
	}
	defer f.Close()
	mark(f, key, stamp)
}

// checkContent returns the size of f once it knows f's content hashes to
// key: from a mark, else by reading and hashing all of it, after which it
// marks f. stamp is a time of f's file system's clock taken before the
// call (FileSystemNow). It holds an exclusive lock on f's inode meanwhile, so
// that processes checking one file at the same time read it once: the
// first hashes and marks it, the others wait and find the mark.
func checkContent(f *os.File, src, key string, stamp time.Time) (int64, error) {
	unlock := lockFile(f)
	defer unlock()
	if n, ok := marked(f, key); ok {
		return n, nil
	}
	d := sha256.New()
	n, err := io.Copy(d, f)
	if err != nil {
		return 0, fmt.Errorf("blob: reading %s: %w", src, err)
	}
	if got := prefix + hex.EncodeToString(d.Sum(nil)); got != key {
		return 0, fmt.Errorf("%w: %s holds content hashing to %s, not %s", ErrDigestMismatch, src, got, key)
	}
	mark(f, key, stamp)
	return n, nil
}
