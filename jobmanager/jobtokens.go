package jobmanager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/rpc/restapi"
	"github.com/gofl/gofl/storage"
)

// jobTokens handles the HDFS delegation tokens a session job brings (its
// submitter's, obtained by the client: restapi.JobConfigDelegationTokens),
// as Flink's delegation token framework does per job: they are staged
// 0600 in the cluster's staging directory and named in the job's
// configuration (restapi.JobConfigDelegationTokensFile), where the
// TaskManagers find them for the job's runners; the leading JobManager
// renews them while the job runs (with its own Kerberos login: the client
// made it their renewer) and cancels them once the job ended globally.
type jobTokens struct {
	cfg       *conf.Configuration
	clusterID string
	log       zerolog.Logger
	jobs      sync.Map // job ID -> true: jobs that run with tokens of their own
}

// jobTokensTimeout bounds cancelling a job's tokens at its end.
const jobTokensTimeout = time.Minute

// newJobTokens is nil (no per-job tokens) for a JobManager that is not a
// provider-deployed session's.
func newJobTokens(c *conf.Configuration, log zerolog.Logger) *jobTokens {
	id := conf.DeploymentClusterID.Get(c)
	if id == "" || conf.DeploymentMode.Get(c) != conf.ModeSession {
		return nil
	}
	return &jobTokens{cfg: c, clusterID: id, log: log.With().Str("component", "job-delegation-tokens").Logger()}
}

func (t *jobTokens) staging(ctx context.Context) (*storage.Staging, error) {
	st, err := storage.OpenStaging(ctx, conf.ExpandEnv(conf.StagingDir.Get(t.cfg)), storage.OptionsFromConf(t.cfg))
	if err != nil {
		return nil, fmt.Errorf("jobmanager: staging (staging.dir): %w", err)
	}
	return st, nil
}

// prepare stages the tokens a submission carries and names the staged
// file in the job's configuration (dispatcher.Config.PrepareJob). Without
// tokens, or on a JobManager started by hand (nil), it does nothing (the
// Dispatcher drops the tokens). Blocking.
func (t *jobTokens) prepare(ctx context.Context, jg *jobgraph.JobGraph) error {
	raw := jg.Config[restapi.JobConfigDelegationTokens]
	if raw == "" {
		return nil
	}
	var tokens []storage.DelegationToken
	if err := json.Unmarshal([]byte(raw), &tokens); err != nil {
		return fmt.Errorf("%w: the job's delegation tokens (%s) are not a JSON list of tokens", restapi.ErrBadRequest, restapi.JobConfigDelegationTokens)
	}
	if t == nil {
		// A JobManager started by hand has no cluster staging directory:
		// the job runs with the cluster's credentials, as before.
		return nil
	}
	st, err := t.staging(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	name := storage.JobDelegationTokensFile(jg.JobID)
	if err := st.PutTokenFile(ctx, t.clusterID, name, tokens); err != nil {
		return fmt.Errorf("jobmanager: staging the job's delegation tokens: %w", err)
	}
	uri, err := st.ClusterFileURI(t.clusterID, name)
	if err != nil {
		return fmt.Errorf("jobmanager: %w", err)
	}
	jg.Config[restapi.JobConfigDelegationTokensFile] = uri
	for _, tok := range tokens {
		t.log.Info().Str("job_id", jg.JobID).Str("namenode", tok.NameNode).Str("renewer", tok.Renewer).Msg("staged the job's own HDFS delegation token")
	}
	return nil
}

// renew keeps a running job's tokens alive until ctx ends
// (dispatcher.Config.WhileRunning): from a private local copy, re-staged
// after each renewal. A token past renewal is not replaced: the job acts
// as its submitter, never as the JobManager. Blocking; nil-safe.
func (t *jobTokens) renew(ctx context.Context, jobID string, jobConfig map[string]string) {
	if t == nil || jobConfig[restapi.JobConfigDelegationTokensFile] == "" {
		return
	}
	t.jobs.Store(jobID, true)
	log := t.log.With().Str("job_id", jobID).Logger()
	st, err := t.staging(ctx)
	if err != nil {
		log.Error().Err(err).Msg("cannot renew the job's HDFS delegation tokens")
		return
	}
	name := storage.JobDelegationTokensFile(jobID)
	tokens, err := st.GetTokenFile(ctx, t.clusterID, name)
	st.Close()
	if err != nil {
		if ctx.Err() == nil {
			log.Error().Err(err).Msg("cannot renew the job's HDFS delegation tokens")
		}
		return
	}
	dir, err := os.MkdirTemp("", "gofl-job-tokens-") // 0700
	if err != nil {
		log.Error().Err(err).Msg("cannot renew the job's HDFS delegation tokens")
		return
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "delegation-tokens.json")
	if err := storage.WriteDelegationTokens(file, tokens); err != nil {
		log.Error().Err(err).Msg("cannot renew the job's HDFS delegation tokens")
		return
	}
	r := &storage.DelegationTokenRenewer{
		File:         file,
		Options:      storage.OptionsFromConf(t.cfg),
		TimeRatio:    conf.DelegationTokensRenewalTimeRatio.Get(t.cfg),
		RetryBackoff: conf.DelegationTokensRenewalRetryBackoff.Get(t.cfg),
		NoReplace:    true,
		Log:          log,
		OnChange: func(ctx context.Context, tokens []storage.DelegationToken) {
			st, err := t.staging(ctx)
			if err == nil {
				err = st.PutTokenFile(ctx, t.clusterID, name, tokens)
				st.Close()
			}
			if err != nil && ctx.Err() == nil {
				log.Warn().Err(err).Msg("could not stage the job's renewed HDFS delegation tokens")
			}
		},
	}
	if err := r.Run(ctx); err != nil && ctx.Err() == nil {
		log.Error().Err(err).Msg("HDFS delegation token renewal of the job stopped")
	}
}

// cancel cancels a job's tokens at the NameNodes and removes their staged
// file once the job ended globally (dispatcher.Config.OnGloballyTerminal).
// Blocking; nil-safe.
func (t *jobTokens) cancel(jobID string) {
	if t == nil {
		return
	}
	if _, ok := t.jobs.LoadAndDelete(jobID); !ok {
		return // no tokens of its own
	}
	ctx, done := context.WithTimeout(context.Background(), jobTokensTimeout)
	defer done()
	st, err := t.staging(ctx)
	if err != nil {
		t.log.Warn().Err(err).Str("job_id", jobID).Msg("cannot cancel the job's HDFS delegation tokens")
		return
	}
	defer st.Close()
	name := storage.JobDelegationTokensFile(jobID)
	tokens, err := st.GetTokenFile(ctx, t.clusterID, name)
	if errors.Is(err, storage.ErrNotFound) {
		return
	} else if err != nil {
		t.log.Warn().Err(err).Str("job_id", jobID).Msg("cannot cancel the job's HDFS delegation tokens")
		return
	}
	opts := storage.OptionsFromConf(t.cfg)
	for _, tok := range tokens {
		if err := storage.CancelDelegationToken(ctx, tok, opts); err != nil {
			t.log.Warn().Err(err).Str("job_id", jobID).Str("namenode", tok.NameNode).Msg("could not cancel the job's HDFS delegation token")
			continue
		}
		t.log.Info().Str("job_id", jobID).Str("namenode", tok.NameNode).Msg("cancelled the job's HDFS delegation token")
	}
	if err := st.RemoveClusterFile(ctx, t.clusterID, name); err != nil {
		t.log.Warn().Err(err).Str("job_id", jobID).Msg("could not remove the job's staged HDFS delegation tokens")
	}
}
