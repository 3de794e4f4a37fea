package storage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofl/gofl/internal/blob"
	"github.com/gofl/gofl/internal/ids"
)

// Names of the files in a cluster's staging directory.
const (
	// ConfigFile is the configuration snapshot every cluster is started
	// with (YAML, as conf loads it).
	ConfigFile = "gofl.yaml"
	// JobGraphFile is a per-job cluster's JobGraph (jobgraph.Marshal).
	JobGraphFile = "jobgraph.pb"
	// DelegationTokensFile is the HDFS delegation tokens the client
	// obtained for the cluster (JSON, mode 0600).
	DelegationTokensFile = "delegation-tokens.json"
)

// Staging is the staging area under staging.dir:
//
//	<staging.dir>/.gofl/<cluster-id>/           one per cluster: ConfigFile,
//	                                            JobGraphFile (per-job), …
//	<staging.dir>/.gofl/blobs/sha256/<hex>      binaries, by content
//
// The client stages into it before asking a provider for containers; the
// containers read from it. Every file appears under its final name only
// complete (WriteFileAtomic), and every blob read is checked against its
// digest. A Staging is safe for concurrent use, also by several processes.
type Staging struct {
	fs   FileSystem
	root string // <staging.dir>/.gofl
}

// StagingSubdir is the directory under staging.dir that gofl owns.
const StagingSubdir = ".gofl"

// LogsSubdir is the directory in a cluster's staging directory that its
// archived logs go to by default; RemoveCluster keeps it.
const LogsSubdir = "logs"

// blobsDir is the blob cache's directory under the staging root; no cluster
// may take its name.
const blobsDir = "blobs"

// OpenStaging opens the file system of stagingDir (the staging.dir option,
// with $VARS already expanded by conf.ExpandEnv) and returns the staging
// area under it. Closing the Staging closes that file system.
func OpenStaging(ctx context.Context, stagingDir string, opts Options) (*Staging, error) {
	fsys, root, err := Open(ctx, stagingDir, opts)
	if err != nil {
		return nil, err
	}
	return NewStaging(fsys, root), nil
}

// NewStaging returns the staging area under dir (the staging.dir path) in
// fsys. The caller keeps ownership of fsys unless it calls Close.
func NewStaging(fsys FileSystem, dir string) *Staging {
	return &Staging{fs: fsys, root: path.Join(path.Clean("/"+dir), StagingSubdir)}
}

// FileSystem is the file system the staging area lives in.
func (s *Staging) FileSystem() FileSystem { return s.fs }

// Root is the staging root, <staging.dir>/.gofl.
func (s *Staging) Root() string { return s.root }

// Close closes the underlying file system.
func (s *Staging) Close() error { return s.fs.Close() }

