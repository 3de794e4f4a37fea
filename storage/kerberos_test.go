package storage

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/internal/blob"
	"github.com/gofl/gofl/storage/storagetest"
)

// kerberosOptions logs in to the test KDC with keytab as the test user.
func kerberosOptions(k storagetest.KerberosHDFS, keytab string) Options {
	return Options{
		HadoopConfDir: k.ConfDir,
		Kerberos:      KerberosOptions{Keytab: keytab, Principal: k.Principal, Krb5Conf: k.Krb5Conf},
	}
}

// Staging, blobs, atomic writes, listing and renames on a Kerberized HDFS
// with a user keytab: the client logs in to a real MIT KDC, authenticates
// to the NameNode with GSSAPI and to the DataNode with SASL and block
// tokens (dfs.data.transfer.protection=authentication).
func TestKerberosHDFSWithKeytab(t *testing.T) {
	k := storagetest.KerberosHDFSCluster(t)
	ctx := testCtx(t)
	user, _, _ := strings.Cut(k.Principal, "@")

	for name, uri := range map[string]string{"authority": k.NameNode + "/", "defaultFS": "hdfs:///"} {
		t.Run(name, func(t *testing.T) {
			fsys, _, err := Open(ctx, uri, kerberosOptions(k, k.Keytab))
			if err != nil {
				t.Fatalf("Open(%s) with keytab %s: %v", uri, k.Keytab, err)
			}
			defer fsys.Close()
			if got := fsys.(*hdfsFS).User(); got != user {
				t.Fatalf("User() = %q, want %q", got, user)
			}
			dir := "/gofl-test/kerberos-" + randHex(4)
			defer fsys.RemoveAll(context.Background(), dir)
			data := bytes.Repeat([]byte("kerberized "), 1000) // crosses the 1 KiB minimum block size
			if _, err := WriteFileAtomic(ctx, fsys, dir+"/a/f", bytes.NewReader(data)); err != nil {
				t.Fatal(err)
			}
			got, err := ReadFile(ctx, fsys, dir+"/a/f")
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read back %d bytes (%v), want %d", len(got), err, len(data))
			}
			st, err := fsys.Stat(ctx, dir+"/a/f")
			if err != nil || st.Owner != user {
				t.Fatalf("owner %q (%v), want the principal's short name %q", st.Owner, err, user)
			}
			if err := fsys.Rename(ctx, dir+"/a/f", dir+"/a/g"); err != nil {
				t.Fatal(err)
			}
			if got := names(t, fsys, dir+"/a"); len(got) != 1 || got[0] != "g" {
				t.Fatalf("listing %v, want [g]", got)
			}

			// Staging: cluster files and a content-addressed blob, fetched
			// into a local blob store as a TaskManager does.
			st2 := NewStaging(fsys, dir+"/staging")
			if err := st2.PutConfig(ctx, "c1", []byte("a: 1\n")); err != nil {
				t.Fatal(err)
			}
			if b, err := st2.GetClusterFile(ctx, "c1", "gofl.yaml"); err != nil || string(b) != "a: 1\n" {
				t.Fatalf("config %q, %v", b, err)
			}
			key, _, err := st2.PutBlob(ctx, bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			store, err := blob.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			local, err := st2.DownloadBlob(ctx, key, store)
			if err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(local); err != nil || !bytes.Equal(b, data) {
				t.Fatalf("downloaded blob %d bytes (%v)", len(b), err)
			}
		})
	}
}

// A stale keytab fails at Open with an error that names the principal, the
// keytab and the reason, and is not mistaken for an outage.
func TestKerberosHDFSWrongKeytabFailsClearly(t *testing.T) {
	k := storagetest.KerberosHDFSCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, _, err := Open(ctx, k.NameNode+"/", kerberosOptions(k, k.WrongKeytab))
	if err == nil {
		t.Fatal("Open with a stale keytab succeeded")
	}
	t.Logf("error: %v", err)
	if !errors.Is(err, ErrPermission) || errors.Is(err, ErrUnavailable) {
		t.Errorf("error does not wrap ErrPermission (or wraps ErrUnavailable): %v", err)
	}
	for _, want := range []string{k.Principal, k.WrongKeytab, "keytab incorrect"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q: %v", want, err)
		}
	}
}

// A client without Kerberos is told that the NameNode may want it (it
// hangs up, or answers with an error colinmarc/hdfs cannot read).
func TestKerberosHDFSWithoutKerberosFailsClearly(t *testing.T) {
	k := storagetest.KerberosHDFSCluster(t)
	_, _, err := Open(testCtx(t), k.NameNode+"/", Options{User: "gofl"})
	if err == nil || !strings.Contains(err.Error(), "security.kerberos.login.keytab") {
		t.Fatalf("Open without Kerberos = %v, want an error naming the Kerberos options", err)
	}
}
