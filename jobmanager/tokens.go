package jobmanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/storage"
)

// loadDelegationTokens copies the HDFS delegation tokens the client staged
// (if any) to a private local file and names it in the JobManager's
// configuration (security.delegation.tokens.file), so that the
// TaskManagers the provider starts use the tokens instead of the Kerberos
// options (see providers/local). Called once by prepareDeployment.
func (d *deployment) loadDelegationTokens(ctx context.Context) error {
	tokens, err := d.staging.GetDelegationTokens(ctx, d.clusterID)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("jobmanager: reading the staged HDFS delegation tokens: %w", err)
	}
	dir, err := os.MkdirTemp("", "gofl-tokens-") // 0700
	if err != nil {
		return fmt.Errorf("jobmanager: HDFS delegation tokens: %w", err)
	}
	file := filepath.Join(dir, "delegation-tokens.json")
	if err := storage.WriteDelegationTokens(file, tokens); err != nil {
		_ = os.RemoveAll(dir)
		return fmt.Errorf("jobmanager: %w", err)
	}
	if err := d.cfg.Set(conf.DelegationTokensFile.Key(), file, conf.Source{Kind: conf.SourceCode}); err != nil {
		_ = os.RemoveAll(dir)
		return fmt.Errorf("jobmanager: %w", err)
	}
	d.tokenDir = dir
	d.log.Info().Int("tokens", len(tokens)).Str("file", file).Msg("HDFS delegation tokens loaded from staging")
	return nil
}

// renewDelegationTokens keeps the loaded tokens alive until ctx ends
// (security.delegation.tokens.renewal.*), with the JobManager's own
// Kerberos login. Blocking; the JobManager runs it in a goroutine of its
// own when tokens were loaded.
func (d *deployment) renewDelegationTokens(ctx context.Context) {
	if d.tokenDir == "" {
		return
	}
	r := &storage.DelegationTokenRenewer{
		File:         conf.DelegationTokensFile.Get(d.cfg),
		Options:      storage.OptionsFromConf(d.cfg),
		TimeRatio:    conf.DelegationTokensRenewalTimeRatio.Get(d.cfg),
		RetryBackoff: conf.DelegationTokensRenewalRetryBackoff.Get(d.cfg),
		Log:          d.log.With().Str("component", "delegation-tokens").Logger(),
	}
	if err := r.Run(ctx); err != nil && ctx.Err() == nil {
		d.log.Error().Err(err).Msg("HDFS delegation token renewal stopped")
	}
}

// removeDelegationTokens deletes the local token file (idempotent).
func (d *deployment) removeDelegationTokens() {
	if d.tokenDir != "" {
		_ = os.RemoveAll(d.tokenDir)
	}
}
