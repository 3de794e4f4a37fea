package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/colinmarc/hdfs/v2"
	"github.com/colinmarc/hdfs/v2/hadoopconf"
	krbclient "github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/krberror"
)

// hdfsFS is the hdfs:// file system on github.com/colinmarc/hdfs/v2.
type hdfsFS struct {
	client    *hdfs.Client
	authority string   // as in the URI ("" for hdfs:///)
	nameNodes []string // resolved RPC addresses
	opts      Options
	krb       *krbclient.Client // nil without Kerberos; destroyed on Close
	token     string            // the delegation token it opened with; "" for none
	hc        hadoopconf.HadoopConf
	// web carries the WebHDFS calls (block locations), made on first use.
	webOnce sync.Once
	web     *http.Client
}

// openHDFSFS opens hdfs:// over the NameNode RPC: with a delegation token
// (SASL DIGEST-MD5) when opts name a token file and no Kerberos
// credentials, else with Kerberos or as a simple user.
func openHDFSFS(ctx context.Context, u *url.URL, opts Options) (FileSystem, error) {
	if opts.DelegationTokenFile == "" || opts.Kerberos.Keytab != "" || opts.Kerberos.UseTicketCache {
		f, err := openHDFS(ctx, u, opts, nil)
		if err != nil {
			return nil, err
		}
		return f, nil
	}
	hc, confDir, err := loadHadoopConf(opts)
	if err != nil {
		return nil, err
	}
	addrs, err := nameNodes(u.Host, hc, confDir)
	if err != nil {
		return nil, err
	}
	tokens, err := ReadDelegationTokens(opts.DelegationTokenFile)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if t, ok := tokenFor(tokens, a); ok {
			f, err := openHDFS(ctx, u, opts, &t)
			if err != nil {
				return nil, err
			}
			return f, nil
		}
	}
	return nil, fmt.Errorf("%w: the delegation token file %s has no token for HDFS NameNode %v", ErrPermission, opts.DelegationTokenFile, addrs)
}

