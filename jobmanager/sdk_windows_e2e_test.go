package jobmanager_test

import (
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/internal/windowsuite"
)

// The window suite (session, global and count windows, triggers, evictors,
// allowed lateness, late data and process function side outputs) on a
// cluster of two TaskManagers, against its plain-Go reference: window
// contents, side outputs and watermarks cross the network.
func TestWindowSuiteOnCluster(t *testing.T) {
	parallel(t)
	c := newCluster(t, nil)
	c.startTaskManager("tm-a", 2)
	c.startTaskManager("tm-b", 2)
	c.waitForTaskManagers(2)
	const n = 3000
	out := filepath.Join(t.TempDir(), "out")
	id := c.runSDKJob(testJobBinary, 3, "window-suite", "--events", strconv.Itoa(n), "--output", out)
	c.waitFor(id, 90*time.Second, "FINISHED")

	got := readParts(t, out)
	sort.Strings(got)
	want := windowsuite.Expected(windowsuite.Events(n))
	if len(want) == 0 {
		t.Fatal("empty reference")
	}
	count := map[string]int{}
	for _, l := range got {
		count[l]++
	}
	for _, l := range want {
		count[l]--
	}
	var diff []string
	for l, d := range count {
		if d != 0 {
			diff = append(diff, strconv.Itoa(d)+" "+l)
		}
	}
	sort.Strings(diff)
	if len(diff) > 0 {
		if len(diff) > 30 {
			diff = diff[:30]
		}
		t.Fatalf("%d lines, want %d; differences (+extra, -missing):\n%s", len(got), len(want), strings.Join(diff, "\n"))
	}
}
