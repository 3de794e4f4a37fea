package jobmanager

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/storage"
)

// Staged delegation tokens become a private local file that the
// configuration (and so the TaskManagers') names; without staged tokens
// nothing changes.
func TestDeploymentLoadsStagedDelegationTokens(t *testing.T) {
	ctx := context.Background()
	st := storage.NewStaging(storage.Local(), t.TempDir())
	c := conf.NewConfiguration()
	d := &deployment{clusterID: "c1", cfg: c, staging: st, log: zerolog.Nop()}
	if err := d.loadDelegationTokens(ctx); err != nil || d.tokenDir != "" || conf.DelegationTokensFile.Get(c) != "" {
		t.Fatalf("no staged tokens: %v, dir %q", err, d.tokenDir)
	}
	tok := storage.DelegationToken{NameNode: "nn:8020", WebHDFS: "nn:9870", Token: "secret", Renewer: "gofl", Expires: time.Unix(2e9, 0)}
	if err := st.PutDelegationTokens(ctx, "c1", []storage.DelegationToken{tok}); err != nil {
		t.Fatal(err)
	}
	if err := d.loadDelegationTokens(ctx); err != nil {
		t.Fatal(err)
	}
	file := conf.DelegationTokensFile.Get(c)
	if filepath.Dir(file) != d.tokenDir {
		t.Fatalf("token file %q not in %q", file, d.tokenDir)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, %v", fi.Mode(), err)
	}
	if got, err := storage.ReadDelegationTokens(file); err != nil || len(got) != 1 || got[0].Token != "secret" {
		t.Fatalf("token file holds %v, %v", got, err)
	}
	if !storage.OptionsFromConf(c).Kerberos.UseTicketCache && storage.OptionsFromConf(c).DelegationTokenFile != file {
		t.Fatal("the storage options do not name the token file")
	}
	d.removeDelegationTokens()
	if _, err := os.Stat(d.tokenDir); !os.IsNotExist(err) {
		t.Fatalf("token dir left: %v", err)
	}
}
