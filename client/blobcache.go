package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/storage"
)

// The staging blob cache (<staging.dir>/.gofl/blobs/sha256/<hex>) is
// shared by every cluster staged there. Each deployment records which
// blobs its cluster uses (blobsFile in the cluster's staging directory,
// which lives as long as the cluster) and when each blob was last staged
// (an empty marker blobs/used/<hex>, recreated on every use), so pruning
// removes the least recently used blobs that no live cluster uses.
const (
	blobsFile = "blobs"
	usedDir   = "used"
)

// CachedBlob is one blob of the staging blob cache.
type CachedBlob struct {
	Key  string
	Size int64
	// LastUsed is when a deployment last staged it.
	LastUsed time.Time
	// UsedBy lists the live clusters (those with a staging directory)
	// that use it.
	UsedBy []string
}

// ErrUnknownBlobUse means a live cluster's staging directory does not say
// which blobs it uses (staged by an older gofl), so nothing is pruned.
var ErrUnknownBlobUse = errors.New("client: a live cluster's blobs are unknown")

// markBlobsUsed records that clusterID uses keys, and that they were used
// now.
func markBlobsUsed(ctx context.Context, st *storage.Staging, clusterID string, keys []string) error {
	for _, k := range keys {
		p, err := st.BlobPath(k)
		if err != nil {
			return err
		}
		// Replaced, not touched: FileSystem has no Chtimes.
		if _, err := storage.WriteFileAtomic(ctx, st.FileSystem(), path.Join(path.Dir(path.Dir(p)), usedDir, path.Base(p)), strings.NewReader("")); err != nil {
			return err
		}
	}
	return st.PutClusterFile(ctx, clusterID, blobsFile, strings.NewReader(strings.Join(keys, "\n")+"\n"))
}

// ListBlobs lists the staging blob cache, least recently used first.
func (d *ClusterDescriptor) ListBlobs(ctx context.Context) ([]CachedBlob, error) {
	st, err := d.openStaging(ctx)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	blobs, err := listBlobs(ctx, st)
	if errors.Is(err, ErrUnknownBlobUse) {
		return blobs, nil // listing is fine; pruning is not
	}
	return blobs, err
}

// PruneBlobs removes the least recently used blobs that no live cluster
// uses until the cache holds at most maxSize bytes (0: every unused blob).
// It returns what it removed. A live cluster whose blobs are unknown stops
// it with ErrUnknownBlobUse before anything is removed.
func (d *ClusterDescriptor) PruneBlobs(ctx context.Context, maxSize int64) ([]CachedBlob, error) {
	st, err := d.openStaging(ctx)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	return pruneBlobs(ctx, st, maxSize)
}

// pruneAfterStaging keeps the cache under blob.cache.max-size; best
// effort, as a full cache must not fail a deployment.
func (d *ClusterDescriptor) pruneAfterStaging(ctx context.Context, st *storage.Staging) {
	max := int64(conf.BlobCacheMaxSize.Get(d.cfg))
	if max <= 0 {
		return
	}
	removed, err := pruneBlobs(ctx, st, max)
	if err != nil {
		d.log.Warn().Err(err).Msg("pruning the staging blob cache")
	}
	for _, b := range removed {
		d.log.Info().Str("blob", b.Key).Int64("size", b.Size).Msg("pruned from the staging blob cache")
	}
}

func pruneBlobs(ctx context.Context, st *storage.Staging, maxSize int64) ([]CachedBlob, error) {
	blobs, err := listBlobs(ctx, st)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, b := range blobs {
		total += b.Size
	}
	var removed []CachedBlob
	for _, b := range blobs { // least recently used first
		if total <= maxSize && maxSize > 0 {
			break
		}
		if len(b.UsedBy) > 0 {
			continue
		}
		p, _ := st.BlobPath(b.Key)
		if err := st.FileSystem().RemoveAll(ctx, p); err != nil {
			return removed, fmt.Errorf("client: pruning blob %s: %w", b.Key, err)
		}
		_ = st.FileSystem().RemoveAll(ctx, path.Join(path.Dir(path.Dir(p)), usedDir, path.Base(p)))
		total -= b.Size
		removed = append(removed, b)
	}
	return removed, nil
}

// listBlobs lists the cache, least recently used first, with the live
// clusters using each blob. With ErrUnknownBlobUse the list is complete but
// UsedBy may miss clusters.
func listBlobs(ctx context.Context, st *storage.Staging) ([]CachedBlob, error) {
	fsys := st.FileSystem()
	dir := path.Join(st.Root(), "blobs", "sha256")
	ents, err := fsys.ReadDir(ctx, dir)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("client: listing the blob cache: %w", err)
	}
	used := map[string]time.Time{}
	if marks, err := fsys.ReadDir(ctx, path.Join(st.Root(), "blobs", usedDir)); err == nil {
		for _, m := range marks {
			used[m.Name] = m.ModTime
		}
	}
	users := map[string][]string{}
	ids, err := st.ListClusters(ctx)
	if err != nil {
		return nil, fmt.Errorf("client: listing the staged clusters: %w", err)
	}
	var unknown []string
	for _, id := range ids {
		b, err := st.GetClusterFile(ctx, id, blobsFile)
		if errors.Is(err, storage.ErrNotFound) {
			unknown = append(unknown, id)
			continue
		} else if err != nil {
			return nil, fmt.Errorf("client: the blobs of cluster %s: %w", id, err)
		}
		for _, k := range strings.Fields(string(bytes.TrimSpace(b))) {
			users[k] = append(users[k], id)
		}
	}
	var out []CachedBlob
	for _, e := range ents {
		if e.IsDir || storage.IsTempName(e.Name) {
			continue
		}
		key := "sha256:" + e.Name
		last := e.ModTime
		if t, ok := used[e.Name]; ok && t.After(last) {
			last = t
		}
		out = append(out, CachedBlob{Key: key, Size: e.Size, LastUsed: last, UsedBy: users[key]})
	}
	slices.SortFunc(out, func(a, b CachedBlob) int { return a.LastUsed.Compare(b.LastUsed) })
	if len(unknown) > 0 {
		return out, fmt.Errorf("%w: %s", ErrUnknownBlobUse, strings.Join(unknown, ", "))
	}
	return out, nil
}
