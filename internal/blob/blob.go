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
	"path/filepath"
	"strings"
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

// ParseKey validates a key and returns its hex digest. Keys come from the
// network, so this is the only way a key becomes a path.
func ParseKey(key string) (string, error) {
	hexDigest, ok := strings.CutPrefix(key, prefix)
	if !ok || len(hexDigest) != 64 {
		return "", fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	for _, c := range hexDigest {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", fmt.Errorf("%w: %q", ErrInvalidKey, key)
		}
	}
	return hexDigest, nil
}

// KeyOf is the key of data.
func KeyOf(data []byte) string {
	sum := sha256.Sum256(data)
	return prefix + hex.EncodeToString(sum[:])
}

// Store keeps blobs under dir/sha256/<hex>. It is safe for concurrent use
// by several goroutines and processes: writes are atomic renames.
type Store struct {
	dir string
}

// Open creates the store's directory if needed.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(filepath.Join(dir, "sha256"), 0o755); err != nil {
		return nil, fmt.Errorf("blob: %w", err)
	}
	return &Store{dir: dir}, nil
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
	if want != "" {
		if _, err := ParseKey(want); err != nil {
			return "", false, err
		}
	}
	tmp, err := os.CreateTemp(filepath.Join(s.dir, "sha256"), ".incoming-*")
	if err != nil {
		return "", false, fmt.Errorf("blob: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	h := sha256.New()
	src := r
	if limit > 0 {
		src = io.LimitReader(r, limit+1)
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
	if err := os.Rename(tmp.Name(), s.path(hexDigest)); err != nil {
		return "", false, fmt.Errorf("blob: %w", err)
	}
	return key, true, nil
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
		_ = os.Remove(p)
	}
	return err
}

// Delete removes a blob; deleting a missing blob is not an error.
func (s *Store) Delete(key string) error {
	h, err := ParseKey(key)
	if err != nil {
		return err
	}
	if err := os.Remove(s.path(h)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("blob: %w", err)
	}
	return nil
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
