package taskmanager

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/storage"
)

// A job's runners get the job's staged tokens merged with the
// TaskManager's own (the job's win per NameNode) in a private file of the
// job's directory, in place of the TaskManager's token file and Kerberos
// login; a URI that is not the job's own token file is refused.
func TestJobTokenEnv(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	const job = "0123456789abcdef0123456789abcdef"
	own := filepath.Join(dir, "own.json")
	if err := storage.WriteDelegationTokens(own, []storage.DelegationToken{{NameNode: "nn1:8020", Token: "cluster1"}, {NameNode: "nn2:8020", Token: "cluster2"}}); err != nil {
		t.Fatal(err)
	}
	st := storage.NewStaging(storage.Local(), filepath.Join(dir, "staging"))
	if err := st.PutTokenFile(ctx, "c1", storage.JobDelegationTokensFile(job), []storage.DelegationToken{{NameNode: "nn1:8020", Token: "user1"}}); err != nil {
		t.Fatal(err)
	}
	uri, err := st.ClusterFileURI("c1", storage.JobDelegationTokensFile(job))
	if err != nil {
		t.Fatal(err)
	}
	p := &runnerPool{storage: storage.Options{DelegationTokenFile: own}}
	jobDir := filepath.Join(dir, "jobs", job)
	in := []string{"A=1", conf.DelegationTokensFile.EnvVar() + "=" + own, conf.KerberosKeytab.EnvVar() + "=/k/keytab", conf.KerberosPrincipal.EnvVar() + "=gofl"}
	env, err := p.jobTokenEnv(ctx, job, uri, jobDir, in)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(jobDir, "delegation-tokens.json")
	if want := []string{"A=1", conf.DelegationTokensFile.EnvVar() + "=" + file}; !slices.Equal(env, want) {
		t.Errorf("env %v, want %v", env, want)
	}
	if len(in) != 4 {
		t.Errorf("the pool's env was changed: %v", in)
	}
	tokens, err := storage.ReadDelegationTokens(file)
	if err != nil || len(tokens) != 2 || tokens[0].Token != "user1" || tokens[1].Token != "cluster2" {
		t.Errorf("runner tokens %v, %v; want user1 (nn1) and cluster2 (nn2)", tokens, err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("runner token file: %v %v, want 0600", fi, err)
	}
	other, _ := st.ClusterFileURI("c1", storage.DelegationTokensFile)
	if _, err := p.jobTokenEnv(ctx, job, other, jobDir, in); err == nil {
		t.Error("a job naming the cluster's token file got it")
	}
}
