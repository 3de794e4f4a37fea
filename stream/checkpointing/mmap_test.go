//go:build unix

package checkpointing

import (
	"bytes"
	"context"
	"fmt"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/gofl/gofl/storage"
)

// A restore from a local file maps it: the keyed "state:" sections alias
// the mapping, which stays while their OperatorRestore is reachable and
// is unmapped after; every other section and list element is a copy its
// reader may keep for good.
func TestRestoreMapsLocalFilesWhileTheRestoreLives(t *testing.T) {
	fss := NewFileSystems(storage.Options{})
	defer fss.Close()
	tr := writeCheckpoint(t, fss, t.TempDir(), -1)
	before := liveMappings.Load()
	got, err := Restore(context.Background(), fss, tr, 0, 1, maxPar)
	if err != nil {
		t.Fatal(err)
	}
	if n := liveMappings.Load() - before; n != 4 {
		t.Fatalf("%d files mapped for a restore of 4 local files", n)
	}
	or := got.Operators["op-keyed"]
	g := 3
	if want := fmt.Sprintf("count-%d", g); string(or.Keyed[g]["state:count"]) != want {
		t.Fatalf("state section %q, want %q", or.Keyed[g]["state:count"], want)
	}
	timers := or.Keyed[g]["timers"]
	split := or.Lists["split"]
	got, or = nil, nil
	waitFor(t, "the mappings to be released once the restore is garbage", func() bool {
		goruntime.GC()
		return liveMappings.Load() == before
	})
	// Unmapped memory would fault here: these are copies.
	if !bytes.Equal(timers, bytes.Repeat([]byte{byte(g)}, 300)) {
		t.Fatalf("timers section changed after unmapping: %v", timers[:8])
	}
	if len(split) == 0 || string(split[0]) != "split-0-0" {
		t.Fatalf("list elements after unmapping: %q", split)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
