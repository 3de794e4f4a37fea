// Package zktest finds the ZooKeeper that the HA tests run against.
package zktest

import (
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// DefaultQuorum is where `make zookeeper` (scripts/zookeeper/run.sh) listens.
const DefaultQuorum = "127.0.0.1:2181"

// Quorum returns the test ZooKeeper's connect string ("host:port[,...]"):
// $GOFL_TEST_ZOOKEEPER, which scripts/zookeeper/with-zk.sh sets for `make
// test`, else DefaultQuorum. If its first server does not accept a
// connection, the test fails under CI=true (where .ci/run starts
// ZooKeeper) and skips elsewhere, so ZooKeeper tests never pass by not
// running in CI.
func Quorum(t testing.TB) string {
	t.Helper()
	quorum := strings.TrimSpace(os.Getenv("GOFL_TEST_ZOOKEEPER"))
	if quorum == "" {
		quorum = DefaultQuorum
	}
	first, _, _ := strings.Cut(quorum, ",")
	if _, _, err := net.SplitHostPort(first); err != nil {
		t.Fatalf("GOFL_TEST_ZOOKEEPER=%q: want host:port[,host:port...]", quorum)
	}
	c, err := net.DialTimeout("tcp", first, 2*time.Second)
	if err != nil {
		msg := "ZooKeeper is not reachable at " + quorum + " (" + err.Error() + "); start it with `make zookeeper` " +
			"or run the tests through scripts/zookeeper/with-zk.sh, or point GOFL_TEST_ZOOKEEPER at one"
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true, so ZooKeeper tests must run: " + msg)
		}
		t.Skip("skipping: " + msg)
	}
	c.Close()
	return quorum
}
