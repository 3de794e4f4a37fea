package blob

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseKey: a key that parses names a file directly in the store's
// sha256 directory, and its digest round-trips.
func FuzzParseKey(f *testing.F) {
	f.Add("sha256:" + strings.Repeat("ab", 32))
	f.Add("sha256:../../x")
	f.Add("sha256:" + strings.Repeat("AB", 32))
	f.Add("")
	s := &Store{dir: f.TempDir()}
	f.Fuzz(func(t *testing.T, key string) {
		h, err := ParseKey(key)
		if err != nil {
			return
		}
		if "sha256:"+h != key {
			t.Fatalf("ParseKey(%q) = %q", key, h)
		}
		if p := s.path(h); filepath.Dir(p) != filepath.Join(s.dir, "sha256") {
			t.Fatalf("key %q maps to %q, outside the store", key, p)
		}
	})
}
