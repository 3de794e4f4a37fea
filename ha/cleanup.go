package ha

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
)

// CleanupClusterData removes everything high availability kept for the
// cluster cfg names (Flink's HighAvailabilityServices.cleanupAllData):
// the znode <path.root>/<cluster-id> with all below it, and
// <storageDir>/<cluster-id>. For a cluster that is over for good: its
// provider ran out of JobManager attempts, or `session stop` removes it.
// No JobManager of the cluster may run any more (a live one's latch is an
// ephemeral node it keeps). With type none there is nothing to remove.
// Idempotent; blocks on ZooKeeper and storage.
func CleanupClusterData(ctx context.Context, cfg Config) error {
	if !strings.EqualFold(cfg.Type, conf.HighAvailabilityZooKeeper) {
		return nil
	}
	if strings.Trim(cfg.ClusterID, "/") == "" {
		// Root/"" would be every cluster's data.
		return fmt.Errorf("%w: no high-availability.cluster-id; not removing the whole of %s", ErrInvalid, cfg.Root)
	}
	svc, err := newZooKeeper(ctx, cfg)
	if err != nil {
		return err
	}
	s := svc.(*zkServices)
	defer s.Close()
	zerr := s.deleteTree(s.base)
	ferr := s.fs.RemoveAll(ctx, s.fsBase)
	if ferr != nil {
		ferr = fmt.Errorf("ha: removing %s: %w", s.fs.URI(s.fsBase), ferr)
	}
	if err := errors.Join(zerr, ferr); err != nil {
		return err
	}
	s.log.Info().Str("znode", s.base).Str("storageDir", s.fs.URI(s.fsBase)).Msg("ha: the cluster's data removed")
	return nil
}

// CleanupFailedCluster is CleanupClusterData for a provider removing a
// failed cluster, given the settings (key to value) its JobManager ran
// with: settings without high availability have nothing to remove, and
// errors are logged, not returned (the cluster goes anyway). Blocks up to
// timeout.
func CleanupFailedCluster(settings map[string]string, timeout time.Duration, log zerolog.Logger) {
	c, err := conf.FromMap(settings)
	if err != nil {
		log.Warn().Err(err).Msg("the cluster's JobManager configuration; its HA data (if any) stays")
		return
	}
	if conf.HighAvailability(c) == conf.HighAvailabilityNone {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cfg := ConfigFromConf(c, log)
	if err := CleanupClusterData(ctx, cfg); err != nil {
		log.Warn().Err(err).Str("ha_cluster_id", cfg.ClusterID).Msg("removing the failed cluster's HA data; remove it by hand")
		return
	}
	log.Info().Str("ha_cluster_id", cfg.ClusterID).Msg("the failed cluster's HA data removed")
}

// deleteTree deletes the znode p and everything below it; a missing node
// is no error.
func (s *zkServices) deleteTree(p string) error {
	children, _, err := s.conn.Children(p)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return s.zkErr("children", p, err)
	}
	for _, c := range children {
		if err := s.deleteTree(p + "/" + c); err != nil {
			return err
		}
	}
	if err := s.conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return s.zkErr("delete", p, err)
	}
	return nil
}
