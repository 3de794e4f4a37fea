package client

import (
	"context"
	"fmt"
	"net/url"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/storage"
)

// stageDelegationTokens obtains HDFS delegation tokens for the cluster and
// stages them (0600), as Flink's delegation token framework does, when
// security.delegation.tokens.enabled is on, the client logs in to Kerberos
// (security.kerberos.login.keytab or .use-ticket-cache) and staging.dir or
// state.checkpoints.dir is on hdfs://: one token per NameNode, renewable
// by the logged-in user. The JobManager renews them and hands them to the
// TaskManagers in place of the Kerberos options.
func (d *ClusterDescriptor) stageDelegationTokens(ctx context.Context, st *storage.Staging, clusterID string) error {
	if !conf.DelegationTokensEnabled.Get(d.cfg) {
		return nil
	}
	opts := storage.OptionsFromConf(d.cfg)
	if opts.Kerberos.Keytab == "" && !opts.Kerberos.UseTicketCache {
		return nil
	}
	var tokens []storage.DelegationToken
	seen := map[string]bool{}
	for _, dir := range []string{conf.StagingDir.Get(d.cfg), conf.CheckpointsDir.Get(d.cfg)} {
		u, err := url.Parse(conf.ExpandEnv(dir))
		if err != nil || u.Scheme != "hdfs" || seen[u.Host] {
			continue
		}
		seen[u.Host] = true
		tok, err := storage.ObtainDelegationToken(ctx, "hdfs://"+u.Host, opts, "")
		if err != nil {
			return fmt.Errorf("client: obtaining an HDFS delegation token for %s (security.delegation.tokens.enabled): %w", u.Redacted(), err)
		}
		d.log.Info().Str("namenode", tok.NameNode).Time("expires", tok.Expires).Msg("obtained an HDFS delegation token for the cluster")
		tokens = append(tokens, tok)
	}
	if len(tokens) == 0 {
		return nil
	}
	if err := st.PutDelegationTokens(ctx, clusterID, tokens); err != nil {
		return fmt.Errorf("client: staging the HDFS delegation tokens: %w", err)
	}
	return nil
}
