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
	// own: a JobManager without a Kerberos login obtains none itself.
	toks, err := loadClusterTokens(ctx, c, st, "c1", true, zerolog.Nop())
	if err != nil || toks != nil || conf.DelegationTokensFile.Get(c) != "" {
		t.Fatalf("no staged tokens: %v, %v", err, toks)
	}
	tok := storage.DelegationToken{NameNode: "nn:8020", WebHDFS: "nn:9870", Token: "secret", Renewer: "gofl", Expires: time.Unix(2e9, 0)}
	if err := st.PutDelegationTokens(ctx, "c1", []storage.DelegationToken{tok}); err != nil {
		t.Fatal(err)
	}
	if toks, err = loadClusterTokens(ctx, c, st, "c1", false, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	file := conf.DelegationTokensFile.Get(c)
	if filepath.Dir(file) != toks.dir {
		t.Fatalf("token file %q not in %q", file, toks.dir)
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
	toks.remove()
	if _, err := os.Stat(toks.dir); !os.IsNotExist(err) {
		t.Fatalf("token dir left: %v", err)
	}
}
