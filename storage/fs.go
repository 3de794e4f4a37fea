package storage

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"strings"
	"time"
)

// FileSystem is the small file-system interface gofl's staging, blob cache
// and checkpoints are written against; file:// and hdfs:// implement it.
//
// Paths are absolute, slash-separated paths inside the file system ("/a/b",
// no scheme or authority); Open returns the root path a URI names. Every
// method blocks until the operation is done or has failed. A method checks
// ctx before it starts and between the chunks of a copy; a network call
// already in flight cannot be interrupted by ctx, but every one is bounded
// by Options.DialTimeout and Options.IOTimeout, so nothing hangs. Errors
// wrap the package's sentinels (ErrNotFound, ErrExist, ErrUnavailable, …)
// and name the URI involved. Implementations are safe for concurrent use.
type FileSystem interface {
	// URI returns the URI of a path in this file system, for messages
	// and for handing a location to another process ("hdfs://nn:9000/p").
	URI(p string) string

	// Open opens a file for reading. Missing: ErrNotFound. The reader of
	// file:// and hdfs:// is also an io.Seeker.
	Open(ctx context.Context, p string) (io.ReadCloser, error)

	// Create creates a new file for writing, making missing parent
	// directories. It fails with ErrExist if p exists. The file is visible
	// under p while it is written, so a file that readers look for by
	// name must be written under a temporary name and renamed: use
	// WriteFileAtomic. The data is durable (on HDFS: the last block is
	// complete, retried while it replicates) only once Close returns nil.
	Create(ctx context.Context, p string) (io.WriteCloser, error)

	// Rename moves from to to in one atomic step, replacing a file at to.
	// The parent of to must exist. Missing from: ErrNotFound.
	Rename(ctx context.Context, from, to string) error

	// Stat describes p. Missing: ErrNotFound.
	Stat(ctx context.Context, p string) (FileInfo, error)

	// MkdirAll creates p and missing parents; an existing directory is not
	// an error (idempotent).
	MkdirAll(ctx context.Context, p string) error

	// RemoveAll removes p and everything below it; a missing p is not an
	// error (idempotent).
	RemoveAll(ctx context.Context, p string) error

	// ReadDir lists a directory's entries sorted by name. Missing:
	// ErrNotFound.
	ReadDir(ctx context.Context, p string) ([]FileInfo, error)

	// Close releases the connection (HDFS) and its file leases. Writers
	// still open are abandoned. The FileSystem must not be used after.
	Close() error
}

// Chmoder is a FileSystem that can restrict who reads a file (file://
// and hdfs:// are): staged secrets are written 0600 with it
// (WriteFilePrivate). Chmod blocks like the other methods; missing p:
// ErrNotFound.
type Chmoder interface {
	Chmod(ctx context.Context, p string, mode os.FileMode) error
}

// FileInfo describes a file or directory.
type FileInfo struct {
	// Name is the last element of Path.
	Name string
	// Path is the absolute path inside the file system.
	Path    string
	Size    int64
	ModTime time.Time
	IsDir   bool
	// Owner is the owning user where the file system records one (HDFS,
	// and file:// on Unix as a numeric UID).
	Owner string
	// BlockSize is the file's block size where the file system stores
	// files in blocks (HDFS); 0 elsewhere. File sources cut splits along
	// blocks.
	BlockSize int64
}