// openHDFS connects to the NameNode(s) named by u and checks that they
// answer; with tok it authenticates with that delegation token (SASL
// DIGEST-MD5, Hadoop's TOKEN auth) instead of Kerberos.
func openHDFS(ctx context.Context, u *url.URL, opts Options, tok *DelegationToken) (*hdfsFS, error) {
	hc, confDir, err := loadHadoopConf(opts)
	if err != nil {
		return nil, err
	}
	addrs, err := nameNodes(u.Host, hc, confDir)
	if err != nil {
		return nil, err
	}
	co := hdfs.ClientOptionsFromConf(hc) // data transfer protection, datanode hostnames
	co.Addresses = addrs
	co.KerberosClient = nil
	co.KerberosServicePrincipleName = ""
	if tok != nil {
		ht, err := decodeHadoopToken(tok.Token)
		if err != nil {
			return nil, err
		}
		if co.User, err = tokenOwner(ht.Identifier); err != nil {
			return nil, err
		}
		co.DelegationToken = &hdfs.DelegationToken{Identifier: ht.Identifier, Password: ht.Password}
	} else if kerberosWanted(opts.Kerberos, hc) {
		cl, spn, err := kerberosClient(opts.Kerberos, hc)
		if err != nil {
			return nil, err
		}
		co.KerberosClient, co.KerberosServicePrincipleName = cl, spn
	} else {
		if co.User, err = hdfsUser(opts); err != nil {
			return nil, err
		}
	}
	dataTimeout := max(opts.IOTimeout, 60*time.Second)
	co.NamenodeDialFunc = timeoutDialer(opts.DialTimeout, opts.IOTimeout)
	co.DatanodeDialFunc = timeoutDialer(opts.DialTimeout, dataTimeout)

	f := &hdfsFS{authority: u.Host, nameNodes: addrs, opts: opts, krb: co.KerberosClient, hc: hc}
	if tok != nil {
		f.token = tok.Token
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("storage: connecting to HDFS NameNode %s: %w", f.nnList(), err)
	}
	// NewClient dials (bounded by DialTimeout); the handshake does not wait
	// for an answer, so one NameNode call proves the NameNode is there.
	type result struct {
		c   *hdfs.Client
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// Log in first, so that a refused login is told apart from an
		// unreachable NameNode.
		if co.KerberosClient != nil {
			if err := co.KerberosClient.Login(); err != nil {
				ch <- result{nil, kerberosLoginError(opts.Kerberos, err)}
				return
			}
		}
		c, err := hdfs.NewClient(co)
		if err == nil {
			if _, err = c.Stat("/"); err != nil {
				c.Close()
				c = nil
			}
		}
		ch <- result{c, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-ctx.Done():
		go func() { // the attempt ends within its timeouts; release it then
			if r := <-ch; r.c != nil {
				r.c.Close()
			}
			f.destroyKerberos()
		}()
		return nil, fmt.Errorf("storage: connecting to HDFS NameNode %s: %w", f.nnList(), ctx.Err())
	}
	if r.err != nil {
		f.destroyKerberos()
		if errors.Is(r.err, ErrPermission) || errors.Is(r.err, ErrUnavailable) {
			return nil, r.err // a Kerberos login error, already explained
		}
		if tok != nil && strings.Contains(r.err.Error(), "SASL handshake with a delegation token") {
			return nil, fmt.Errorf("%w: HDFS NameNode %s refused the %s (expired, cancelled, or not issued by it): %w",
				ErrPermission, f.nnList(), *tok, r.err)
		}
		if co.KerberosClient == nil && strings.Contains(r.err.Error(), "unexpected sequence number") {
			// A secured NameNode answers a client without SASL with an
			// error colinmarc/hdfs cannot read.
			return nil, fmt.Errorf("%w: HDFS NameNode %s refused user %q without Kerberos; it probably requires it: "+
				"set security.kerberos.login.keytab and .principal (or .use-ticket-cache), and hadoop.security.authentication=kerberos "+
				"in the Hadoop configuration: %w", ErrPermission, f.nnList(), co.User, r.err)
		}
		if isTransport(r.err) || strings.Contains(r.err.Error(), "kerberos") {
			hint := ""
			if co.KerberosClient == nil && !errors.Is(r.err, syscall.ECONNREFUSED) && !errors.Is(r.err, os.ErrDeadlineExceeded) {
				// A secured NameNode hangs up on a client without SASL.
				hint = " (if it requires Kerberos, set security.kerberos.login.keytab and .principal)"
			}
			return nil, fmt.Errorf("%w: HDFS NameNode %s (user %q)%s: %w", ErrUnavailable, f.nnList(), co.User, hint, r.err)
		}
		return nil, wrapErr("connect", "hdfs://"+f.nnList(), r.err)
	}
	f.client = r.c
	return f, nil
}

func (f *hdfsFS) nnList() string { return strings.Join(f.nameNodes, ",") }

// User is the user the client acts as (the Kerberos principal's name with
// Kerberos on).
func (f *hdfsFS) User() string { return f.client.User() }

func (f *hdfsFS) URI(p string) string { return "hdfs://" + f.authority + path.Clean("/"+p) }

func (f *hdfsFS) check(ctx context.Context, op, p string) (string, error) {
	return checkPath(ctx, f, op, p)
}

// checkPath is the check before an operation of a remote file system:
// ctx still live and p absolute; it returns p cleaned.
func checkPath(ctx context.Context, fsys FileSystem, op, p string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("storage: %s %s: %w", op, fsys.URI(p), err)
	}
	if !path.IsAbs(p) {
		return "", fmt.Errorf("%w: %s %q: path is not absolute", ErrInvalid, op, p)
	}
	return path.Clean(p), nil
}

// wrap classifies an HDFS error; a broken or timed-out connection becomes
// ErrUnavailable naming the NameNode.
func (f *hdfsFS) wrap(op, p string, err error) error {
	if err == nil {
		return nil
	}
	if classify(err) == nil && isTransport(err) {
		return fmt.Errorf("%w: %s %s: HDFS NameNode %s: %w", ErrUnavailable, op, f.URI(p), f.nnList(), err)
	}
	return wrapErr(op, f.URI(p), err)
}

