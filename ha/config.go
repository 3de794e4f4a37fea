package ha

import (
	"context"
	"fmt"
	"net"
	"path"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/storage"
)

// Config selects and configures the HA services; ConfigFromConf reads it
// from the high-availability.* options.
type Config struct {
	// Type is conf.HighAvailabilityNone or conf.HighAvailabilityZooKeeper.
	Type string
	// Quorum is the ZooKeeper connect string, "host:port[,host:port...]".
	Quorum string
	// Root and ClusterID name the cluster's znode, Root/ClusterID.
	Root, ClusterID string
	// StorageDir (file:// or hdfs://) holds the recovery state;
	// StorageDir/ClusterID is this cluster's part.
	StorageDir string
	// Storage configures the storageDir's file system client.
	Storage storage.Options
	// SessionTimeout is the ZooKeeper session timeout.
	SessionTimeout time.Duration
	// ConnectionTimeout bounds the wait for a first ZooKeeper session.
	ConnectionTimeout time.Duration
	// Addresses are the fixed leader addresses the `none` services report,
	// by component (e.g. DispatcherComponent: jobmanager.rpc.address:port).
	// A component that is missing is reported once a contender in this
	// process confirms an address, as Flink's embedded services do.
	Addresses map[string]string
	// Dialer, if set, opens ZooKeeper connections (tests put a proxy here).
	Dialer func(network, address string, timeout time.Duration) (net.Conn, error)
	// Logger receives the services' log events.
	Logger zerolog.Logger
}

// ConfigFromConf reads the high-availability.* options and the storage
// client options of c. Addresses stay empty: the caller knows them.
func ConfigFromConf(c *conf.Configuration, logger zerolog.Logger) Config {
	return Config{
		Type:              conf.HighAvailability(c),
		Quorum:            conf.HAZooKeeperQuorum.Get(c),
		Root:              conf.HAZooKeeperRoot.Get(c),
		ClusterID:         conf.HAClusterID.Get(c),
		StorageDir:        conf.HAStorageDir.Get(c),
		Storage:           storage.OptionsFromConf(c),
		SessionTimeout:    conf.HAZooKeeperSessionTimeout.Get(c),
		ConnectionTimeout: conf.HAZooKeeperConnectionTimeout.Get(c),
		Logger:            logger,
	}
}

// New builds the services cfg selects. For zookeeper it opens storageDir
// and waits up to ConnectionTimeout for a ZooKeeper session; failures name
// the quorum or the directory (ErrUnavailable, ErrInvalid or a storage
// error). The caller closes the services.
func New(ctx context.Context, cfg Config) (Services, error) {
	switch strings.ToLower(cfg.Type) {
	case "", conf.HighAvailabilityNone:
		return NewNone(cfg.Addresses), nil
	case conf.HighAvailabilityZooKeeper:
		return newZooKeeper(ctx, cfg)
	default:
		return nil, fmt.Errorf("%w: high-availability.type %q (none and zookeeper are supported)", ErrInvalid, cfg.Type)
	}
}

// clusterPath joins root and cluster id into one clean absolute path.
func clusterPath(root, clusterID string) string {
	return path.Clean("/" + strings.Trim(root, "/") + "/" + strings.Trim(clusterID, "/"))
}
