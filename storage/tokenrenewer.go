package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/internal/clock"
)

// DelegationTokenRenewer keeps the HDFS delegation tokens of a token file
// alive, as Flink's DelegationTokenManager does on the JobManager: each
// token is renewed once TimeRatio of the time to its expiry has passed,
// with the renewer's Kerberos credentials (Options.Kerberos); a token that
// can no longer be renewed (past the NameNode's maximum lifetime, or
// cancelled) is replaced by a new one. The file is rewritten (0600,
// atomically) after each change, and processes that open hdfs:// with it
// read it on each Open, so they pick the new token up.
type DelegationTokenRenewer struct {
	// File is the token file (WriteDelegationTokens).
	File string
	// Options carries the renewer's Kerberos login and Hadoop config.
	Options Options
	// TimeRatio: security.delegation.tokens.renewal.time-ratio (0.75).
	TimeRatio float64
	// RetryBackoff: security.delegation.tokens.renewal.retry.backoff (1h).
	RetryBackoff time.Duration
	// NoReplace: a token past renewal is not replaced by a new one of the
	// renewer's own (a job's tokens act as their submitter, not as the
	// JobManager); it stays as it is until it expires.
	NoReplace bool
	// OnChange, if set, is called (in Run's goroutine) after the file was
	// rewritten: the JobManager re-stages the tokens with it, for the
	// TaskManagers that read the staged copy (nomad) and for the next
	// leader.
	OnChange func(ctx context.Context, tokens []DelegationToken)
	// Clock: nil is the real one.
	Clock clock.Clock
	Log   zerolog.Logger

	// renew and obtain default to RenewDelegationToken and
	// ObtainDelegationToken (replaced in tests).
	renew  func(context.Context, DelegationToken, Options) (time.Time, error)
	obtain func(context.Context, string, Options, string) (DelegationToken, error)
}

// Run renews the tokens until ctx ends, and returns ctx's error then; it
// fails early only when the token file cannot be read. Blocking; the
// owner (the JobManager) calls it once, in a goroutine of its own.
func (r *DelegationTokenRenewer) Run(ctx context.Context) error {
	clk := clock.Or(r.Clock)
	renew, obtain := r.renew, r.obtain
	if renew == nil {
		renew = RenewDelegationToken
	}
	if obtain == nil {
		obtain = ObtainDelegationToken
	}
	ratio, backoff := r.TimeRatio, r.RetryBackoff
	if ratio <= 0 || ratio >= 1 {
		ratio = 0.75
	}
	if backoff <= 0 {
		backoff = time.Hour
	}
	tokens, err := ReadDelegationTokens(r.File)
	if err != nil {
		return err
	}
	// due[i] is when tokens[i] is renewed next.
	due := make([]time.Time, len(tokens))
	now := clk.Now()
	for i, t := range tokens {
		due[i] = now.Add(time.Duration(ratio * float64(t.Expires.Sub(now))))
	}
	for {
		if len(tokens) == 0 {
			<-ctx.Done()
			return ctx.Err()
		}
		next := due[0]
		for _, d := range due[1:] {
			if d.Before(next) {
				next = d
			}
		}
		if wait := next.Sub(clk.Now()); wait > 0 {
			fired := make(chan struct{})
			tm := clk.AfterFunc(wait, func() { close(fired) })
			select {
			case <-ctx.Done():
				tm.Stop()
				return ctx.Err()
			case <-fired:
			}
		}
		changed := false
		now := clk.Now()
		for i, t := range tokens {
			if due[i].After(now) {
				continue
			}
			exp, err := renew(ctx, t, r.Options)
			if err == nil && exp.After(t.Expires) {
				tokens[i].Expires = exp
				due[i] = now.Add(time.Duration(ratio * float64(exp.Sub(now))))
				changed = true
				r.Log.Info().Str("namenode", t.NameNode).Time("expires", exp).Msg("renewed the HDFS delegation token")
				continue
			}
			if err == nil {
				err = errors.New("the NameNode did not extend it (maximum lifetime reached)")
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if r.NoReplace {
				due[i] = now.Add(backoff)
				r.Log.Warn().Str("namenode", t.NameNode).Time("expires", t.Expires).Err(err).Dur("retry_in", backoff).
					Msg("could not renew the HDFS delegation token")
				continue
			}
			// Renewal is over: obtain a new token in its place.
			nt, oerr := obtain(ctx, "hdfs://"+t.NameNode, r.Options, t.Renewer)
			if oerr != nil {
				due[i] = now.Add(backoff)
				r.Log.Warn().Str("namenode", t.NameNode).Time("expires", t.Expires).Err(fmt.Errorf("renewing: %w; obtaining a new one: %w", err, oerr)).
					Dur("retry_in", backoff).Msg("could not renew the HDFS delegation token")
				continue
			}
			tokens[i] = nt
			due[i] = now.Add(time.Duration(ratio * float64(nt.Expires.Sub(now))))
			changed = true
			r.Log.Info().Str("namenode", t.NameNode).Time("expires", nt.Expires).Str("renewal_error", err.Error()).
				Msg("replaced the HDFS delegation token by a new one")
		}
		if changed {
			if err := WriteDelegationTokens(r.File, tokens); err != nil {
				r.Log.Error().Err(err).Msg("could not write the renewed HDFS delegation tokens")
			} else if r.OnChange != nil {
				r.OnChange(ctx, tokens)
			}
		}
	}
}
