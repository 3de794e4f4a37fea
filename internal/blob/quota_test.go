package blob

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gofl/gofl/internal/clock"
)

// Attack: 5 x 20 MB anonymous uploads went through and stayed. With a
// total size the store refuses what would pass it, counting what is
// stored already (also across a reopen), and de-duplicated puts are free.
func TestStoreQuota(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.SetMaxTotalSize(250)
	a, b := bytes.Repeat([]byte("a"), 100), bytes.Repeat([]byte("b"), 100)
	for i, d := range [][]byte{a, b, a} {
		want := ""
		if i == 2 {
			want = KeyOf(d) // a client names what it uploads; a stored blob is not read again
		}
		if _, _, err := s.Put(bytes.NewReader(d), want, 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Usage(); got != 200 {
		t.Errorf("usage %d, want 200", got)
	}
	_, _, err = s.Put(bytes.NewReader(bytes.Repeat([]byte("c"), 100)), "", 0)
	var qe *QuotaError
	if !errors.Is(err, ErrQuotaExceeded) || !errors.As(err, &qe) || qe.Max != 250 || qe.Used != 200 {
		t.Fatalf("put past the quota: %v; want a QuotaError", err)
	}
	if err := s.Delete(KeyOf(a)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Put(bytes.NewReader(bytes.Repeat([]byte("c"), 100)), "", 0); err != nil {
		t.Errorf("put after a delete freed room: %v", err)
	}
	s2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := s2.Usage(); got != 200 {
		t.Errorf("usage after reopening %d, want 200", got)
	}
}

// Uploads nothing references go after the grace period; a job's upload
// stays while the job lives and goes once it ended and the grace passed.
func TestUploadsSweep(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Unix(1000, 0))
	u := NewUploads(s, clk, time.Minute)
	put := func(d string) string {
		k, _, err := s.Put(bytes.NewReader([]byte(d)), "", 0)
		if err != nil {
			t.Fatal(err)
		}
		u.Uploaded(k)
		return k
	}
	orphan, used, staged := put("orphan"), put("used"), KeyOf([]byte("staged"))
	if _, _, err := s.Put(bytes.NewReader([]byte("staged")), "", 0); err != nil { // not an upload: never swept
		t.Fatal(err)
	}
	const job = "0123456789abcdef0123456789abcdef"
	u.Reference(used, job)
	live := map[string]bool{job: true}
	isLive := func(_ context.Context, id string) (bool, error) { return live[id], nil }

	u.Sweep(context.Background(), isLive)
	if !s.Has(orphan) || !s.Has(used) {
		t.Fatal("swept before the grace period")
	}
	clk.Advance(time.Minute)
	u.Sweep(context.Background(), isLive)
	if s.Has(orphan) {
		t.Error("an unreferenced upload outlived the grace period")
	}
	if !s.Has(used) {
		t.Error("a live job's binary was swept")
	}
	live[job] = false
	u.Sweep(context.Background(), isLive)
	if s.Has(used) {
		t.Error("the binary of an ended job outlived it")
	}
	if !s.Has(staged) {
		t.Error("a blob that was not uploaded was swept")
	}
	// Touching (HEAD before a de-duplicated submit) restarts the grace.
	k := put("again")
	clk.Advance(50 * time.Second)
	u.Touch(k)
	u.Touch(staged) // not an upload: stays untracked
	clk.Advance(50 * time.Second)
	u.Sweep(context.Background(), isLive)
	if !s.Has(k) {
		t.Error("a blob touched within the grace period was swept")
	}
	clk.Advance(time.Hour)
	u.Sweep(context.Background(), isLive)
	if s.Has(k) || !s.Has(staged) {
		t.Errorf("after the grace: upload kept %v (want false), staged blob kept %v (want true)", s.Has(k), s.Has(staged))
	}
}
