package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gofl/gofl/conf"
)

// DelegationToken is an HDFS delegation token: what a process without a
// Kerberos keytab presents to one NameNode instead (Flink's delegation
// token framework ships the same to its TaskManagers). Whoever obtained it
// renews it before Expires, up to the NameNode's maximum lifetime (7 days
// by default), and then obtains a new one.
type DelegationToken struct {
	// NameNode is the RPC address it was issued by ("host:port").
	NameNode string `json:"nameNode"`
	// WebHDFS is the NameNode's HTTP address ("host:port").
	WebHDFS string `json:"webhdfs"`
	// Token is Hadoop's URL-safe encoding of the token (identifier,
	// password, kind, service). A secret: never logged.
	Token string `json:"token"`
	// Renewer is the user allowed to renew it.
	Renewer string `json:"renewer"`
	// Expires is when it stops working unless renewed.
	Expires time.Time `json:"expires"`
}

// String hides the secret.
func (t DelegationToken) String() string {
	return fmt.Sprintf("HDFS delegation token for %s (renewer %s, expires %s)", t.NameNode, t.Renewer, t.Expires.UTC().Format(time.RFC3339))
}

// Validate checks a token received from another process (a TaskManager's
// from the ResourceManager): a NameNode "host:port" and a token in
// Hadoop's form. The error names the NameNode, never the secret.
func (t DelegationToken) Validate() error {
	if h, p, err := net.SplitHostPort(t.NameNode); err != nil || h == "" || p == "" {
		return fmt.Errorf("%w: delegation token for NameNode %q: the NameNode is not host:port", ErrInvalid, t.NameNode)
	}
	if _, err := decodeHadoopToken(t.Token); err != nil {
		return fmt.Errorf("delegation token for NameNode %s: %w", t.NameNode, err)
	}
	return nil
}

// webHDFSFor connects to the WebHDFS of the NameNode an hdfs:// URI
// names, logged in to Kerberos from opts (SPNEGO).
func webHDFSFor(uri string, opts Options) (*webHDFS, string, error) {
	opts = opts.withDefaults()
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "hdfs" {
		return nil, "", fmt.Errorf("%w: %q is not an hdfs:// URI", ErrInvalid, uri)
	}
	hc, confDir, err := loadHadoopConf(opts)
	if err != nil {
		return nil, "", err
	}
	addrs, err := nameNodes(u.Host, hc, confDir)
	if err != nil {
		return nil, "", err
	}
	if len(addrs) != 1 {
		return nil, "", fmt.Errorf("%w: delegation tokens for HA nameservice %s are not supported yet", ErrInvalid, u.Host)
	}
	cl, _, err := kerberosClient(opts.Kerberos, hc)
	if err != nil {
		return nil, "", err
	}
	if err := cl.Login(); err != nil {
		return nil, "", kerberosLoginError(opts.Kerberos, err)
	}
	httpAddr := webHDFSAddress(addrs[0], hc)
	return &webHDFS{base: "http://" + httpAddr, http: newWebHDFSClient(opts), krb: cl, spn: webHDFSPrincipal(httpAddr, hc)}, addrs[0], nil
}

func (w *webHDFS) close() {
	if w.krb != nil {
		w.krb.Destroy()
	}
	w.http.CloseIdleConnections()
}

