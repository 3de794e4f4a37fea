package taskmanager

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/storage"
)

// hadoopToken is a token in Hadoop's URL string form with password pw.
func hadoopToken(pw string) string {
	var raw []byte
	for _, f := range []string{"\x00\x04gofl\x04gofl\x00", pw, "HDFS_DELEGATION_TOKEN", "nn:8020"} {
		raw = append(append(raw, byte(len(f))), f...)
	}
	return base64.RawURLEncoding.EncodeToString(raw)
}

// The ResourceManager's tokens land 0600 in the work directory, replace
// the previous ones on the next update, and from then on are the token
// file of every new runner (without a Kerberos login) and of the
// TaskManager's own HDFS client; updates from another ResourceManager,
// before registration, or with a token that does not parse are refused
// and leave the file as it was; the log names the update count, never the
// secret.
func TestUpdateDelegationTokens(t *testing.T) {
	dir := t.TempDir()
	var logBuf strings.Builder
	te := &TaskExecutor{rm: &rmConnection{}, tokens: newDelegationTokens(dir), log: zerolog.New(&logBuf)}
	p := &runnerPool{tokens: te.tokens, env: []string{"A=1", conf.KerberosKeytab.EnvVar() + "=/k/keytab"},
		storage: storage.Options{Kerberos: storage.KerberosOptions{Keytab: "/k/keytab"}}}
	if env := p.runnerEnv(); !slices.Equal(env, p.env) {
		t.Errorf("runner env before any tokens: %v", env)
	}
	tok := func(pw string) []*pb.DelegationToken {
		return []*pb.DelegationToken{{NameNode: "nn:8020", Token: hadoopToken(pw), Renewer: "gofl", ExpiresUnixMs: 1e12}}
	}
	if err := te.updateDelegationTokens("rm1", tok("first-secret")); status.Code(err) != codes.Unavailable {
		t.Errorf("before registration: %v, want UNAVAILABLE (retried)", err)
	}
	te.rm.registered, te.rm.id = true, "rm1"
	file := filepath.Join(dir, DelegationTokensFileName)
	read := func() string {
		t.Helper()
		fi, err := os.Stat(file)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("token file %v %v, want 0600", fi, err)
		}
		tokens, err := storage.ReadDelegationTokens(file)
		if err != nil || len(tokens) != 1 {
			t.Fatalf("tokens %v, %v", tokens, err)
		}
		return tokens[0].Token
	}
	if err := te.updateDelegationTokens("rm1", tok("first-secret")); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != hadoopToken("first-secret") {
		t.Errorf("token file holds %q", got)
	}
	if want := []string{"A=1", conf.DelegationTokensFile.EnvVar() + "=" + file}; !slices.Equal(p.runnerEnv(), want) {
		t.Errorf("runner env %v, want %v", p.runnerEnv(), want)
	}
	if o := p.storageOptions(); o.DelegationTokenFile != file || o.Kerberos.Keytab != "" {
		t.Errorf("TaskManager's HDFS options %+v, want the token file and no keytab", o)
	}
	if err := te.updateDelegationTokens("rm1", tok("second-secret")); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != hadoopToken("second-secret") {
		t.Errorf("after the renewal the token file holds %q", got)
	}
	for name, bad := range map[string]struct {
		rm     string
		tokens []*pb.DelegationToken
		code   codes.Code
	}{
		"another ResourceManager": {"rm0", tok("third-secret"), codes.FailedPrecondition},
		"unparsable token":        {"rm1", []*pb.DelegationToken{{NameNode: "nn:8020", Token: "junk-secret"}}, codes.InvalidArgument},
		"no NameNode":             {"rm1", []*pb.DelegationToken{{Token: hadoopToken("third-secret")}}, codes.InvalidArgument},
		"no tokens":               {"rm1", nil, codes.InvalidArgument},
	} {
		if err := te.updateDelegationTokens(bad.rm, bad.tokens); status.Code(err) != bad.code {
			t.Errorf("%s: %v, want %v", name, err, bad.code)
		}
	}
	if got := read(); got != hadoopToken("second-secret") {
		t.Errorf("a refused update changed the file: %q", got)
	}
	logs := logBuf.String()
	if !strings.Contains(logs, `"token_updates":2`) {
		t.Errorf("no log line with the update count:\n%s", logs)
	}
	for _, secret := range []string{"first-secret", "second-secret", "junk-secret", hadoopToken("second-secret")} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log shows a secret %q:\n%s", secret, logs)
		}
	}
}
