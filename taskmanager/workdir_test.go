package taskmanager

import (
	"os"
	"path/filepath"
	"testing"
)

// A TaskManager without a configured work directory makes a temporary one
// and removes it when it stops; a configured one is the operator's and
// stays. Left behind, each temporary one holds the job binaries (~50 MB).
func TestTemporaryWorkDirRemovedOnStop(t *testing.T) {
	c := newCluster(t, nil, nil, Config{ResourceID: "tm-a"})
	dir := c.te.cfg.WorkDir
	if dir == "" || !c.te.tempDir {
		t.Fatalf("work dir %q (temporary: %v), want a temporary one", dir, c.te.tempDir)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("temporary work dir while running: %v", err)
	}
	c.cancel()
	if err := c.run.wait(t); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("temporary work dir %s after the stop: %v, want it gone", dir, err)
	}

	work := filepath.Join(t.TempDir(), "work")
	kept := newCluster(t, nil, nil, Config{ResourceID: "tm-b", WorkDir: work})
	kept.cancel()
	if err := kept.run.wait(t); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(work); err != nil {
		t.Fatalf("configured work dir after the stop: %v, want it kept", err)
	}
}
