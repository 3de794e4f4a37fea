package zktest

import (
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// Exists reports whether the znode p exists in the ZooKeeper at quorum,
// through a short-lived session of its own.
func Exists(t testing.TB, quorum, p string) bool {
	t.Helper()
	conn, _, err := zk.Connect(strings.Split(quorum, ","), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatalf("connecting to ZooKeeper %s: %v", quorum, err)
	}
	defer conn.Close()
	ok, _, err := conn.Exists(p)
	if err != nil {
		t.Fatalf("ZooKeeper %s: exists %s: %v", quorum, p, err)
	}
	return ok
}
