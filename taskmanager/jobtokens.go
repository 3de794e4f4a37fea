package taskmanager

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"

	"github.com/gofl/gofl/failure"
	"github.com/gofl/gofl/storage"
)

// jobTokenEnv gives a job's runners the job's own HDFS delegation tokens
// (its submitter's, staged by the JobManager at uri): it reads them with
// the TaskManager's credentials, adds the TaskManager's own tokens for the
// NameNodes the job has none for, writes them 0600 into the job's
// directory, and returns env with that file as the runners' token file
// and without a Kerberos login, so the job's tasks act as its submitter.
// Blocking.
func (p *runnerPool) jobTokenEnv(ctx context.Context, jobID, uri, jobDir string, env []string) ([]string, error) {
	if u, err := url.Parse(uri); err != nil || path.Base(u.Path) != storage.JobDelegationTokensFile(jobID) {
		return nil, failure.NonRecoverable(fmt.Errorf("taskmanager: job %s names %q as its delegation tokens, not its staged token file", jobID, uri))
	}
	opts := p.storageOptions()
	tokens, err := storage.ReadStagedDelegationTokens(ctx, uri, opts)
	if err != nil {
		return nil, failure.EnvironmentError(fmt.Errorf("taskmanager: reading the job's delegation tokens: %w", err))
	}
	if own := opts.DelegationTokenFile; own != "" {
		cluster, err := storage.ReadDelegationTokens(own)
		if err != nil {
			return nil, failure.EnvironmentError(fmt.Errorf("taskmanager: %w", err))
		}
		tokens = storage.MergeDelegationTokens(tokens, cluster)
	}
	if err := os.MkdirAll(jobDir, 0o700); err != nil {
		return nil, failure.EnvironmentError(fmt.Errorf("taskmanager: %w", err))
	}
	file := filepath.Join(jobDir, "delegation-tokens.json")
	if err := storage.WriteDelegationTokens(file, tokens); err != nil {
		return nil, failure.EnvironmentError(fmt.Errorf("taskmanager: %w", err))
	}
	return withTokenFile(env, file), nil
}