func (f *hdfsFS) Open(ctx context.Context, p string) (io.ReadCloser, error) {
	hp, err := f.check(ctx, "open", p)
	if err != nil {
		return nil, err
	}
	r, err := f.client.Open(hp)
	if err != nil {
		return nil, f.wrap("open", p, err)
	}
	if r.Stat().IsDir() {
		r.Close()
		return nil, fmt.Errorf("%w: open %s: is a directory", ErrInvalid, f.URI(p))
	}
	return &hdfsReader{r: r, fs: f, p: p}, nil
}

type hdfsReader struct {
	r  *hdfs.FileReader
	fs *hdfsFS
	p  string
}

func (r *hdfsReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	if err != nil && err != io.EOF {
		return n, r.fs.wrap("read", r.p, err)
	}
	return n, err
}

// Seek lets a reader of a split start in the middle of a file.
func (r *hdfsReader) Seek(offset int64, whence int) (int64, error) {
	n, err := r.r.Seek(offset, whence)
	if err != nil {
		return n, r.fs.wrap("seek", r.p, err)
	}
	return n, nil
}

func (r *hdfsReader) Close() error { return r.fs.wrap("close", r.p, r.r.Close()) }

func (f *hdfsFS) Create(ctx context.Context, p string) (io.WriteCloser, error) {
	hp, err := f.check(ctx, "create", p)
	if err != nil {
		return nil, err
	}
	if err := f.client.MkdirAll(path.Dir(hp), 0o755); err != nil {
		return nil, f.wrap("create", p, err)
	}
	w, err := f.client.Create(hp)
	if err != nil {
		return nil, f.wrap("create", p, err)
	}
	return &hdfsWriter{w: w, fs: f, p: p}, nil
}

type hdfsWriter struct {
	w      *hdfs.FileWriter
	fs     *hdfsFS
	p      string
	once   sync.Once
	result error
}

func (w *hdfsWriter) Write(b []byte) (int, error) {
	n, err := w.w.Write(b)
	if err != nil {
		return n, w.fs.wrap("write", w.p, err)
	}
	return n, nil
}

// Close completes the file, retrying while the last block replicates.
// Later calls return the first call's result.
func (w *hdfsWriter) Close() error {
	w.once.Do(func() {
		err := closeRetrying(w.w, w.fs.opts.CloseRetries, w.fs.opts.CloseRetryBackoff, time.Sleep)
		w.result = w.fs.wrap("close", w.p, err)
	})
	return w.result
}

// closeRetrying calls c.Close, and again after a backoff each time it
// fails with colinmarc/hdfs's ErrReplicating (all data is acknowledged by
// the DataNodes, but the NameNode has not yet seen the last block reach its
// minimum replication), at most retries more times; the delay starts at
// backoff and doubles up to 5s. The Java client does the same.
func closeRetrying(c io.Closer, retries int, backoff time.Duration, sleep func(time.Duration)) error {
	err := c.Close()
	for i := 0; i < retries && isReplicating(err); i++ {
		sleep(backoff)
		backoff = min(2*backoff, 5*time.Second)
		err = c.Close()
	}
	if isReplicating(err) {
		return fmt.Errorf("the last block was still replicating after %d retries: %w", retries, err)
	}
	return err
}

func isReplicating(err error) bool {
	return err != nil && (hdfs.IsErrReplicating(err) || errors.Is(err, hdfs.ErrReplicating))
}

func (f *hdfsFS) Rename(ctx context.Context, from, to string) error {
	hf, err := f.check(ctx, "rename", from)
	if err != nil {
		return err
	}
	ht, err := f.check(ctx, "rename", to)
	if err != nil {
		return err
	}
	if err := f.client.Rename(hf, ht); err != nil {
		return f.wrap("rename", from+" to "+to, err)
	}
	return nil
}

func (f *hdfsFS) Stat(ctx context.Context, p string) (FileInfo, error) {
	hp, err := f.check(ctx, "stat", p)
	if err != nil {
		return FileInfo{}, err
	}
	st, err := f.client.Stat(hp)
	if err != nil {
		return FileInfo{}, f.wrap("stat", p, err)
	}
	return hdfsInfo(hp, st), nil
}

func hdfsInfo(p string, st fs.FileInfo) FileInfo {
	fi := FileInfo{Name: path.Base(p), Path: p, Size: st.Size(), ModTime: st.ModTime(), IsDir: st.IsDir()}
	if hfi, ok := st.(*hdfs.FileInfo); ok {
		fi.Owner = hfi.Owner()
		if bs, ok := hfi.Sys().(interface{ GetBlocksize() uint64 }); ok && !st.IsDir() {
			fi.BlockSize = int64(bs.GetBlocksize())
		}
	}
	return fi
}

