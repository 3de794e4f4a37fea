package jobmanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/resourcemanager"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/storage"
)

// clusterTokens are a deployed cluster's HDFS delegation tokens, copied to
// a private local file named in the JobManager's configuration
// (security.delegation.tokens.file), so that the TaskManagers the provider
// starts use them instead of the Kerberos options (see providers/local),
// and renewed while the JobManager runs.
//
// The leading term's ResourceManager gives them to every TaskManager over
// RPC (Flink's DelegationTokenManager -> ResourceManager ->
// TaskExecutor.updateDelegationTokens): in the registration response and
// again after every renewal, so no TaskManager needs a keytab or a
// readable staged token file.
type clusterTokens struct {
	dir       string // 0700, holds the token file
	clusterID string
	cfg       *conf.Configuration
	log       zerolog.Logger

	mu      sync.Mutex
	current []*pb.DelegationToken            // what TaskManagers get
	rm      *resourcemanager.ResourceManager // the leading term's (nil: standby)
}

// loadClusterTokens loads the tokens staged for the cluster (0600 in its
// staging directory): the client's, or an earlier JobManager's of the
// cluster (a recovered or restarted one finds them there). With none
// staged and own is true, a JobManager with a Kerberos login obtains them
// itself for staging.dir and state.checkpoints.dir (as the client does)
// and stages them. nil when there are none.
func loadClusterTokens(ctx context.Context, c *conf.Configuration, st *storage.Staging, clusterID string, own bool, log zerolog.Logger) (*clusterTokens, error) {
	tokens, err := st.GetDelegationTokens(ctx, clusterID)
	if errors.Is(err, storage.ErrNotFound) {
		tokens, err = nil, nil
		if own {
			if tokens, err = storage.ObtainClusterTokens(ctx, c); err == nil && len(tokens) > 0 {
				for _, t := range tokens {
					log.Info().Str("namenode", t.NameNode).Time("expires", t.Expires).Msg("obtained an HDFS delegation token for the cluster")
				}
				err = st.PutDelegationTokens(ctx, clusterID, tokens)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("jobmanager: HDFS delegation tokens: %w", err)
	}
	if len(tokens) == 0 {
		return nil, nil
	}
	dir, err := os.MkdirTemp("", "gofl-tokens-") // 0700
	if err != nil {
		return nil, fmt.Errorf("jobmanager: HDFS delegation tokens: %w", err)
	}
	file := filepath.Join(dir, "delegation-tokens.json")
	if err := storage.WriteDelegationTokens(file, tokens); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("jobmanager: %w", err)
	}
	if err := c.Set(conf.DelegationTokensFile.Key(), file, conf.Source{Kind: conf.SourceCode}); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("jobmanager: %w", err)
	}
	log.Info().Int("tokens", len(tokens)).Str("file", file).Msg("HDFS delegation tokens loaded")
	return &clusterTokens{dir: dir, clusterID: clusterID, cfg: c, log: log, current: tokensToPB(tokens)}, nil
}

// renew keeps the tokens alive until ctx ends
// (security.delegation.tokens.renewal.*), with the JobManager's own
// Kerberos login. Blocking; nil-safe.
func (t *clusterTokens) renew(ctx context.Context) {
	if t == nil {
		return
	}
	r := &storage.DelegationTokenRenewer{
		File:         conf.DelegationTokensFile.Get(t.cfg),
		Options:      storage.OptionsFromConf(t.cfg),
		TimeRatio:    conf.DelegationTokensRenewalTimeRatio.Get(t.cfg),
		RetryBackoff: conf.DelegationTokensRenewalRetryBackoff.Get(t.cfg),
		Log:          t.log.With().Str("component", "delegation-tokens").Logger(),
		OnChange:     t.changed,
	}
	if err := r.Run(ctx); err != nil && ctx.Err() == nil {
		t.log.Error().Err(err).Msg("HDFS delegation token renewal stopped")
	}
}

// changed sends renewed or replaced tokens to the TaskManagers (through
// the leading ResourceManager) and stages them. Called by the renewer.
func (t *clusterTokens) changed(ctx context.Context, tokens []storage.DelegationToken) {
	pbTokens := tokensToPB(tokens)
	t.mu.Lock()
	t.current = pbTokens
	rm := t.rm
	t.mu.Unlock()
	if rm != nil {
		rm.UpdateDelegationTokens(pbTokens)
	}
	t.restage(ctx, tokens)
}

// forTaskManagers is resourcemanager.Config.DelegationTokens: the current
// tokens. Nil-safe; does not block.
func (t *clusterTokens) forTaskManagers() []*pb.DelegationToken {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.current
}

// lead makes rm (a new term's ResourceManager) the one renewed tokens go
// to. Nil-safe.
func (t *clusterTokens) lead(rm *resourcemanager.ResourceManager) {
	if t != nil {
		t.mu.Lock()
		t.rm = rm
		t.mu.Unlock()
	}
}

// tokensToPB is the RPC form of tokens.
func tokensToPB(tokens []storage.DelegationToken) []*pb.DelegationToken {
	out := make([]*pb.DelegationToken, len(tokens))
	for i, t := range tokens {
		out[i] = &pb.DelegationToken{NameNode: t.NameNode, Webhdfs: t.WebHDFS, Token: t.Token, Renewer: t.Renewer,
			ExpiresUnixMs: t.Expires.UnixMilli()}
	}
	return out
}

// restage writes renewed or replaced tokens back to the cluster's staging
// directory (0600): nomad TaskManagers read that copy, and the next
// JobManager of the cluster loads it. Failures are logged: the local file
// is renewed all the same.
func (t *clusterTokens) restage(ctx context.Context, tokens []storage.DelegationToken) {
	st, err := storage.OpenStaging(ctx, conf.ExpandEnv(conf.StagingDir.Get(t.cfg)), storage.OptionsFromConf(t.cfg))
	if err == nil {
		err = st.PutDelegationTokens(ctx, t.clusterID, tokens)
		st.Close()
	}
	if err != nil && ctx.Err() == nil {
		t.log.Warn().Err(err).Msg("could not stage the renewed HDFS delegation tokens")
	}
}

// remove deletes the local token file (idempotent, nil-safe).
func (t *clusterTokens) remove() {
	if t != nil {
		_ = os.RemoveAll(t.dir)
	}
}

// loadSessionTokens gives a session cluster the provider deployed
// (deployment.cluster-id set) its delegation tokens: staged by the client
// or an earlier JobManager, else obtained with this JobManager's Kerberos
// login. nil for a JobManager started by hand or without tokens.
func loadSessionTokens(ctx context.Context, c *conf.Configuration, log zerolog.Logger) (*clusterTokens, error) {
	id := conf.DeploymentClusterID.Get(c)
	if id == "" || conf.DeploymentMode.Get(c) != conf.ModeSession || conf.DelegationTokensFile.Get(c) != "" {
		return nil, nil
	}
	st, err := storage.OpenStaging(ctx, conf.ExpandEnv(conf.StagingDir.Get(c)), storage.OptionsFromConf(c))
	if err != nil {
		return nil, fmt.Errorf("jobmanager: staging (staging.dir): %w", err)
	}
	defer st.Close()
	return loadClusterTokens(ctx, c, st, id, true, log)
}
