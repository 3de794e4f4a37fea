package conf

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestHighAvailabilityDefaults(t *testing.T) {
	cfg := NewConfiguration()
	if got := HighAvailability(cfg); got != HighAvailabilityNone {
		t.Errorf("HighAvailability = %q", got)
	}
	if HAZooKeeperRoot.Get(cfg) != "/gofl" || HAClusterID.Get(cfg) != "/default" {
		t.Errorf("root %q, cluster-id %q", HAZooKeeperRoot.Get(cfg), HAClusterID.Get(cfg))
	}
	if HAZooKeeperSessionTimeout.Get(cfg) != 4*time.Second || HAZooKeeperConnectionTimeout.Get(cfg) != 15*time.Second {
		t.Errorf("timeouts %v %v", HAZooKeeperSessionTimeout.Get(cfg), HAZooKeeperConnectionTimeout.Get(cfg))
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate = %v", err)
	}
}

func TestHighAvailabilityTypeValues(t *testing.T) {
	cfg := NewConfiguration()
	if err := cfg.Set("high-availability.type", "ZOOKEEPER", CodeSource); err != nil {
		t.Fatal(err)
	}
	if got := HighAvailability(cfg); got != HighAvailabilityZooKeeper {
		t.Errorf("HighAvailability = %q", got)
	}
	err := cfg.Set("high-availability.type", "kubernetes", DynamicSource)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"kubernetes" is not one of none, zookeeper`) {
		t.Errorf("kubernetes: %v", err)
	}
}

func TestHighAvailabilityDeprecatedKey(t *testing.T) {
	cfg := NewConfiguration()
	if err := cfg.Set("high-availability", "zookeeper", CodeSource); err != nil {
		t.Fatal(err)
	}
	if got := HighAvailability(cfg); got != HighAvailabilityZooKeeper {
		t.Errorf("old key alone: %q", got)
	}
	if err := HighAvailabilityType.Set(cfg, HighAvailabilityNone); err != nil {
		t.Fatal(err)
	}
	if got := HighAvailability(cfg); got != HighAvailabilityNone {
		t.Errorf("new key must win: %q", got)
	}
}

func TestHighAvailabilityZooKeeperNeedsQuorumAndStorageDir(t *testing.T) {
	cfg := NewConfiguration()
	_ = HighAvailabilityType.Set(cfg, HighAvailabilityZooKeeper)
	err := cfg.Validate()
	for _, want := range []string{"high-availability.zookeeper.quorum: must be set", "high-availability.storageDir: must be set"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v; want %q", err, want)
		}
	}
	_ = HAZooKeeperQuorum.Set(cfg, "zk1:2181,zk2")
	_ = HAStorageDir.Set(cfg, "s3://bucket/ha")
	err = cfg.Validate()
	for _, want := range []string{`"zk2" is not host:port`, `"s3://bucket/ha" is not a file:// or hdfs:// URI`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v; want %q", err, want)
		}
	}
	_ = HAZooKeeperQuorum.Set(cfg, "zk1:2181, zk2:2181")
	_ = HAStorageDir.Set(cfg, "hdfs://nn:9000/gofl/ha")
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate = %v", err)
	}
}

func TestHAPathsAreZnodePaths(t *testing.T) {
	for _, ok := range []string{"/gofl", "gofl", "/a/b", "/", ""} {
		if _, err := HAClusterID.Parse(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"/a//b", "/a/../b", "./x"} {
		if _, err := HAZooKeeperRoot.Parse(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestJobManagerAttemptsOf(t *testing.T) {
	for _, tc := range []struct {
		settings map[string]string
		want     int
	}{
		{map[string]string{}, 1},
		{map[string]string{"high-availability.type": "NONE"}, 1},
		{map[string]string{"high-availability.type": "zookeeper", "jobmanager.rpc.port": "${NOMAD_PORT_rpc}"}, 2},
		{map[string]string{"high-availability": "zookeeper"}, 2},
		{map[string]string{"high-availability.type": "zookeeper", "provider.local.jobmanager.attempts": "5"}, 5},
		{map[string]string{"provider.local.jobmanager.attempts": "0"}, 1},
	} {
		if got, err := JobManagerAttemptsOf(tc.settings, LocalJobManagerAttempts); err != nil || got != tc.want {
			t.Errorf("JobManagerAttemptsOf(%v) = %d, %v; want %d", tc.settings, got, err, tc.want)
		}
	}
	if _, err := JobManagerAttemptsOf(map[string]string{"provider.local.jobmanager.attempts": "x"}, LocalJobManagerAttempts); err == nil {
		t.Error("a bad value passed")
	}
}
