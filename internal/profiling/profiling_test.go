package profiling

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestStartWritesTheRolesProfiles(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvProfileDir, dir)
	Start("taskmanager")()
	for _, kind := range []string{"cpu", "allocs"} {
		st, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%s-taskmanager-%d.pprof", kind, os.Getpid())))
		if err != nil || st.Size() == 0 {
			t.Errorf("%s profile: %v (%v)", kind, st, err)
		}
	}
}

func TestStartWithoutTheDirectoryWritesNothing(t *testing.T) {
	t.Setenv(EnvProfileDir, "")
	wd := t.TempDir()
	t.Chdir(wd)
	Start("client")()
	if ents, _ := os.ReadDir(wd); len(ents) != 0 {
		t.Fatalf("wrote %v without %s", ents, EnvProfileDir)
	}
}
