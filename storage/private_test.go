package storage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStagedConfigIsPrivate: the configuration snapshot (it may hold the
// REST token) and other secrets are staged readable by their owner only.
func TestStagedConfigIsPrivate(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	s := NewStaging(Local(), dir)
	if err := s.PutConfig(ctx, "c", []byte("rest.authentication.token: s3cret\n")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutClusterSecretFile(ctx, "c", "key.pem", strings.NewReader("KEY")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ConfigFile, "key.pem"} {
		st, err := os.Stat(filepath.Join(s.Root(), "c", name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v, want 0600", name, st.Mode().Perm())
		}
	}
	if _, err := WriteFilePrivate(ctx, &noChmodFS{Local()}, filepath.Join(dir, "x"), strings.NewReader("k")); err == nil {
		t.Fatal("a secret was written to a file system that cannot restrict its permissions")
	}
}

type noChmodFS struct{ FileSystem }
