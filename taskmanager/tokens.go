package taskmanager

import (
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/storage"
)

// DelegationTokensFileName is the file in the work directory that holds
// the cluster's HDFS delegation tokens the ResourceManager sent (0600).
const DelegationTokensFileName = "delegation-tokens.json"

// delegationTokens are the cluster's HDFS delegation tokens as the leading
// ResourceManager sends them (Flink's DelegationTokenReceiverRepository,
// fed by TaskExecutor.updateDelegationTokens): on registration and after
// every renewal. Each update replaces the file atomically (0600, temp file
// and rename); from the first one on it is the TaskManager's
// security.delegation.tokens.file, for its own HDFS access and for the
// runners it starts, in place of a Kerberos login. Safe for concurrent
// use: the mailbox updates, runner starts read.
type delegationTokens struct {
	path string
	mu   sync.Mutex
	n    int // updates applied
}

// update validates tokens and replaces the file with them. A token that
// does not parse fails the whole update with INVALID_ARGUMENT and leaves
// the file as it was. Blocking (a small local write); returns the number
// of updates applied so far.
func (d *delegationTokens) update(in []*pb.DelegationToken) (int, error) {
	if len(in) == 0 {
		return 0, status.Error(codes.InvalidArgument, "UpdateDelegationTokens without tokens")
	}
	tokens := make([]storage.DelegationToken, 0, len(in))
	for _, t := range in {
		tok := storage.DelegationToken{NameNode: t.NameNode, WebHDFS: t.Webhdfs, Token: t.Token, Renewer: t.Renewer,
			Expires: time.UnixMilli(t.ExpiresUnixMs).UTC()}
		if err := tok.Validate(); err != nil {
			return 0, status.Errorf(codes.InvalidArgument, "taskmanager: %v", err)
		}
		tokens = append(tokens, tok)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := storage.WriteDelegationTokens(d.path, tokens); err != nil {
		return 0, status.Errorf(codes.Internal, "taskmanager: %v", err)
	}
	d.n++
	return d.n, nil
}

// file is the token file once an update was applied, else "". Nil-safe.
func (d *delegationTokens) file() string {
	if d == nil {
		return ""
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == 0 {
		return ""
	}
	return d.path
}

// newDelegationTokens keeps the received tokens in workDir.
func newDelegationTokens(workDir string) *delegationTokens {
	return &delegationTokens{path: filepath.Join(workDir, DelegationTokensFileName)}
}

// withTokenFile is env with file as the delegation token file and without
// a Kerberos login (which HDFS clients would prefer to the tokens).
func withTokenFile(env []string, file string) []string {
	drop := []string{conf.DelegationTokensFile.EnvVar() + "=", conf.KerberosKeytab.EnvVar() + "=",
		conf.KerberosPrincipal.EnvVar() + "=", conf.KerberosUseTicketCache.EnvVar() + "="}
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		return slices.ContainsFunc(drop, func(p string) bool { return strings.HasPrefix(kv, p) })
	})
	return append(env, conf.DelegationTokensFile.EnvVar()+"="+file)
}

// updateDelegationTokens applies the tokens of the registered
// ResourceManager rmID (fencing, as for RequestSlot). Runs on the mailbox.
// UNAVAILABLE before the registration completed, FAILED_PRECONDITION from
// another ResourceManager.
func (te *TaskExecutor) updateDelegationTokens(rmID string, tokens []*pb.DelegationToken) error {
	rm := te.rm
	switch {
	case te.tokens == nil:
		return status.Error(codes.FailedPrecondition, "this TaskManager starts no job runners: it has no use for delegation tokens")
	case rm == nil || !rm.registered:
		// Perhaps the registration reply is still on its way: the
		// ResourceManager's outbox retries UNAVAILABLE.
		return status.Errorf(codes.Unavailable, "delegation tokens from ResourceManager %s, but this TaskManager is not registered (yet)", rmID)
	case rm.id != rmID:
		return status.Errorf(codes.FailedPrecondition, "delegation tokens from ResourceManager %s, but this TaskManager is registered at %s", rmID, rm.id)
	}
	return te.applyDelegationTokens(tokens)
}

// applyDelegationTokens writes tokens and logs the update (never the secret).
func (te *TaskExecutor) applyDelegationTokens(tokens []*pb.DelegationToken) error {
	n, err := te.tokens.update(tokens)
	if err != nil {
		te.log.Error().Err(err).Msg("HDFS delegation tokens from the ResourceManager refused")
		return err
	}
	nns := make([]string, len(tokens))
	for i, t := range tokens {
		nns[i] = t.NameNode
	}
	te.log.Info().Int("token_updates", n).Strs("namenodes", nns).Str("file", te.tokens.path).Msg("HDFS delegation tokens updated")
	return nil
}
