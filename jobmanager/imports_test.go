package jobmanager_test

import (
	"go/build"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPackageHygiene keeps the review's import rules of issue #13: the
// JobMaster and the Dispatcher import no package only for an interface or an
// assertion (the ResourceManager's gateway and sentinels live in
// resourcemanager/gateway, the failure vocabulary in failure), the
// TaskManagers and the SDK take the vocabulary from package failure, and
// no library package registers providers by a blank import (main does). It reads the packages' files with go/build: no network, no go
// command.
func TestPackageHygiene(t *testing.T) {
	const mod = "github.com/gofl/gofl/"
	forbidden := map[string][]string{
		"jobmanager/jobmaster":  {"resourcemanager", "jobmanager/failover", "providers", "providers/local", "providers/nomad"},
		"jobmanager/dispatcher": {"resourcemanager", "jobmanager/failover", "providers", "providers/local", "providers/nomad"},
		".":                     {"providers/local", "providers/nomad"},
		"jobmanager/rest":       {"providers/local", "providers/nomad"},
		// The failure vocabulary's other users import package failure, not
		// the JobMaster's restart strategies; the library registers no
		// provider itself.
		"taskmanager":        {"jobmanager/failover"},
		"taskmanager/runner": {"jobmanager/failover"},
		"stream":             {"jobmanager/failover"},
		"stream/runtime":     {"jobmanager/failover"},
		"client":             {"jobmanager/failover", "providers/local", "providers/nomad"},
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	for dir, bad := range forbidden {
		pkgDir := filepath.Join(root, "jobmanager")
		if dir != "." {
			pkgDir = filepath.Join(root, filepath.FromSlash(dir))
		}
		p, err := build.ImportDir(pkgDir, 0)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if len(p.Imports) == 0 {
			t.Fatalf("%s: no imports read; the test would pass vacuously", dir)
		}
		for _, imp := range p.Imports {
			rel, ok := strings.CutPrefix(imp, mod)
			if ok && slices.Contains(bad, rel) {
				t.Errorf("%s imports %s; issue #13 moved what it needs out (resourcemanager/gateway, failure, provider registration in main)", dir, imp)
			}
		}
	}
}
