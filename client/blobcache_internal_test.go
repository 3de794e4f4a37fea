package client

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
)

// Pruning removes the least recently used blobs first and never one a live
// cluster (one with a staging directory) uses; staging prunes to
// blob.cache.max-size by itself (issue 13, bug 9).
func TestBlobCachePruning(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, size int) string {
		p := filepath.Join(dir, name)
		b := make([]byte, size)
		copy(b, name)
		if err := os.WriteFile(p, b, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gofl := write("gofl", 1000)
	cfg, _, err := conf.Load(conf.LoadOptions{Env: []string{}, Dynamic: []string{
		"deployment.binary=" + gofl, "staging.dir=file://" + filepath.Join(dir, "staging"), "blob.cache.max-size=0",
	}})
	if err != nil {
		t.Fatal(err)
	}
	d := &ClusterDescriptor{cfg: cfg, log: zerolog.Nop()}
	ctx := context.Background()
	stage := func(id, job string) *staged {
		s, err := d.stage(ctx, id, gofl, job)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	old := stage("c-old", write("job-old", 3000))
	oldKey := old.report.JobKey
	old.Remove() // the cluster ended
	mid := stage("c-mid", write("job-mid", 2000))
	midKey := mid.report.JobKey
	mid.Remove()
	live := stage("c-live", write("job-live", 5000))
	liveKey := live.report.JobKey
	defer live.Remove()

	blobs, err := d.ListBlobs(ctx)
	if err != nil || len(blobs) != 4 {
		t.Fatalf("ListBlobs = %+v, %v", blobs, err)
	}
	// Keep 8000 bytes: dropping the oldest unused blob (3000) is enough.
	removed, err := d.PruneBlobs(ctx, 8000)
	if err != nil || len(removed) != 1 || removed[0].Key != oldKey {
		t.Fatalf("PruneBlobs(8000) removed %+v, %v; want only %s", removed, err, oldKey)
	}
	// Everything unused: the live cluster's job and gofl binaries stay.
	removed, err = d.PruneBlobs(ctx, 0)
	if err != nil || len(removed) != 1 || removed[0].Key != midKey {
		t.Fatalf("PruneBlobs(0) removed %+v, %v; want only %s", removed, err, midKey)
	}
	blobs, _ = d.ListBlobs(ctx)
	for _, b := range blobs {
		if len(b.UsedBy) != 1 || b.UsedBy[0] != "c-live" {
			t.Errorf("blob %s used by %v, want c-live", b.Key, b.UsedBy)
		}
	}
	if len(blobs) != 2 || (blobs[0].Key != liveKey && blobs[1].Key != liveKey) {
		t.Fatalf("left %+v", blobs)
	}

	// With a cap, staging prunes by itself.
	live.Remove()
	cfg2, _, _ := conf.Load(conf.LoadOptions{Env: []string{}, Dynamic: []string{
		"deployment.binary=" + gofl, "staging.dir=file://" + filepath.Join(dir, "staging"), "blob.cache.max-size=2500b",
	}})
	d.cfg = cfg2
	s := stage("c-new", write("job-new", 1200))
	defer s.Remove()
	blobs, _ = d.ListBlobs(ctx)
	if len(blobs) != 2 {
		t.Fatalf("after staging with a 2500-byte cap: %+v", blobs)
	}
	for _, b := range blobs {
		if b.Key == liveKey {
			t.Errorf("the unused job-live blob survived the cap")
		}
	}
}
