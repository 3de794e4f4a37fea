package jobmanager_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/client"
)

// TestFileSourceProgressInREST: while paced-lines reads its input through
// TextFileSource, GET /jobs/{id} reports the source vertex's
// source-progress from the JobMaster's enumerator: the splits listed as
// total, and splits finished growing from below the total up to it.
func TestFileSourceProgressInREST(t *testing.T) {
	parallel(t)
	c := newCluster(t, nil)
	c.startTaskManagerProcess("tm-a", 2)
	c.waitForTaskManagers(1)
	const n = 6000
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	in := filepath.Join(t.TempDir(), "numbers.txt")
	if err := os.WriteFile(in, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	wantSplits := int64((b.Len() + 2047) / 2048)
	// About 3 s of reading: 1000 lines a second per runner process.
	id := c.runSDKJob(testJobBinary, 2, "paced-lines", "--input", in, "--output", filepath.Join(t.TempDir(), "out"),
		"--rate", "1000", "--split-size", "2048")
	src := c.vertexID(id, "Lines")
	var seen []string
	midway, lastDone := false, int64(-1)
	c.eventually(2*time.Minute, func() error {
		d, err := c.client.JobDetails(c.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range d.Vertices {
			if v.ID != src || v.SourceProgress == nil {
				continue
			}
			p := *v.SourceProgress
			if p.Unit != "splits" || p.Total != wantSplits || p.Done < lastDone || p.Done > p.Total || p.BytesTotal != int64(b.Len()) {
				t.Fatalf("source-progress %+v after done %d; want %d splits of %d bytes, done not shrinking", p, lastDone, wantSplits, b.Len())
			}
			if p.Done > 0 && p.Done < p.Total {
				midway = true
			}
			lastDone = p.Done
			seen = append(seen, fmt.Sprintf("%d/%d", p.Done, p.Total))
		}
		if client.IsGloballyTerminal(d.State) {
			if d.State != "FINISHED" {
				t.Fatalf("job ended %s", d.State)
			}
			return nil
		}
		return fmt.Errorf("job still %s; progress seen: %v", d.State, seen)
	})
	if !midway {
		t.Fatalf("no progress between 0 and the total was reported: %v", seen)
	}
	t.Logf("progress seen: %v", seen)
}