// ObtainDelegationToken logs in to Kerberos from opts and asks the
// NameNode of an hdfs:// URI for a delegation token that renewer may
// renew (empty: the logged-in user), over WebHDFS with SPNEGO
// (GETDELEGATIONTOKEN). Blocking; the caller keeps the token secret. A
// token for another renewer (a session JobManager's user) cannot be
// renewed here, so its expiry is unknown: Expires is now, and its renewer
// renews it first thing.
func ObtainDelegationToken(ctx context.Context, uri string, opts Options, renewer string) (DelegationToken, error) {
	w, nn, err := webHDFSFor(uri, opts)
	if err != nil {
		return DelegationToken{}, err
	}
	defer w.close()
	self := w.krb.Credentials.UserName()
	self, _, _ = strings.Cut(self, "/") // Hadoop's short name
	if renewer == "" {
		renewer = self
	}
	var out struct {
		Token struct {
			URLString string `json:"urlString"`
		} `json:"Token"`
	}
	if err := w.call(ctx, "GET", "/", "GETDELEGATIONTOKEN", url.Values{"renewer": {renewer}}, &out); err != nil {
		return DelegationToken{}, fmt.Errorf("storage: obtaining an HDFS delegation token from %s: %w", w.base, err)
	}
	if out.Token.URLString == "" {
		return DelegationToken{}, fmt.Errorf("storage: obtaining an HDFS delegation token from %s: the answer has no token", w.base)
	}
	t := DelegationToken{NameNode: nn, WebHDFS: strings.TrimPrefix(w.base, "http://"), Token: out.Token.URLString, Renewer: renewer}
	if renewer != self {
		t.Expires = time.Now()
		return t, nil
	}
	// A new token's expiry is only known by renewing it (Hadoop's clients
	// do the same); the renewal also proves that renewer may renew it.
	if t.Expires, err = w.renew(ctx, t); err != nil {
		return DelegationToken{}, err
	}
	return t, nil
}

// RenewDelegationToken extends t (RENEWDELEGATIONTOKEN, as the principal
// of opts, who must be its renewer) and returns its new expiry. Blocking.
func RenewDelegationToken(ctx context.Context, t DelegationToken, opts Options) (time.Time, error) {
	w, _, err := webHDFSFor("hdfs://"+t.NameNode, opts)
	if err != nil {
		return time.Time{}, err
	}
	defer w.close()
	return w.renew(ctx, t)
}

func (w *webHDFS) renew(ctx context.Context, t DelegationToken) (time.Time, error) {
	var out struct {
		Long json.Number `json:"long"`
	}
	if err := w.call(ctx, "PUT", "/", "RENEWDELEGATIONTOKEN", url.Values{"token": {t.Token}}, &out); err != nil {
		return time.Time{}, fmt.Errorf("storage: renewing the %s: %w", t, err)
	}
	ms, err := strconv.ParseInt(out.Long.String(), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("storage: renewing the %s: bad expiry %q", t, out.Long)
	}
	return time.UnixMilli(ms), nil
}

// CancelDelegationToken revokes t (CANCELDELEGATIONTOKEN) as the principal
// of opts. Blocking; an already cancelled or expired token is an error
// wrapping ErrPermission.
func CancelDelegationToken(ctx context.Context, t DelegationToken, opts Options) error {
	w, _, err := webHDFSFor("hdfs://"+t.NameNode, opts)
	if err != nil {
		return err
	}
	defer w.close()
	if err := w.call(ctx, "PUT", "/", "CANCELDELEGATIONTOKEN", url.Values{"token": {t.Token}}, nil); err != nil {
		return fmt.Errorf("storage: cancelling the %s: %w", t, err)
	}
	return nil
}

// tokenFile is the JSON form of a delegation token file.
type tokenFile struct {
	Tokens []DelegationToken `json:"hdfsDelegationTokens"`
}

// WriteDelegationTokens writes tokens to a local file readable only by
// this user (0600), replacing it atomically.
func WriteDelegationTokens(path string, tokens []DelegationToken) error {
	b, err := json.MarshalIndent(tokenFile{Tokens: tokens}, "", "  ")
	if err != nil {
		return err
	}
	if _, err := WriteFilePrivate(context.Background(), Local(), path, bytes.NewReader(b)); err != nil {
		return fmt.Errorf("storage: writing delegation tokens: %w", err)
	}
	return nil
}

// ReadDelegationTokens reads a file WriteDelegationTokens (or
// Staging.PutDelegationTokens on a file:// staging directory) wrote: a
// local path or a file:// URI. A TaskManager on Nomad gets the staged
// file's URI; an hdfs:// one cannot be read without a login, so it is
// refused with ErrInvalid.
func ReadDelegationTokens(path string) ([]DelegationToken, error) {
	if strings.Contains(path, "://") {
		u, err := url.Parse(path)
		if err != nil || u.Scheme != "file" || (u.Host != "" && u.Host != "localhost") || !strings.HasPrefix(u.Path, "/") {
			return nil, fmt.Errorf("%w: delegation token file %q: want a local path or file:///path", ErrInvalid, path)
		}
		path = u.Path
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, wrapErr("read delegation tokens", path, err)
	}
	var f tokenFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%w: delegation token file %s: %v", ErrInvalid, path, err)
	}
	return f.Tokens, nil
}

