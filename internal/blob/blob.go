// Package blob is a content-addressed file store: every blob is named by the
// SHA-256 of its bytes ("sha256:<hex>"). The JobManager keeps job binaries
// and other large artifacts in one (Flink's BlobServer); TaskManagers keep a
// local cache of what they fetched (Flink's BlobCache / library cache).
//
// Writes go to a temporary file and are renamed into place once the digest
// is known, so a reader never sees a partial blob; reads are verified
// against the digest, so a corrupt file is reported, never served.
package blob

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/gofl/gofl/internal/ids"
)

var (
	// ErrNotFound means no blob has that key.
	ErrNotFound = errors.New("blob: not found")
	// ErrInvalidKey means a key is not "sha256:" plus 64 lower-case hex digits.
	ErrInvalidKey = errors.New("blob: invalid key")
	// ErrDigestMismatch means stored or received bytes do not hash to their key.
	ErrDigestMismatch = errors.New("blob: digest mismatch")
)

const prefix = "sha256:"

// ParseKey validates a key (ids.BlobKey) and returns its hex digest. Keys
// come from the network, so this is the only way a key becomes a path.
func ParseKey(key string) (string, error) {
	if err := ids.BlobKey("blob key", key); err != nil {
		return "", fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	return key[len(prefix):], nil
}

// KeyOfPath is the key of the blob a path or URI names in a Store's layout
// (.../sha256/<hex>, also the staging cache's), such as a per-job cluster's
// deployment.job-binary.
func KeyOfPath(p string) (string, error) {
	key := prefix + path.Base(p)
	if _, err := ParseKey(key); err != nil {
		return "", err
	}
	return key, nil
}

// ErrQuotaExceeded is wrapped by QuotaError.
var ErrQuotaExceeded = errors.New("blob: store quota exceeded")

// QuotaError is a Put that would take the store past its total size.
type QuotaError struct {
	Used, Max int64
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("%v: %d of %d bytes in use, and the blob does not fit", ErrQuotaExceeded, e.Used, e.Max)
}

func (e *QuotaError) Unwrap() error { return ErrQuotaExceeded }

// KeyOf is the key of data.
func KeyOf(data []byte) string {
	sum := sha256.Sum256(data)
	return prefix + hex.EncodeToString(sum[:])
}

// Store keeps blobs under dir/sha256/<hex>. It is safe for concurrent use
// by several goroutines and processes: writes are atomic renames.
type Store struct {
	dir string

	mu   sync.Mutex
	used int64 // bytes of the blobs stored, as this process knows them
	max  int64 // 0: no limit
}

// Open creates the store's directory if needed and counts what it holds.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(filepath.Join(dir, "sha256"), 0o755); err != nil {
		return nil, fmt.Errorf("blob: %w", err)
	}
	s := &Store{dir: dir}
	entries, err := os.ReadDir(filepath.Join(dir, "sha256"))
	if err != nil {
		return nil, fmt.Errorf("blob: %w", err)
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
			s.used += info.Size()
		}
	}
	return s, nil
}

// SetMaxTotalSize bounds the total size of the stored blobs (0: none): a
// Put that would pass it fails with a QuotaError.
func (s *Store) SetMaxTotalSize(n int64) {
	s.mu.Lock()
	s.max = max(n, 0)
	s.mu.Unlock()
}

// Usage is the total size of the stored blobs.
func (s *Store) Usage() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// room is how many more bytes fit, or -1 for no limit.
func (s *Store) room() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max == 0 {
		return -1
	}
	return max(s.max-s.used, 0)
}

// Dir is the store's root directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) path(hexDigest string) string { return filepath.Join(s.dir, "sha256", hexDigest) }

// Path returns the file holding key, or ErrNotFound. The caller must not
// modify the file.
func (s *Store) Path(key string) (string, error) {
	h, err := ParseKey(key)
	if err != nil {
		return "", err
	}
	p := s.path(h)
	if _, err := os.Stat(p); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("%w: %s", ErrNotFound, key)
		}
		return "", fmt.Errorf("blob: %w", err)
	}
	return p, nil
}

// Has reports whether key is stored.
func (s *Store) Has(key string) bool {
	_, err := s.Path(key)
	return err == nil
}

