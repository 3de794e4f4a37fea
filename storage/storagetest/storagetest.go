// Package storagetest finds the HDFS that tests run against.
package storagetest

import (
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// DefaultHDFS is where `make minihdfs` (scripts/minihdfs) listens.
const DefaultHDFS = "hdfs://127.0.0.1:9000"

// HDFS returns the test HDFS's URI without a trailing slash:
// $GOFL_TEST_HDFS, else DefaultHDFS. If nothing answers there the test
// fails under CI=true (where .ci/run starts MiniDFSCluster) and skips
// elsewhere, so HDFS tests never pass by not running in CI.
func HDFS(t testing.TB) string {
	t.Helper()
	uri := os.Getenv("GOFL_TEST_HDFS")
	if uri == "" {
		uri = DefaultHDFS
	}
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "hdfs" || u.Host == "" {
		t.Fatalf("GOFL_TEST_HDFS=%q: want hdfs://host:port", uri)
	}
	c, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		msg := "HDFS is not reachable at " + uri + " (" + err.Error() + "); start it with `make minihdfs` " +
			"or run the tests through scripts/minihdfs/with-hdfs.sh, or point GOFL_TEST_HDFS at one"
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true, so HDFS tests must run: " + msg)
		}
		t.Skip("skipping: " + msg)
	}
	c.Close()
	return strings.TrimSuffix(uri, "/")
}

// KerberosHDFS describes the Kerberized MiniDFSCluster and the KDC that
// scripts/minihdfs/with-kerberos-hdfs.sh starts (GOFL_TEST_HDFS_KERBEROS_*,
// GOFL_TEST_KDC_*).
type KerberosHDFS struct {
	// NameNode is the cluster's URI, hdfs://host:port.
	NameNode string
	// WebHDFS is the NameNode's HTTP address (SPNEGO), http://host:port.
	WebHDFS string
	// ConfDir holds the clients' core-site.xml and hdfs-site.xml.
	ConfDir string
	// Krb5Conf is the KDC's krb5.conf.
	Krb5Conf string
	// Realm is the KDC's realm.
	Realm string
	// Principal and Keytab are the user gofl logs in as.
	Principal, Keytab string
	// WrongKeytab holds a stale key of Principal: logging in with it fails.
	WrongKeytab string
	// OtherPrincipal and OtherKeytab are a second user (gofl-other@REALM).
	OtherPrincipal, OtherKeytab string
	// ServicePrincipal is the NameNode's principal (hdfs/localhost@REALM).
	ServicePrincipal string
}

// KerberosHDFSCluster returns the Kerberized test HDFS. If the wrapper did
// not start one (or it does not answer) the test fails under CI=true and
// skips elsewhere, as HDFS does.
func KerberosHDFSCluster(t testing.TB) KerberosHDFS {
	t.Helper()
	k := KerberosHDFS{
		NameNode:         os.Getenv("GOFL_TEST_HDFS_KERBEROS_NAMENODE"),
		WebHDFS:          os.Getenv("GOFL_TEST_HDFS_KERBEROS_WEBHDFS"),
		ConfDir:          os.Getenv("GOFL_TEST_HDFS_KERBEROS_CONF_DIR"),
		Krb5Conf:         os.Getenv("GOFL_TEST_KDC_KRB5_CONF"),
		Realm:            os.Getenv("GOFL_TEST_KDC_REALM"),
		Principal:        os.Getenv("GOFL_TEST_KDC_USER_PRINCIPAL"),
		Keytab:           os.Getenv("GOFL_TEST_KDC_USER_KEYTAB"),
		WrongKeytab:      os.Getenv("GOFL_TEST_KDC_WRONG_KEYTAB"),
		OtherPrincipal:   os.Getenv("GOFL_TEST_KDC_OTHER_PRINCIPAL"),
		OtherKeytab:      os.Getenv("GOFL_TEST_KDC_OTHER_KEYTAB"),
		ServicePrincipal: os.Getenv("GOFL_TEST_KDC_SERVICE_PRINCIPAL"),
	}
	msg := ""
	if k.NameNode == "" || k.Krb5Conf == "" || k.Keytab == "" {
		msg = "no Kerberized HDFS: GOFL_TEST_HDFS_KERBEROS_NAMENODE or GOFL_TEST_KDC_* is unset; " +
			"run the tests through scripts/minihdfs/with-kerberos-hdfs.sh (starts a KDC and the cluster)"
	} else if u, err := url.Parse(k.NameNode); err != nil || u.Scheme != "hdfs" || u.Host == "" {
		t.Fatalf("GOFL_TEST_HDFS_KERBEROS_NAMENODE=%q: want hdfs://host:port", k.NameNode)
	} else if c, err := net.DialTimeout("tcp", u.Host, 2*time.Second); err != nil {
		msg = "the Kerberized HDFS is not reachable at " + k.NameNode + " (" + err.Error() + ")"
	} else {
		c.Close()
	}
	if msg != "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true, so the Kerberos HDFS tests must run: " + msg)
		}
		t.Skip("skipping: " + msg)
	}
	k.NameNode = strings.TrimSuffix(k.NameNode, "/")
	return k
}