// tokenFor picks the token of a NameNode RPC address.
func tokenFor(tokens []DelegationToken, nn string) (DelegationToken, bool) {
	for _, t := range tokens {
		if t.NameNode == nn {
			return t, true
		}
	}
	return DelegationToken{}, false
}

// ObtainClusterTokens obtains one delegation token per NameNode of c's
// staging.dir, state.checkpoints.dir, security.kerberos.access.hadoopFileSystems
// and the Hadoop configuration's fs.defaultFS (as Flink's
// HadoopFSDelegationTokenProvider) when
// security.delegation.tokens.enabled is on and c logs in to Kerberos
// (keytab or ticket cache); none otherwise. Blocking. The client calls it
// at deployment, a session JobManager when the client staged none.
func ObtainClusterTokens(ctx context.Context, c *conf.Configuration) ([]DelegationToken, error) {
	return ObtainTokens(ctx, c, "")
}

// ObtainTokens is ObtainClusterTokens with tokens renewer may renew
// (empty: the logged-in user): a client submitting a job to a session
// obtains them for the session JobManager's user.
func ObtainTokens(ctx context.Context, c *conf.Configuration, renewer string) ([]DelegationToken, error) {
	if !conf.DelegationTokensEnabled.Get(c) {
		return nil, nil
	}
	opts := OptionsFromConf(c)
	if opts.Kerberos.Keytab == "" && !opts.Kerberos.UseTicketCache {
		return nil, nil
	}
	var tokens []DelegationToken
	seen := map[string]bool{}
	for _, dir := range tokenFileSystems(c, opts) {
		u, err := url.Parse(conf.ExpandEnv(dir))
		if err != nil || u.Scheme != "hdfs" || seen[u.Host] {
			continue
		}
		seen[u.Host] = true
		tok, err := ObtainDelegationToken(ctx, "hdfs://"+u.Host, opts, renewer)
		if err != nil {
			return nil, fmt.Errorf("storage: obtaining an HDFS delegation token for %s (security.delegation.tokens.enabled): %w", u.Redacted(), err)
		}
		tokens = append(tokens, tok)
	}
	return tokens, nil
}

// tokenFileSystems are the file systems ObtainClusterTokens covers (any
// scheme; it keeps the hdfs:// ones).
func tokenFileSystems(c *conf.Configuration, opts Options) []string {
	dirs := []string{conf.StagingDir.Get(c), conf.CheckpointsDir.Get(c)}
	for _, fs := range strings.Split(conf.KerberosAccessHadoopFileSystems.Get(c), ",") {
		if fs = strings.TrimSpace(fs); fs != "" {
			dirs = append(dirs, fs)
		}
	}
	if hc, _, err := loadHadoopConf(opts); err == nil && hc != nil {
		dirs = append(dirs, hc["fs.defaultFS"])
	}
	return dirs
}

// ShortName is Hadoop's short name of a Kerberos principal
// (user[/instance][@REALM] -> user), as renewers are named.
func ShortName(principal string) string {
	name, _, _ := strings.Cut(principal, "@")
	name, _, _ = strings.Cut(name, "/")
	return name
}

// MergeDelegationTokens is first's tokens, then second's for the
// NameNodes first has none for: a job's runners act as the submitting
// user (first) where the job brought a token, as the cluster elsewhere.
func MergeDelegationTokens(first, second []DelegationToken) []DelegationToken {
	out := append([]DelegationToken(nil), first...)
	for _, t := range second {
		if _, ok := tokenFor(first, t.NameNode); !ok {
			out = append(out, t)
		}
	}
	return out
}

// JobDelegationTokensFile is the staged file of a job's own delegation
// tokens (a session job submitted with its user's Kerberos login) in the
// cluster's staging directory.
func JobDelegationTokensFile(jobID string) string {
	return "job-" + jobID + "-" + DelegationTokensFile
}
