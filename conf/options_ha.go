package conf

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// Values of HighAvailabilityType.
const (
	HighAvailabilityNone      = "none"
	HighAvailabilityZooKeeper = "zookeeper"
)

// High availability (ha/), with Flink's keys.
var (
	// HighAvailabilityType selects the HA services.
	HighAvailabilityType = EnumOption("high-availability.type", HighAvailabilityNone,
		[]string{HighAvailabilityNone, HighAvailabilityZooKeeper},
		"HA services: none (one JobManager at a fixed address, recovery state in memory) or zookeeper (leader election and retrieval through ZooKeeper, recovery state in high-availability.storageDir).")
	// HighAvailabilityTypeDeprecated is Flink's older key for
	// HighAvailabilityType; HighAvailability reads it when the new key is unset.
	HighAvailabilityTypeDeprecated = EnumOption("high-availability", "",
		[]string{HighAvailabilityNone, HighAvailabilityZooKeeper},
		"Deprecated: Flink's older key for high-availability.type, used only when that key is not set.")
	// HAZooKeeperQuorum is the ZooKeeper connect string.
	HAZooKeeperQuorum = StringOption("high-availability.zookeeper.quorum", "",
		"ZooKeeper servers as host:port[,host:port...]; required with high-availability.type zookeeper.")
	// HAZooKeeperRoot is the root znode of every gofl cluster.
	HAZooKeeperRoot = StringOption("high-availability.zookeeper.path.root", "/gofl",
		"Root znode under which every gofl cluster keeps its HA nodes (<root>/<cluster-id>/...).").
		WithCheck(znodePath)
	// HAClusterID separates clusters that share a ZooKeeper and storageDir.
	HAClusterID = StringOption("high-availability.cluster-id", "/default",
		"ID of the cluster under path.root and storageDir; every JobManager, TaskManager and client of one cluster must use the same.").
		WithCheck(znodePath)
	// HAStorageDir holds the recovery state ZooKeeper points to.
	HAStorageDir = StringOption("high-availability.storageDir", "",
		"Directory URI (file:// or hdfs://) for recovery state (job graphs, job results, blobs); ZooKeeper holds only pointers to it. Required with high-availability.type zookeeper.")
	// HAZooKeeperSessionTimeout is the ZooKeeper session timeout.
	HAZooKeeperSessionTimeout = DurationOption("high-availability.zookeeper.client.session-timeout", 4*time.Second,
		"ZooKeeper session timeout. A killed leader's latch node lives until its session expires, so this bounds how fast a standby takes over; shorter than Flink's 60 s so that failover stays within about 5 s, at the price of losing leadership on pauses (GC, network) longer than about 2/3 of it.").
		WithCheck(positive)
	// HAZooKeeperConnectionTimeout bounds the first connection.
	HAZooKeeperConnectionTimeout = DurationOption("high-availability.zookeeper.client.connection-timeout", 15*time.Second,
		"How long a process waits at start-up for a ZooKeeper session before it fails with an error naming the quorum.").
		WithCheck(positive)
)

// HighAvailability returns the effective HA type: high-availability.type,
// else Flink's older high-availability key, else none.
func HighAvailability(c *Configuration) string {
	if c != nil && !c.IsSet(HighAvailabilityType.Key()) {
		if old := HighAvailabilityTypeDeprecated.Get(c); old != "" {
			return old
		}
	}
	return HighAvailabilityType.Get(c)
}

// znodePath accepts "" or "/a/b" style paths ("a" is read as "/a" by the HA
// services) without empty or relative segments.
func znodePath(p string) error {
	for _, seg := range strings.Split(strings.Trim(p, "/"), "/") {
		if seg == "." || seg == ".." || (seg == "" && strings.Trim(p, "/") != "") {
			return fmt.Errorf("is not a znode path (want e.g. /gofl)")
		}
	}
	return nil
}

// haProblems are the cross-option rules of high availability.
func haProblems(c *Configuration, report func(key, msg string)) {
	if HighAvailability(c) != HighAvailabilityZooKeeper {
		return
	}
	quorum := HAZooKeeperQuorum.Get(c)
	if strings.TrimSpace(quorum) == "" {
		report(HAZooKeeperQuorum.Key(), "must be set with high-availability.type zookeeper")
	} else {
		for _, hp := range strings.Split(quorum, ",") {
			if _, _, err := net.SplitHostPort(strings.TrimSpace(hp)); err != nil {
				report(HAZooKeeperQuorum.Key(), fmt.Sprintf("%q is not host:port", strings.TrimSpace(hp)))
				break
			}
		}
	}
	dir := HAStorageDir.Get(c)
	if dir == "" {
		report(HAStorageDir.Key(), "must be set with high-availability.type zookeeper: recovery state lives there")
	} else if u, err := url.Parse(dir); err != nil || (u.Scheme != "file" && u.Scheme != "hdfs") {
		report(HAStorageDir.Key(), fmt.Sprintf("%q is not a file:// or hdfs:// URI", dir))
	}
}
