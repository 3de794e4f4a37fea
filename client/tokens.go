package client

import (
	"context"
	"fmt"

	"github.com/gofl/gofl/storage"
)

// stageDelegationTokens obtains HDFS delegation tokens for the cluster
// (storage.ObtainClusterTokens) and stages them (0600), as Flink's
// delegation token framework does. The JobManager renews them and hands
// them to the TaskManagers in place of the Kerberos options.
func (d *ClusterDescriptor) stageDelegationTokens(ctx context.Context, st *storage.Staging, clusterID string) error {
	tokens, err := storage.ObtainClusterTokens(ctx, d.cfg)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	for _, tok := range tokens {
		d.log.Info().Str("namenode", tok.NameNode).Time("expires", tok.Expires).Msg("obtained an HDFS delegation token for the cluster")
	}
	if len(tokens) == 0 {
		return nil
	}
	if err := st.PutDelegationTokens(ctx, clusterID, tokens); err != nil {
		return fmt.Errorf("client: staging the HDFS delegation tokens: %w", err)
	}
	return nil
}
