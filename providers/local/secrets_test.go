package local

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/providers"
)

// A JobManager started by hand with a password in its configuration (no
// secrets file) gives its TaskManagers a private secrets file of their
// own; their command-line configuration holds no password.
func TestWorkerDriverWritesOwnSecretsFile(t *testing.T) {
	dir := t.TempDir()
	cfg := map[string]string{conf.SSLInternalKeystorePassword.Key(): "ks-pw-123", conf.SSLInternalEnabled.Key(): "true"}
	if err := writeOwnSecrets(dir, cfg); err != nil {
		t.Fatal(err)
	}
	file := cfg[conf.DeploymentSecretsFile.Key()]
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 || filepath.Dir(file) != dir {
		t.Fatalf("secrets file %q: %v %v", file, st, err)
	}
	b, _ := os.ReadFile(file)
	c := conf.NewConfiguration()
	if err := conf.ApplySecrets(c, file, b); err != nil || conf.SSLInternalKeystorePassword.Get(c) != "ks-pw-123" {
		t.Fatalf("read back: %v", err)
	}
	tm := providers.TaskManagerConfig(cfg, "127.0.0.1", "1", 1, "tm-1")
	if _, ok := tm[conf.SSLInternalKeystorePassword.Key()]; ok || tm[conf.DeploymentSecretsFile.Key()] != file {
		t.Fatalf("TaskManager config %v", tm)
	}

	// With a secrets file already (a deployed cluster's), none is written.
	cfg2 := map[string]string{conf.SSLInternalKeystorePassword.Key(): "x", conf.DeploymentSecretsFile.Key(): "file:///staged"}
	if err := writeOwnSecrets(t.TempDir(), cfg2); err != nil || cfg2[conf.DeploymentSecretsFile.Key()] != "file:///staged" {
		t.Fatalf("%v %v", err, cfg2)
	}
}