func (f *hdfsFS) MkdirAll(ctx context.Context, p string) error {
	hp, err := f.check(ctx, "mkdir", p)
	if err != nil {
		return err
	}
	if err := f.client.MkdirAll(hp, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return f.wrap("mkdir", p, err)
	}
	return nil
}

func (f *hdfsFS) RemoveAll(ctx context.Context, p string) error {
	hp, err := f.check(ctx, "remove", p)
	if err != nil {
		return err
	}
	if hp == "/" {
		return fmt.Errorf("%w: refusing to remove %s", ErrInvalid, f.URI(p))
	}
	if err := f.client.RemoveAll(hp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return f.wrap("remove", p, err)
	}
	return nil
}

func (f *hdfsFS) ReadDir(ctx context.Context, p string) ([]FileInfo, error) {
	hp, err := f.check(ctx, "readdir", p)
	if err != nil {
		return nil, err
	}
	ents, err := f.client.ReadDir(hp)
	if err != nil {
		return nil, f.wrap("readdir", p, err)
	}
	out := make([]FileInfo, 0, len(ents))
	for _, e := range ents {
		out = append(out, hdfsInfo(path.Join(hp, e.Name()), e))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f *hdfsFS) Close() error {
	err := f.client.Close()
	if f.web != nil {
		f.web.CloseIdleConnections()
	}
	f.destroyKerberos()
	return err
}

// destroyKerberos stops the Kerberos client's TGT renewal goroutine.
func (f *hdfsFS) destroyKerberos() {
	if f.krb != nil {
		f.krb.Destroy()
	}
}

// kerberosLoginError explains a failed Kerberos login (AS exchange): the
// principal and keytab (or ticket cache) and the KDC's reason. A KDC that
// cannot be reached is ErrUnavailable; a refusal (wrong key, unknown
// principal, expired password) is ErrPermission.
func kerberosLoginError(k KerberosOptions, err error) error {
	who := fmt.Sprintf("as %s with keytab %s", k.Principal, k.Keytab)
	if k.Keytab == "" {
		who = "from the ticket cache"
	}
	var ke krberror.Krberror
	if errors.As(err, &ke) && ke.RootCause == krberror.NetworkingError {
		return fmt.Errorf("%w: kerberos: logging in %s: no KDC answered: %w", ErrUnavailable, who, err)
	}
	return fmt.Errorf("%w: kerberos: logging in %s failed: %w", ErrPermission, who, err)
}

// timeoutDialer dials with a connect timeout and returns connections whose
// every Read and Write must finish within ioTimeout.
func timeoutDialer(dialTimeout, ioTimeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &deadlineConn{Conn: c, timeout: ioTimeout}, nil
	}
}

// deadlineConn bounds each Read and Write. colinmarc/hdfs does not drop a
// NameNode connection whose read timed out, and the next call on it would
// read a stale answer; so a timeout closes the connection, and the client
// reconnects on its next call. Deadlines set by the client are ignored:
// the per-call timeout governs.
type deadlineConn struct {
	net.Conn
	timeout time.Duration
}

func (c *deadlineConn) Read(b []byte) (int, error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.timeout))
	n, err := c.Conn.Read(b)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.Conn.Close()
	}
	return n, err
}

func (c *deadlineConn) Write(b []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.timeout))
	n, err := c.Conn.Write(b)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.Conn.Close()
	}
	return n, err
}

func (c *deadlineConn) SetDeadline(time.Time) error      { return nil }
func (c *deadlineConn) SetReadDeadline(time.Time) error  { return nil }
func (c *deadlineConn) SetWriteDeadline(time.Time) error { return nil }

// Chmod implements Chmoder (HDFS permissions, enforced by the NameNode
// when dfs.permissions.enabled, its default).
func (f *hdfsFS) Chmod(ctx context.Context, p string, mode os.FileMode) error {
	hp, err := f.check(ctx, "chmod", p)
	if err != nil {
		return err
	}
	return f.wrap("chmod", p, f.client.Chmod(hp, mode))
}
