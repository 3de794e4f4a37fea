package client_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/internal/blob"
	"github.com/gofl/gofl/internal/blob/blobtest"
	"github.com/gofl/gofl/jobmanager/rest"
	"github.com/gofl/gofl/jobmanager/rest/resttest"
)

// With a digest cache, uploading an unchanged binary again reads none of
// it (its digest is remembered with its stat identity) and sends nothing;
// a changed binary of the same size and path is hashed and sent again.
func TestUploadBlobRemembersDigests(t *testing.T) {
	store, err := blob.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := resttest.NewServer(t, resttest.NewDispatcher(), rest.Options{Blobs: store})
	c, err := client.New(srv.URL, client.WithDigestCache(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "job-binary")
	data := bytes.Repeat([]byte("\x7fELF"), 1_000_000)
	blobtest.WriteSettled(t, path, data)
	key, uploaded, err := c.UploadBlob(ctx, path)
	if err != nil || !uploaded || key != blob.KeyOf(data) {
		t.Fatalf("first upload: %s %v %v; want %s sent", key, uploaded, err, blob.KeyOf(data))
	}
	before := blobtest.ReadBytes(t)
	if k, again, err := c.UploadBlob(ctx, path); err != nil || again || k != key {
		t.Fatalf("second upload: %s %v %v; want %s, nothing sent", k, again, err, key)
	}
	if n := blobtest.ReadBytes(t) - before; n >= int64(len(data)) {
		t.Fatalf("uploading an unchanged binary again read %d bytes", n)
	}
	other := bytes.Repeat([]byte("\x7fELG"), 1_000_000)
	if err := os.WriteFile(path, other, 0o755); err != nil { // no wait: changed in the stamp's tick or later
		t.Fatal(err)
	}
	if k, sent, err := c.UploadBlob(ctx, path); err != nil || !sent || k != blob.KeyOf(other) {
		t.Fatalf("after a change: %s %v %v; want %s sent", k, sent, err, blob.KeyOf(other))
	}
}
