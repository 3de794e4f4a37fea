package storage

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/storage/storagetest"
)

// The client obtains a delegation token from the Kerberized NameNode
// (WebHDFS, SPNEGO), renews it, and after cancelling it the token is
// refused.
func TestDelegationTokenLifecycle(t *testing.T) {
	k := storagetest.KerberosHDFSCluster(t)
	ctx := testCtx(t)
	opts := kerberosOptions(k, k.Keytab)
	tok, err := ObtainDelegationToken(ctx, k.NameNode, opts, "")
	if err != nil {
		t.Fatal(err)
	}
	user, _, _ := strings.Cut(k.Principal, "@")
	if tok.Token == "" || tok.Renewer != user || !tok.Expires.After(time.Now()) {
		t.Fatalf("token %v", tok)
	}
	if strings.Contains(tok.String(), tok.Token) {
		t.Fatal("String() shows the secret")
	}
	exp, err := RenewDelegationToken(ctx, tok, opts)
	if err != nil || exp.Before(tok.Expires) {
		t.Fatalf("renew: %v, %v (was %v)", exp, err, tok.Expires)
	}

	// The token file is private.
	file := filepath.Join(t.TempDir(), "tokens.json")
	if err := WriteDelegationTokens(file, []DelegationToken{tok}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, %v", st.Mode(), err)
	}
	back, err := ReadDelegationTokens(file)
	if err != nil || len(back) != 1 || back[0].Token != tok.Token || !back[0].Expires.Equal(tok.Expires) {
		t.Fatalf("read back %v, %v", back, err)
	}

	if err := CancelDelegationToken(ctx, tok, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := RenewDelegationToken(ctx, tok, opts); !errors.Is(err, ErrPermission) {
		t.Fatalf("renewing a cancelled token: %v, want ErrPermission", err)
	}
}

// openTokenHDFS obtains a delegation token from the Kerberized test HDFS
// with the user keytab and returns that cluster opened with the token
// alone (no Kerberos options), and a fresh directory in it removed at the
// end.
func openTokenHDFS(t *testing.T) (FileSystem, string) {
	t.Helper()
	k := storagetest.KerberosHDFSCluster(t)
	ctx := testCtx(t)
	_, file := obtainTokenFile(t, k)
	fsys, _, err := Open(ctx, k.NameNode+"/", Options{HadoopConfDir: k.ConfDir, DelegationTokenFile: file})
	if err != nil {
		t.Fatalf("Open with a delegation token: %v", err)
	}
	// The token goes to the NameNode's RPC port (SASL DIGEST-MD5), not
	// through WebHDFS, and the client acts as the token's owner.
	h, ok := fsys.(*hdfsFS)
	if !ok {
		t.Fatalf("Open with only a token file gave a %T", fsys)
	}
	if user, _, _ := strings.Cut(k.Principal, "@"); h.User() != user || h.krb != nil {
		t.Fatalf("User() = %q (Kerberos client %v), want %q without Kerberos", h.User(), h.krb != nil, user)
	}
	return fsys, testDir(t, fsys, "/gofl-test/token-")
}

// A token file without a token for the NameNode, or a cancelled token,
// fails Open clearly.
func TestDelegationTokenRefused(t *testing.T) {
	k := storagetest.KerberosHDFSCluster(t)
	ctx := testCtx(t)
	tok, err := ObtainDelegationToken(ctx, k.NameNode, kerberosOptions(k, k.Keytab), "")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	other := tok
	other.NameNode = "elsewhere:8020"
	if err := WriteDelegationTokens(filepath.Join(dir, "other"), []DelegationToken{other}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(ctx, k.NameNode+"/", Options{HadoopConfDir: k.ConfDir, DelegationTokenFile: filepath.Join(dir, "other")}); !errors.Is(err, ErrPermission) || !strings.Contains(err.Error(), "no token for HDFS NameNode") {
		t.Fatalf("Open without a matching token: %v", err)
	}
	if err := CancelDelegationToken(ctx, tok, kerberosOptions(k, k.Keytab)); err != nil {
		t.Fatal(err)
	}
	if err := WriteDelegationTokens(filepath.Join(dir, "cancelled"), []DelegationToken{tok}); err != nil {
		t.Fatal(err)
	}
	_, _, err = Open(ctx, k.NameNode+"/", Options{HadoopConfDir: k.ConfDir, DelegationTokenFile: filepath.Join(dir, "cancelled")})
	if !errors.Is(err, ErrPermission) || strings.Contains(err.Error(), tok.Token) {
		t.Fatalf("Open with a cancelled token: %v, want ErrPermission (and no secret in the message)", err)
	}
	t.Logf("cancelled token: %v", err)
}

// obtainTokenFile obtains a delegation token with the user keytab and
// writes it to a token file of the test's.
func obtainTokenFile(t *testing.T, k storagetest.KerberosHDFS) (DelegationToken, string) {
	t.Helper()
	tok, err := ObtainDelegationToken(testCtx(t), k.NameNode, kerberosOptions(k, k.Keytab), "")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "tokens.json")
	if err := WriteDelegationTokens(file, []DelegationToken{tok}); err != nil {
		t.Fatal(err)
	}
	return tok, file
}