// ValidateClusterID accepts what a cluster ID may be: 1–128 of
// [A-Za-z0-9._-], not starting with a dot, and not "blobs".
func ValidateClusterID(id string) error {
	if id == blobsDir {
		return fmt.Errorf("%w: cluster ID %q", ErrInvalid, id)
	}
	if err := ids.ClusterID("cluster ID", id); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// ClusterDir is the cluster's staging directory, <root>/<cluster-id>.
func (s *Staging) ClusterDir(clusterID string) (string, error) {
	if err := ValidateClusterID(clusterID); err != nil {
		return "", err
	}
	return path.Join(s.root, clusterID), nil
}

func (s *Staging) clusterFile(clusterID, name string) (string, error) {
	dir, err := s.ClusterDir(clusterID)
	if err != nil {
		return "", err
	}
	if name == "" || name != path.Base(name) || name == "." || name == ".." || IsTempName(name) {
		return "", fmt.Errorf("%w: staging file name %q", ErrInvalid, name)
	}
	return path.Join(dir, name), nil
}

// PutDelegationTokens stages the cluster's HDFS delegation tokens, readable
// by the staging directory's owner only (0600).
func (s *Staging) PutDelegationTokens(ctx context.Context, clusterID string, tokens []DelegationToken) error {
	return s.PutTokenFile(ctx, clusterID, DelegationTokensFile, tokens)
}

// GetDelegationTokens reads the cluster's staged delegation tokens;
// ErrNotFound if the client staged none.
func (s *Staging) GetDelegationTokens(ctx context.Context, clusterID string) ([]DelegationToken, error) {
	return s.GetTokenFile(ctx, clusterID, DelegationTokensFile)
}

// PutTokenFile stages tokens as the cluster's file name, 0600 (the
// cluster's tokens, or a job's: JobDelegationTokensFile).
func (s *Staging) PutTokenFile(ctx context.Context, clusterID, name string, tokens []DelegationToken) error {
	b, err := json.Marshal(tokenFile{Tokens: tokens})
	if err != nil {
		return err
	}
	return s.PutClusterSecretFile(ctx, clusterID, name, bytes.NewReader(b))
}

// GetTokenFile reads tokens PutTokenFile staged; ErrNotFound if none.
func (s *Staging) GetTokenFile(ctx context.Context, clusterID, name string) ([]DelegationToken, error) {
	b, err := s.GetClusterFile(ctx, clusterID, name)
	if err != nil {
		return nil, err
	}
	return parseTokenFile(b, clusterID+"/"+name)
}

// ClusterFileURI is the URI of a file in the cluster's staging directory,
// for handing to another process.
func (s *Staging) ClusterFileURI(clusterID, name string) (string, error) {
	p, err := s.clusterFile(clusterID, name)
	if err != nil {
		return "", err
	}
	return s.fs.URI(p), nil
}

// RemoveClusterFile removes one staged file; a missing one is no error.
func (s *Staging) RemoveClusterFile(ctx context.Context, clusterID, name string) error {
	p, err := s.clusterFile(clusterID, name)
	if err != nil {
		return err
	}
	if err := s.fs.RemoveAll(ctx, p); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

// ReadStagedDelegationTokens reads a token file a Staging wrote, by its URI
// (ClusterFileURI), with opts (the reader's own credentials). Blocking.
func ReadStagedDelegationTokens(ctx context.Context, uri string, opts Options) ([]DelegationToken, error) {
	fsys, p, err := Open(ctx, uri, opts)
	if err != nil {
		return nil, err
	}
	defer fsys.Close()
	b, err := ReadFile(ctx, fsys, p)
	if err != nil {
		return nil, err
	}
	return parseTokenFile(b, uri)
}

func parseTokenFile(b []byte, name string) ([]DelegationToken, error) {
	var f tokenFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%w: staged delegation tokens %s: %v", ErrInvalid, name, err)
	}
	return f.Tokens, nil
}

// LocalClusterFileURI is the file:// URI of a file in the cluster's
// staging directory when stagingDir (staging.dir, expanded) is a local
// path or file:// URI, found without opening the staging area; ok is
// false for any other scheme (hdfs://). The nomad provider names the
// staged token file to its TaskManagers with it.
func LocalClusterFileURI(stagingDir, clusterID, name string) (uri string, ok bool, err error) {
	if strings.HasPrefix(stagingDir, "/") {
		stagingDir = "file://" + stagingDir
	}
	u, err := url.Parse(stagingDir)
	if err != nil || u.Scheme != "file" {
		return "", false, nil
	}
	p, err := NewStaging(Local(), u.Path).clusterFile(clusterID, name)
	if err != nil {
		return "", false, err
	}
	return Local().URI(p), true, nil
}

// PutClusterFile atomically writes a file into the cluster's staging
// directory, creating the directory, and replacing a file of that name.
// The client calls it before it deploys the cluster.
func (s *Staging) PutClusterFile(ctx context.Context, clusterID, name string, r io.Reader) error {
	p, err := s.clusterFile(clusterID, name)
	if err != nil {
		return err
	}
	_, err = WriteFileAtomic(ctx, s.fs, p, r)
	return err
}

// PutClusterSecretFile is PutClusterFile for a secret (the
// configuration with its token, the cluster's TLS key): readable by the
// cluster's user only (WriteFilePrivate).
func (s *Staging) PutClusterSecretFile(ctx context.Context, clusterID, name string, r io.Reader) error {
	p, err := s.clusterFile(clusterID, name)
	if err != nil {
		return err
	}
	_, err = WriteFilePrivate(ctx, s.fs, p, r)
	return err
}

// GetClusterFile returns a staged file's content. The cluster's processes
// call it at start. Missing: ErrNotFound.
func (s *Staging) GetClusterFile(ctx context.Context, clusterID, name string) ([]byte, error) {
	p, err := s.clusterFile(clusterID, name)
	if err != nil {
		return nil, err
	}
	return ReadFile(ctx, s.fs, p)
}

// PutConfig stages the cluster's configuration snapshot (ConfigFile).
func (s *Staging) PutConfig(ctx context.Context, clusterID string, yaml []byte) error {
	// Private: it may hold rest.authentication.token or passwords.
	return s.PutClusterSecretFile(ctx, clusterID, ConfigFile, bytes.NewReader(yaml))
}

// PutJobGraph stages a per-job cluster's JobGraph (JobGraphFile).
func (s *Staging) PutJobGraph(ctx context.Context, clusterID string, jobGraph []byte) error {
	return s.PutClusterFile(ctx, clusterID, JobGraphFile, bytes.NewReader(jobGraph))
}

// RemoveCluster removes the cluster's staging directory and everything in
// it but its archived logs (LogsSubdir); blobs stay (other clusters may
// share them). Removing a cluster that
// has no directory is not an error, so every party that sees the cluster
// end may call it. The client calls it when a cluster it deployed ends,
// and a per-job or application JobManager when its last job ends.
func (s *Staging) RemoveCluster(ctx context.Context, clusterID string) error {
	dir, err := s.ClusterDir(clusterID)
	if err != nil {
		return err
	}
	ents, err := s.fs.ReadDir(ctx, dir)
	if errors.Is(err, ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	keep := false
	for _, e := range ents {
		if e.Name == LogsSubdir && e.IsDir {
			keep = true
			continue
		}
		if err := s.fs.RemoveAll(ctx, e.Path); err != nil {
			return err
		}
	}
	if keep {
		return nil
	}
	return s.fs.RemoveAll(ctx, dir)
}

// ListClusters returns the IDs of the clusters that have a staging
// directory (not only archived logs), for cleaning up after clusters whose end nobody saw.
func (s *Staging) ListClusters(ctx context.Context) ([]string, error) {
	ents, err := s.fs.ReadDir(ctx, s.root)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir && e.Name != blobsDir && ValidateClusterID(e.Name) == nil && !s.onlyLogs(ctx, e.Path) {
			ids = append(ids, e.Name)
		}
	}
	return ids, nil
}

// onlyLogs reports whether a cluster directory holds nothing but archived
// logs: what RemoveCluster leaves of a cluster that ended.
func (s *Staging) onlyLogs(ctx context.Context, dir string) bool {
	ents, err := s.fs.ReadDir(ctx, dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if e.Name != LogsSubdir {
			return false
		}
	}
	return len(ents) > 0
}

// BlobPath is where the blob with key ("sha256:<hex>", see blob.KeyOf) is
// kept: <root>/blobs/sha256/<hex>.
func (s *Staging) BlobPath(key string) (string, error) {
	h, err := blob.ParseKey(key)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return path.Join(s.root, blobsDir, "sha256", h), nil
}

// BlobURI is BlobPath as a URI, for handing to another process.
func (s *Staging) BlobURI(key string) (string, error) {
	p, err := s.BlobPath(key)
	if err != nil {
		return "", err
	}
	return s.fs.URI(p), nil
}

// LocalBlobPath is where the staging area under stagingDir (staging.dir,
// expanded) keeps the blob key, as a path of this host's file system; ok
// is false unless stagingDir is on the local disk (file:// or a path) and
// key is valid. A process on this host may hard-link such a blob
// (blob.Store.Link) instead of fetching a copy; it need not exist.
func LocalBlobPath(stagingDir, key string) (p string, ok bool) {
	if !strings.HasPrefix(stagingDir, "/") && !strings.HasPrefix(stagingDir, "file:") {
		return "", false // Open would connect to HDFS
	}
	fsys, root, err := Open(context.Background(), stagingDir, Options{})
	if err != nil {
		return "", false
	}
	defer fsys.Close()
	p, err = NewStaging(fsys, root).BlobPath(key)
	if err != nil {
		return "", false
	}
	return LocalPath(fsys, p)
}

// LocalPath is p of fsys as a path of this host's file system, if fsys is
// the local disk.
func LocalPath(fsys FileSystem, p string) (string, bool) {
	if _, local := fsys.(localFS); !local {
		return "", false
	}
	return filepath.FromSlash(p), true
}

// HasBlob reports whether the cache holds key.
func (s *Staging) HasBlob(ctx context.Context, key string) (bool, error) {
	p, err := s.BlobPath(key)
	if err != nil {
		return false, err
	}
	_, err = s.fs.Stat(ctx, p)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// PutBlob adds r's content to the blob cache and returns its key. When the
// cache holds no blob of r's size, the content is certainly new: it is
// uploaded under a temporary name while hashed, in one pass, and renamed
// to its key. Otherwise it is hashed first; if the cache already holds
// that key nothing is uploaded and written is false, else it is uploaded
// under a temporary name, checked against the digest again (r must not
// change in between) and renamed into place; written is true. The client
// calls it to stage the gofl binary and job binaries.
func (s *Staging) PutBlob(ctx context.Context, r io.ReadSeeker) (key string, written bool, err error) {
	if size, err := r.Seek(0, io.SeekEnd); err == nil && s.noBlobOfSize(ctx, size) {
		// Certainly new (equal content has equal size): hashed while it
		// is uploaded, in one pass instead of two.
		if _, err := r.Seek(0, io.SeekStart); err != nil {
			return "", false, fmt.Errorf("storage: rewinding a blob: %w", err)
		}
		return s.putNewBlob(ctx, r)
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return "", false, fmt.Errorf("storage: rewinding a blob: %w", err)
	}
	h := sha256.New()
	if _, err := copyCtx(ctx, h, r); err != nil {
		return "", false, fmt.Errorf("storage: hashing a blob: %w", err)
	}
	key = "sha256:" + hex.EncodeToString(h.Sum(nil))
	p, _ := s.BlobPath(key)
	switch has, err := s.HasBlob(ctx, key); {
	case err != nil:
		return "", false, err
	case has:
		return key, false, nil
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return "", false, fmt.Errorf("storage: rewinding a blob: %w", err)
	}
	vr := &hashingReader{r: r, h: sha256.New()}
	if _, err := WriteFileAtomic(ctx, s.fs, p, &checkAtEOF{hashingReader: vr, key: key}); err != nil {
		return "", false, err
	}
	return key, true, nil
}

// noBlobOfSize reports whether the cache certainly holds no blob of size
// bytes (false when it cannot tell).
func (s *Staging) noBlobOfSize(ctx context.Context, size int64) bool {
	ents, err := s.fs.ReadDir(ctx, path.Join(s.root, blobsDir, "sha256"))
	if errors.Is(err, ErrNotFound) {
		return true
	}
	if err != nil {
		return false
	}
	for _, e := range ents {
		if e.Size == size && !e.IsDir {
			return false
		}
	}
	return true
}

// putNewBlob uploads r under a temporary name while hashing it and renames
// it to its key, marked as verified on the local disk (blob.MarkWritten);
// if the key appeared meanwhile (another client), the upload is dropped
// and written is false.
func (s *Staging) putNewBlob(ctx context.Context, r io.Reader) (key string, written bool, err error) {
	dir := path.Join(s.root, blobsDir, "sha256")
	if err := s.fs.MkdirAll(ctx, dir); err != nil {
		return "", false, err
	}
	tmp := tempName(path.Join(dir, "incoming"))
	removeTmp := func() {
		// A fresh context: the cleanup must run even if ctx ended.
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.fs.RemoveAll(cctx, tmp)
	}
	w, err := s.fs.Create(ctx, tmp)
	if err != nil {
		return "", false, err
	}
	h := sha256.New()
	_, err = copyCtx(ctx, w, &hashingReader{r: r, h: h})
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		removeTmp()
		return "", false, err
	}
	key = "sha256:" + hex.EncodeToString(h.Sum(nil))
	p, _ := s.BlobPath(key)
	if has, err := s.HasBlob(ctx, key); err != nil || has {
		removeTmp()
		return key, false, err
	}
	if lp, ok := LocalPath(s.fs, tmp); ok {
		// The JobManager and the TaskManagers that link it trust this
		// instead of reading it again, each (blob.Store.Link).
		blob.MarkWritten(lp, key)
	}
	if err := s.fs.Rename(ctx, tmp, p); err != nil {
		removeTmp()
		return "", false, err
	}
	return key, true, nil
}

// PutBlobFile is PutBlob for a local file, such as the gofl binary. Where
// the staging area is on this host's disk, it remembers the digest of the
// files it staged (blob.DigestCache, under blobs/digests): an unchanged file
// whose blob is cached is not read again.
func (s *Staging) PutBlobFile(ctx context.Context, localPath string) (key string, written bool, err error) {
	f, err := os.Open(localPath)
	if err != nil {
		return "", false, wrapErr("open", "file://"+localPath, err)
	}
	defer f.Close()
	dir, local := LocalPath(s.fs, path.Join(s.root, blobsDir, digestsDir))
	if !local {
		return s.PutBlob(ctx, f)
	}
	dc := blob.DigestCache{Dir: dir}
	if abs, err := filepath.Abs(localPath); err == nil {
		localPath = abs
	}
	if key, ok := dc.Lookup(localPath, f); ok {
		if has, err := s.HasBlob(ctx, key); err == nil && has {
			return key, false, nil
		}
	}
	read := dc.StartRead(localPath, f)
	if key, written, err = s.PutBlob(ctx, f); err == nil {
		dc.Record(read, f, key)
	}
	return key, written, err
}

// digestsDir holds the digest cache under the blob cache's directory.
const digestsDir = "digests"

// OpenBlob opens a cached blob for reading. The reader hashes what it
// returns and fails at the end, instead of returning io.EOF, with an error
// wrapping ErrDigestMismatch and blob.ErrDigestMismatch if the content does
// not match key; a caller must read to io.EOF before trusting the bytes.
// Missing: ErrNotFound. It fits blob.Cache.Get's fetch function.
func (s *Staging) OpenBlob(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.openBlob(ctx, key)
}

func (s *Staging) openBlob(ctx context.Context, key string) (*blobReader, error) {
	p, err := s.BlobPath(key)
	if err != nil {
		return nil, err
	}
	rc, err := s.fs.Open(ctx, p)
	if err != nil {
		return nil, err
	}
	return &blobReader{
		checkAtEOF: checkAtEOF{hashingReader: &hashingReader{r: rc, h: sha256.New()}, key: key, uri: s.fs.URI(p)},
		c:          rc,
	}, nil
}

// DownloadBlob copies a cached blob into the local store, verifying it, and
// returns its local path. A blob the store already has is not downloaded.
// On a digest mismatch nothing is stored and the error wraps
// ErrDigestMismatch and names the blob's URI. A TaskManager or JobManager
// calls it for the binaries it runs.
func (s *Staging) DownloadBlob(ctx context.Context, key string, store *blob.Store) (string, error) {
	if p, err := store.Path(key); err == nil {
		return p, nil
	}
	rc, err := s.openBlob(ctx, key)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	if _, _, err := store.Put(rc, key, 0); err != nil {
		if rc.mismatch != nil {
			return "", rc.mismatch // the clear message, not the store's wrapping
		}
		if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotFound) {
			return "", err
		}
		u, _ := s.BlobURI(key)
		return "", fmt.Errorf("storage: downloading %s to %s: %w", u, store.Dir(), err)
	}
	return store.Path(key)
}

type hashingReader struct {
	r io.Reader
	h hash.Hash
}

func (v *hashingReader) Read(b []byte) (int, error) {
	n, err := v.r.Read(b)
	v.h.Write(b[:n])
	return n, err
}

// checkAtEOF turns a clean EOF into ErrDigestMismatch when the bytes read
// do not hash to key.
type checkAtEOF struct {
	*hashingReader
	key      string
	uri      string
	mismatch error // set once the content is known not to match
}

func (c *checkAtEOF) Read(b []byte) (int, error) {
	n, err := c.hashingReader.Read(b)
	if err == io.EOF {
		if got := "sha256:" + hex.EncodeToString(c.h.Sum(nil)); got != c.key {
			where := c.key
			if c.uri != "" {
				where = c.uri
			}
			c.mismatch = fmt.Errorf("%w: %s: expected %s, the content hashes to %s: %w",
				ErrDigestMismatch, where, c.key, got, blob.ErrDigestMismatch)
			return n, c.mismatch
		}
	}
	return n, err
}

type blobReader struct {
	checkAtEOF
	c io.Closer
}

func (b *blobReader) Close() error { return b.c.Close() }
