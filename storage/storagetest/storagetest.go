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
