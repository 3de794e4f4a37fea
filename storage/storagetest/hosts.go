package storagetest

import (
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// HDFSHosts is the MiniDFSCluster of the locality tests, whose DataNodes
// register under distinct loopback hosts (scripts/minihdfs/with-hdfs-hosts.sh).
type HDFSHosts struct {
	// NameNode is the cluster's URI, hdfs://host:port.
	NameNode string
	// DataNodes are the hosts the DataNodes registered as (127.0.0.2, ...).
	DataNodes []string
}

// HDFSWithHosts returns the locality tests' cluster ($GOFL_TEST_HDFS_HOSTS,
// $GOFL_TEST_HDFS_HOSTS_DATANODES). If the wrapper did not start one, or it
// does not answer, the test fails under CI=true and skips elsewhere, as
// HDFS does.
func HDFSWithHosts(t testing.TB) HDFSHosts {
	t.Helper()
	h := HDFSHosts{NameNode: strings.TrimSuffix(os.Getenv("GOFL_TEST_HDFS_HOSTS"), "/")}
	for _, d := range strings.Split(os.Getenv("GOFL_TEST_HDFS_HOSTS_DATANODES"), ",") {
		if d = strings.TrimSpace(d); d != "" {
			h.DataNodes = append(h.DataNodes, d)
		}
	}
	msg := ""
	if h.NameNode == "" || len(h.DataNodes) == 0 {
		msg = "no multi-host HDFS: GOFL_TEST_HDFS_HOSTS or GOFL_TEST_HDFS_HOSTS_DATANODES is unset; " +
			"run the tests through scripts/minihdfs/with-hdfs-hosts.sh"
	} else if u, err := url.Parse(h.NameNode); err != nil || u.Scheme != "hdfs" || u.Host == "" {
		t.Fatalf("GOFL_TEST_HDFS_HOSTS=%q: want hdfs://host:port", h.NameNode)
	} else if c, err := net.DialTimeout("tcp", u.Host, 2*time.Second); err != nil {
		msg = "the multi-host HDFS is not reachable at " + h.NameNode + " (" + err.Error() + ")"
	} else {
		c.Close()
	}
	if msg != "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true, so the HDFS locality tests must run: " + msg)
		}
		t.Skip("skipping: " + msg)
	}
	return h
}
