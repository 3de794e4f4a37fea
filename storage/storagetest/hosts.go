package storagetest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// HDFSHosts is the MiniDFSCluster of the locality tests, whose DataNodes
// register under distinct loopback hosts (scripts/minihdfs/with-hdfs-hosts.sh).
type HDFSHosts struct {
	// NameNode is the cluster's URI, hdfs://host:port.
	NameNode string
	// WebHDFS is the NameNode's HTTP address, http://host:port.
	WebHDFS string
	// DataNodes are the hosts the DataNodes registered as (127.0.0.2, ...).
	DataNodes []string
}

// HDFSWithHosts returns the locality tests' cluster ($GOFL_TEST_HDFS_HOSTS,
// $GOFL_TEST_HDFS_HOSTS_DATANODES). If the wrapper did not start one, or it
// does not answer, the test fails under CI=true and skips elsewhere, as
// HDFS does.
func HDFSWithHosts(t testing.TB) HDFSHosts {
	t.Helper()
	h := HDFSHosts{NameNode: strings.TrimSuffix(os.Getenv("GOFL_TEST_HDFS_HOSTS"), "/"),
		WebHDFS: strings.TrimSuffix(os.Getenv("GOFL_TEST_HDFS_HOSTS_WEBHDFS"), "/")}
	for _, d := range strings.Split(os.Getenv("GOFL_TEST_HDFS_HOSTS_DATANODES"), ",") {
		if d = strings.TrimSpace(d); d != "" {
			h.DataNodes = append(h.DataNodes, d)
		}
	}
	msg := ""
	if h.NameNode == "" || h.WebHDFS == "" || len(h.DataNodes) == 0 {
		msg = "no multi-host HDFS: GOFL_TEST_HDFS_HOSTS, _WEBHDFS or _DATANODES is unset; " +
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

// Create writes data to the file p (overwriting it) through WebHDFS with
// the given block size and replication, as user test: the storage layer
// writes with the cluster's defaults.
func (h HDFSHosts) Create(t testing.TB, p string, data []byte, blockSize int64, replication int) {
	t.Helper()
	u := fmt.Sprintf("%s/webhdfs/v1%s?op=CREATE&user.name=test&overwrite=true&blocksize=%d&replication=%d",
		h.WebHDFS, (&url.URL{Path: p}).EscapedPath(), blockSize, replication)
	// The NameNode redirects to a DataNode; the body goes there.
	cl := &http.Client{Timeout: 2 * time.Minute, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer cl.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodPut, u, nil)
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("WebHDFS CREATE %s: %v", p, err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusTemporaryRedirect || loc == "" {
		t.Fatalf("WebHDFS CREATE %s: HTTP %d without a redirect", p, resp.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodPut, loc, bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/octet-stream")
	if resp, err = cl.Do(req); err != nil {
		t.Fatalf("WebHDFS CREATE %s at the DataNode: %v", p, err)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("WebHDFS CREATE %s at the DataNode: HTTP %d: %s", p, resp.StatusCode, b)
	}
}

// HadoopConfDir writes a Hadoop configuration directory naming the
// cluster's WebHDFS address (dfs.namenode.http-address), which the storage
// layer needs to find it on a port other than 9870, and returns it.
func (h HDFSHosts) HadoopConfDir(t testing.TB) string {
	t.Helper()
	u, err := url.Parse(h.WebHDFS)
	if err != nil || u.Host == "" {
		t.Fatalf("GOFL_TEST_HDFS_HOSTS_WEBHDFS=%q: want http://host:port", h.WebHDFS)
	}
	dir := t.TempDir()
	xml := `<?xml version="1.0"?>
<configuration>
  <property><name>dfs.namenode.http-address</name><value>` + u.Host + `</value></property>
</configuration>
`
	if err := os.WriteFile(filepath.Join(dir, "hdfs-site.xml"), []byte(xml), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}
