package ids

import (
	"path/filepath"
	"strings"
	"testing"
)

// FuzzIdentifiers: no input panics a check, and whatever a check accepts
// is a single path element that Join keeps inside its base.
func FuzzIdentifiers(f *testing.F) {
	for _, s := range []string{"0123456789abcdef0123456789abcdef", "../../../../tmp/x", "src", "r[1]@a", "a>b",
		BlobKeyPrefix + strings.Repeat("0", 64), "session-01ab", "runner.log", "..", ".", "", "a/b", "a\x00b", "\u2215"} {
		f.Add(s)
	}
	base := f.TempDir()
	f.Fuzz(func(t *testing.T, s string) {
		checks := map[string]func(string, string) error{
			"job id": JobID, "name": Name, "result id": ResultID, "cluster id": ClusterID, "file name": FileName,
		}
		for name, check := range checks {
			if check(name, s) != nil {
				continue
			}
			p, err := Join(base, "jobs", s)
			if err != nil {
				t.Fatalf("%s %q accepted but Join refuses it: %v", name, s, err)
			}
			if filepath.Dir(p) != filepath.Join(base, "jobs") {
				t.Fatalf("%s %q accepted but joins to %q, not one element under %s", name, s, p, base)
			}
		}
		if BlobKey("k", s) == nil && JobID("j", s) == nil {
			t.Fatalf("%q is both a blob key and a job id", s)
		}
		// Join never leaves base, whatever it is given.
		if p, err := Join(base, s); err == nil {
			if rel, rerr := filepath.Rel(base, p); rerr != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				t.Fatalf("Join(%q) = %q, outside %s", s, p, base)
			}
		}
	})
}
