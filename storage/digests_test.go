//go:build linux

package storage

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/gofl/gofl/internal/blob"
	"github.com/gofl/gofl/internal/blob/blobtest"
)

// Staging an unchanged local file again reads nothing: its digest is
// remembered with its stat identity. A changed file (same size, same
// path) is read again and staged under its new key.
func TestPutBlobFileRemembersDigests(t *testing.T) {
	ctx := testCtx(t)
	s := NewStaging(Local(), t.TempDir())
	bin := filepath.Join(t.TempDir(), "job")
	data := bytes.Repeat([]byte("job binary "), 100_000)
	blobtest.WriteSettled(t, bin, data)
	key, written, err := s.PutBlobFile(ctx, bin)
	if err != nil || !written || key != blob.KeyOf(data) {
		t.Fatalf("PutBlobFile = %s, %v, %v; want %s written", key, written, err, blob.KeyOf(data))
	}
	before := blobtest.ReadBytes(t)
	if k, written, err := s.PutBlobFile(ctx, bin); err != nil || written || k != key {
		t.Fatalf("again: %s, %v, %v; want %s present", k, written, err, key)
	}
	if n := blobtest.ReadBytes(t) - before; n >= int64(len(data)) {
		t.Fatalf("staging an unchanged file again read %d bytes", n)
	}

	other := bytes.Repeat([]byte("JOB BINARY "), 100_000)
	if err := os.WriteFile(bin, other, 0o755); err != nil { // no wait: changed in the stamp's tick or later
		t.Fatal(err)
	}
	if k, written, err := s.PutBlobFile(ctx, bin); err != nil || !written || k != blob.KeyOf(other) {
		t.Fatalf("after a change: %s, %v, %v; want %s written", k, written, err, blob.KeyOf(other))
	}
}