// Options configures Open. The zero value works: every field has a default
// taken from the environment or listed below. file:// uses none of them.
type Options struct {
	// HadoopConfDir is a directory holding core-site.xml and hdfs-site.xml.
	// Default: $HADOOP_CONF_DIR, else $HADOOP_HOME/etc/hadoop, else
	// $HADOOP_HOME/conf. Used for the NameNode of hdfs:///path (no
	// authority) from fs.defaultFS, for HA nameservices
	// (dfs.ha.namenodes.NS, dfs.namenode.rpc-address.NS.NN), and for
	// hadoop.security.authentication, dfs.namenode.kerberos.principal,
	// dfs.data.transfer.protection and dfs.client.use.datanode.hostname.
	HadoopConfDir string

	// User is the HDFS user the client acts as when Kerberos is off.
	// Default: $HADOOP_USER_NAME, else the operating-system user.
	User string

	// Kerberos configures a Kerberos login for a secured cluster.
	Kerberos KerberosOptions

	// DelegationTokenFile is a file of HDFS delegation tokens
	// (WriteDelegationTokens), as a cluster's client ships them. With no
	// keytab and no ticket cache configured, hdfs:// presents the token of
	// its NameNode on the RPC port (SASL DIGEST-MD5). Default: none.
	DelegationTokenFile string

	// DialTimeout bounds each TCP connect to a NameNode or DataNode.
	// Default 10s.
	DialTimeout time.Duration

	// IOTimeout bounds each single network read or write on a NameNode
	// connection, and so every NameNode RPC; a connection that times out
	// is dropped. DataNode streams use max(IOTimeout, 60s), since an idle
	// write stream only hears from the DataNode every 30s. Default 60s.
	IOTimeout time.Duration

	// CloseRetries is how many more times closing an HDFS file retries
	// while the NameNode answers that its last block is still replicating
	// (colinmarc/hdfs's ErrReplicating), with exponential backoff from
	// CloseRetryBackoff, capped at 5s. Default 8 (about 25s in all);
	// negative: no retry.
	CloseRetries int

	// CloseRetryBackoff is the first retry's delay. Default 100ms.
	CloseRetryBackoff time.Duration
}

// KerberosOptions configures the HDFS client's Kerberos login. Kerberos is
// used when Keytab is set, when UseTicketCache is true, or when the Hadoop
// configuration sets hadoop.security.authentication=kerberos (which then
// requires one of the two). The KDC is contacted on the first NameNode
// connection.
type KerberosOptions struct {
	// Keytab is a keytab file to log in with (Flink:
	// security.kerberos.login.keytab). Needs Principal.
	Keytab string
	// Principal is "user[/instance][@REALM]"; without a realm, the
	// default_realm of krb5.conf (Flink: security.kerberos.login.principal).
	Principal string
	// UseTicketCache logs in from the credential cache at $KRB5CCNAME, else
	// /tmp/krb5cc_<uid>, as kinit leaves it (Flink:
	// security.kerberos.login.use-ticket-cache).
	UseTicketCache bool
	// Krb5Conf is the krb5.conf path. Default: $KRB5_CONFIG, else
	// /etc/krb5.conf (Flink: security.kerberos.krb5-conf.path).
	Krb5Conf string
	// ServicePrincipal is the NameNode's service principal, e.g.
	// "nn/_HOST" or "hdfs/_HOST@REALM" (_HOST is the NameNode's host).
	// Default: dfs.namenode.kerberos.principal from the Hadoop configuration.
	ServicePrincipal string
}

func (o Options) withDefaults() Options {
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	if o.IOTimeout <= 0 {
		o.IOTimeout = 60 * time.Second
	}
	if o.CloseRetries == 0 {
		o.CloseRetries = 8
	} else if o.CloseRetries < 0 {
		o.CloseRetries = 0
	}
	if o.CloseRetryBackoff <= 0 {
		o.CloseRetryBackoff = 100 * time.Millisecond
	}
	return o
}

