package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/rpc/restapi"
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

// JobManagerConfig is GET /jobmanager/config: the options set on the
// cluster away from their defaults (secrets masked).
func (c *Client) JobManagerConfig(ctx context.Context) ([]restapi.ConfigEntry, error) {
	var out []restapi.ConfigEntry
	return out, c.do(ctx, http.MethodGet, "/jobmanager/config", "", nil, &out)
}

// AttachJobTokens obtains HDFS delegation tokens for a job submitted to
// the session cl names, with the Kerberos login of cfg (its user's, not
// the session's), and puts them in the job's configuration
// (restapi.JobConfigDelegationTokens), so the job's tasks act as this
// user: the session JobManager stages them 0600, renews them while the
// job runs (they name its user as renewer) and cancels them at its end.
// Nothing without a Kerberos login or with security.delegation.tokens.enabled
// off. Blocking; a failed login fails with the principal and keytab named.
func AttachJobTokens(ctx context.Context, cfg *conf.Configuration, cl *Client, jg *jobgraph.JobGraph, log zerolog.Logger) error {
	opts := storage.OptionsFromConf(cfg)
	if !conf.DelegationTokensEnabled.Get(cfg) || opts.Kerberos.Keytab == "" && !opts.Kerberos.UseTicketCache {
		return nil
	}
	// The session's JobManager renews them: its user is their renewer.
	renewer := ""
	entries, err := cl.JobManagerConfig(ctx)
	if err != nil {
		return fmt.Errorf("client: the session's configuration (for the renewer of the job's delegation tokens): %w", err)
	}
	for _, e := range entries {
		if e.Key == conf.KerberosPrincipal.Key() && e.Value != "" {
			renewer = storage.ShortName(e.Value)
		}
	}
	tokens, err := storage.ObtainTokens(ctx, cfg, renewer)
	if err != nil {
		return fmt.Errorf("client: the job's delegation tokens: %w", err)
	}
	if len(tokens) == 0 {
		return nil
	}
	b, err := json.Marshal(tokens)
	if err != nil {
		return err
	}
	if jg.Config == nil {
		jg.Config = map[string]string{}
	}
	jg.Config[restapi.JobConfigDelegationTokens] = string(b)
	for _, t := range tokens {
		log.Info().Str("namenode", t.NameNode).Str("renewer", t.Renewer).Msg("obtained an HDFS delegation token for the job")
	}
	return nil
}