// Put stores everything r yields, at most limit bytes (0: no limit). If
// want is not empty the content must hash to it. A blob already present is
// not written again; stored reports whether this call wrote it.
func (s *Store) Put(r io.Reader, want string, limit int64) (key string, stored bool, err error) {
	present := false // want is stored already: its bytes are checked, not counted
	if want != "" {
		h, err := ParseKey(want)
		if err != nil {
			return "", false, err
		}
		_, err = os.Stat(s.path(h))
		present = err == nil
	}
	tmp, err := os.CreateTemp(filepath.Join(s.dir, "sha256"), ".incoming-*")
	if err != nil {
		return "", false, fmt.Errorf("blob: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	h := sha256.New()
	src := r
	if limit > 0 {
		src = io.LimitReader(src, limit+1)
	}
	// Reading stops just past the room left, so an upload over the quota
	// never fills the disk even for a moment.
	room := s.room()
	if present {
		room = -1
	}
	if room >= 0 {
		src = io.LimitReader(src, room+1)
	}
	n, err := io.Copy(io.MultiWriter(tmp, h), src)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", false, fmt.Errorf("blob: writing: %w", err)
	}
	if limit > 0 && n > limit {
		return "", false, fmt.Errorf("blob: larger than the limit of %d bytes", limit)
	}
	if room >= 0 && n > room {
		return "", false, s.quotaError()
	}
	key = prefix + hex.EncodeToString(h.Sum(nil))
	if want != "" && key != want {
		return "", false, fmt.Errorf("%w: expected %s, got %s", ErrDigestMismatch, want, key)
	}
	hexDigest := key[len(prefix):]
	if _, err := os.Stat(s.path(hexDigest)); err == nil {
		return key, false, nil
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return "", false, fmt.Errorf("blob: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max > 0 && s.used+n > s.max { // another Put took the room meanwhile
		return "", false, &QuotaError{Used: s.used, Max: s.max}
	}
	if err := os.Rename(tmp.Name(), s.path(hexDigest)); err != nil {
		return "", false, fmt.Errorf("blob: %w", err)
	}
	s.used += n
	return key, true, nil
}

// Link stores the blob key by hard-linking src, a file of another
// content-addressed store on the same file system (the staging blob cache,
// another process's Store), instead of copying it: the bytes are checked
// against key, never written. They are read and hashed unless a verified
// mark (MarkWritten, or an earlier Link of that file) vouches for them, and
// then marked, so that the other processes linking the same file skip the
// read; concurrent Links of one file read it once. src must be a file
// nobody modifies in place, as the blobs of such a store are. It fails without
// storing anything if src cannot be linked here (another file system, no
// hard links: the caller copies instead), does not hash to key
// (ErrDigestMismatch) or does not fit the quota. A blob already present is
// not linked again; stored reports whether this call stored it.
func (s *Store) Link(src, key string) (stored bool, err error) {
	h, err := ParseKey(key)
	if err != nil {
		return false, err
	}
	if _, err := os.Stat(s.path(h)); err == nil {
		return false, nil
	}
	tmp, err := os.CreateTemp(filepath.Join(s.dir, "sha256"), ".linking-*")
	if err != nil {
		return false, fmt.Errorf("blob: %w", err)
	}
	name := tmp.Name()
	// The placeholder's mtime is the file system's clock before anything
	// of src is read: the stamp of the mark checkContent leaves.
	st, err := tmp.Stat()
	tmp.Close()
	if err != nil {
		os.Remove(name)
		return false, fmt.Errorf("blob: %w", err)
	}
	// Link refuses an existing name: the placeholder only reserved one.
	if err := os.Remove(name); err != nil {
		return false, fmt.Errorf("blob: %w", err)
	}
	if err := os.Link(src, name); err != nil {
		return false, fmt.Errorf("blob: linking %s: %w", src, err)
	}
	defer os.Remove(name) // a no-op once renamed
	f, err := os.Open(name)
	if err != nil {
		return false, fmt.Errorf("blob: %w", err)
	}
	n, err := checkContent(f, src, key, st.ModTime())
	f.Close()
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max > 0 && s.used+n > s.max {
		return false, &QuotaError{Used: s.used, Max: s.max}
	}
	if _, err := os.Stat(s.path(h)); err == nil {
		return false, nil // another Put or Link was first
	}
	if err := os.Rename(name, s.path(h)); err != nil {
		return false, fmt.Errorf("blob: %w", err)
	}
	s.used += n
	return true, nil
}

func (s *Store) quotaError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &QuotaError{Used: s.used, Max: s.max}
}

// remove deletes the file at p and takes its size off the usage.
func (s *Store) remove(p string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("blob: %w", err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("blob: %w", err)
	}
	s.used = max(s.used-st.Size(), 0)
	return nil
}

// Open returns a reader over the blob that fails with ErrDigestMismatch at
// EOF if the stored bytes no longer hash to the key.
func (s *Store) Open(key string) (io.ReadCloser, int64, error) {
	p, err := s.Path(key)
	if err != nil {
		return nil, 0, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, 0, fmt.Errorf("blob: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("blob: %w", err)
	}
	return &verifyingReader{f: f, h: sha256.New(), key: key}, st.Size(), nil
}

// Verify rehashes a stored blob; a corrupt one is removed so it can be
// fetched again.
func (s *Store) Verify(key string) error {
	r, _, err := s.Open(key)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, r)
	r.Close()
	if errors.Is(err, ErrDigestMismatch) {
		p, _ := s.Path(key)
		_ = s.remove(p)
	}
	return err
}

// Delete removes a blob; deleting a missing blob is not an error.
func (s *Store) Delete(key string) error {
	h, err := ParseKey(key)
	if err != nil {
		return err
	}
	return s.remove(s.path(h))
}

type verifyingReader struct {
	f   *os.File
	h   hash.Hash
	key string
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	n, err := v.f.Read(p)
	v.h.Write(p[:n])
	if err == io.EOF {
		if got := prefix + hex.EncodeToString(v.h.Sum(nil)); got != v.key {
			return n, fmt.Errorf("%w: %s holds content hashing to %s", ErrDigestMismatch, v.key, got)
		}
	}
	return n, err
}

func (v *verifyingReader) Close() error { return v.f.Close() }