// Open returns the file system a URI names and the root path inside it.
//
//	file:///abs/path, file://localhost/abs/path, /abs/path → the local disk
//	hdfs://host:port/path → that NameNode (port 8020 if omitted), or an HA
//	                        nameservice called host in the Hadoop config
//	hdfs:///path          → the NameNode of fs.defaultFS in the Hadoop config
//
// For hdfs:// Open connects and makes one NameNode call, so an unreachable
// or wrong address fails here with ErrUnavailable naming it, within about
// DialTimeout+IOTimeout. Expand $VARS first (conf.ExpandEnv). The caller
// closes the FileSystem.
func Open(ctx context.Context, uri string, opts Options) (FileSystem, string, error) {
	opts = opts.withDefaults()
	if strings.HasPrefix(uri, "/") {
		uri = "file://" + uri
	}
	u, err := url.Parse(uri)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %q is not a URI: %v", ErrInvalid, uri, err)
	}
	root := path.Clean("/" + u.Path)
	switch u.Scheme {
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, "", fmt.Errorf("%w: %q: a file:// URI names a host (%q); use file:///absolute/path", ErrInvalid, uri, u.Host)
		}
		if u.Path == "" || !strings.HasPrefix(u.Path, "/") {
			return nil, "", fmt.Errorf("%w: %q: file:// needs an absolute path", ErrInvalid, uri)
		}
		return Local(), root, nil
	case "hdfs":
		fs, err := openHDFSFS(ctx, u, opts)
		if err != nil {
			return nil, "", err
		}
		return fs, root, nil
	case "":
		return nil, "", fmt.Errorf("%w: %q has no scheme; use file:///path or hdfs://namenode:port/path", ErrInvalid, uri)
	default:
		return nil, "", fmt.Errorf("%w: %q: unsupported scheme %q (file and hdfs are)", ErrInvalid, uri, u.Scheme)
	}
}

// tempName returns a hidden sibling of p that no other writer picks.
func tempName(p string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	dir, name := path.Split(p)
	return path.Join(dir, "."+name+".tmp-"+hex.EncodeToString(b[:]))
}

// IsTempName reports whether a directory entry is an in-progress write of
// WriteFileAtomic (readers listing a directory skip these).
func IsTempName(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-")
}

// WriteFileAtomic writes everything r yields to p so that p either does not
// change or holds all of it: the bytes go to a temporary sibling, which is
// closed (durable) and then renamed over p. Parent directories are created.
// On any failure the temporary file is removed and p is untouched. It
// returns the number of bytes written.
func WriteFileAtomic(ctx context.Context, fsys FileSystem, p string, r io.Reader) (int64, error) {
	return writeFileAtomic(ctx, fsys, p, r, false)
}

// WriteFilePrivate is WriteFileAtomic for a secret (a key, a token): the
// file is readable and writable by its owner only (0600) before any byte
// is written. A FileSystem that is no Chmoder fails with ErrInvalid.
func WriteFilePrivate(ctx context.Context, fsys FileSystem, p string, r io.Reader) (int64, error) {
	return writeFileAtomic(ctx, fsys, p, r, true)
}

func writeFileAtomic(ctx context.Context, fsys FileSystem, p string, r io.Reader, private bool) (int64, error) {
	ch, ok := fsys.(Chmoder)
	if private && !ok {
		return 0, fmt.Errorf("%w: %s cannot restrict permissions for a secret", ErrInvalid, fsys.URI(p))
	}
	if err := fsys.MkdirAll(ctx, path.Dir(p)); err != nil {
		return 0, err
	}
	tmp := tempName(p)
	w, err := fsys.Create(ctx, tmp)
	if err != nil {
		return 0, err
	}
	if private {
		if err = ch.Chmod(ctx, tmp, 0o600); err != nil {
			w.Close()
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = fsys.RemoveAll(cctx, tmp)
			return 0, err
		}
	}
	n, err := copyCtx(ctx, w, r)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(ctx, tmp, p)
	}
	if err != nil {
		// A fresh context: the cleanup must run even if ctx ended.
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = fsys.RemoveAll(cctx, tmp)
		return 0, err
	}
	return n, nil
}

// ReadFile returns the whole content of p.
func ReadFile(ctx context.Context, fsys FileSystem, p string) ([]byte, error) {
	r, err := fsys.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var buf bytes.Buffer
	if _, err := copyCtx(ctx, &buf, r); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// copyCtx is io.Copy that checks ctx between 256 KiB chunks.
func copyCtx(ctx context.Context, w io.Writer, r io.Reader) (int64, error) {
	buf := make([]byte, 256<<10)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		k, rerr := r.Read(buf)
		if k > 0 {
			m, werr := w.Write(buf[:k])
			n += int64(m)
			if werr != nil {
				return n, werr
			}
			if m < k {
				return n, io.ErrShortWrite
			}
		}
		if errors.Is(rerr, io.EOF) {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}
