package stream

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gofl/gofl/stream/runtime"
)

// visible reads the committed output: every line of the files whose name
// does not start with "." or "_", sorted, and the hidden file names.
func visible(t *testing.T, dir string) (lines, hidden []string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") || strings.HasPrefix(e.Name(), "_") {
			hidden = append(hidden, e.Name())
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Fields(string(b))...)
	}
	sort.Strings(lines)
	return lines, hidden
}

func expectLines(t *testing.T, dir string, want ...string) {
	t.Helper()
	got, hidden := visible(t, dir)
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("visible output %v, want %v (hidden files %v)", got, want, hidden)
	}
}

func TestCheckpointWriteAsTextTransactional(t *testing.T) {
	dir := t.TempDir()
	env := NewEnvironment()
	op := FromElements(env, "").WriteAsText(dir).n.newOperator

	h := startHarness(t, op, 1, 0, 1, 128, nil, 0)
	h.send(0, "a1", "a2", "a3")
	s1 := h.snapshot(1)
	expectLines(t, dir) // nothing visible before the commit
	h.notify(1)
	expectLines(t, dir, "a1", "a2", "a3")
	h.send(0, "b1", "b2")
	s2 := h.snapshot(2)
	h.send(0, "c1") // in progress when the task fails
	h.outputs()
	h.fail()
	expectLines(t, dir, "a1", "a2", "a3")
	if _, hidden := visible(t, dir); len(hidden) != 1 || hidden[0] != ".part-0-2.pending" {
		t.Fatalf("want the pending file of checkpoint 2, have %v", hidden)
	}
	// What a killed process leaves: its in-progress file.
	if err := os.WriteFile(filepath.Join(dir, ".part-0-3.inprogress.deadbeef"), []byte("c1\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// Restoring checkpoint 2 commits its pending file (its notification
	// was lost) and removes the in-progress one.
	restore2 := redistribute([]*runtime.OperatorSnapshot{s2}, 1, 128)[0]
	h = startHarness(t, op, 1, 0, 1, 128, restore2, 0)
	h.sync()
	expectLines(t, dir, "a1", "a2", "a3", "b1", "b2")
	if _, hidden := visible(t, dir); len(hidden) != 0 {
		t.Fatalf("stale hidden files %v", hidden)
	}
	h.send(0, "d1")
	h.outputs()
	h.fail()

	// Restoring it again is idempotent.
	h = startHarness(t, op, 1, 0, 1, 128, restore2, 0)
	h.send(0, "e1")
	h.snapshot(3)
	h.send(0, "f1")
	h.snapshot(4)
	expectLines(t, dir, "a1", "a2", "a3", "b1", "b2")
	h.notify(4) // commits 3 too: its notification was lost
	h.finish()
	expectLines(t, dir, "a1", "a2", "a3", "b1", "b2", "e1", "f1")

	// Going back to checkpoint 1 after 2 was pre-committed but not yet
	// committed aborts what came later: nothing new becomes visible.
	dir2 := t.TempDir()
	op2 := FromElements(env, "").WriteAsText(dir2).n.newOperator
	h = startHarness(t, op2, 1, 0, 1, 128, nil, 0)
	h.send(0, "x1")
	s1 = h.snapshot(1)
	h.notify(1)
	h.send(0, "x2")
	h.snapshot(2)
	h.send(0, "x3")
	h.outputs()
	h.fail()
	h = startHarness(t, op2, 1, 0, 1, 128, redistribute([]*runtime.OperatorSnapshot{s1}, 1, 128)[0], 0)
	h.sync()
	expectLines(t, dir2, "x1")
	if _, hidden := visible(t, dir2); len(hidden) != 0 {
		t.Fatalf("aborted output left hidden files %v", hidden)
	}
	h.send(0, "y1")
	h.snapshot(3)
	h.notify(3)
	h.finish()
	expectLines(t, dir2, "x1", "y1")
}

// Rescaling a transactional text sink commits every old subtask's pending
// file and cleans every old subtask's in-progress file.
func TestCheckpointWriteAsTextRescale(t *testing.T) {
	for _, p := range [][2]int{{4, 2}, {4, 6}} {
		dir := t.TempDir()
		env := NewEnvironment()
		op := FromElements(env, "").WriteAsText(dir).n.newOperator
		var snaps []*runtime.OperatorSnapshot
		var want []string
		for i := 0; i < p[0]; i++ {
			h := startHarness(t, op, 1, i, p[0], 128, nil, 0)
			v := "s" + string(rune('0'+i))
			h.send(0, v)
			want = append(want, v)
			snaps = append(snaps, h.snapshot(7))
			h.send(0, "lost")
			h.outputs()
			h.fail()
			if err := os.WriteFile(filepath.Join(dir, ".part-"+string(rune('0'+i))+"-2.inprogress.0badc0de"), []byte("lost\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		expectLines(t, dir)
		for i, r := range redistribute(snaps, p[1], 128) {
			h := startHarness(t, op, 1, i, p[1], 128, r, 0)
			h.sync()
			h.fail()
		}
		expectLines(t, dir, want...)
		if _, hidden := visible(t, dir); len(hidden) != 0 {
			t.Fatalf("p%d -> p%d: stale hidden files %v", p[0], p[1], hidden)
		}
	}
}

// A Collect sink keeps what it gathered before the checkpoint across a
// restore, also rescaled.
func TestCheckpointCollectSink(t *testing.T) {
	env := NewEnvironment()
	c := FromElements(env, 0).Collect()
	op := c.n.newOperator
	var first, second []step
	for i := 0; i < 20; i++ {
		first = append(first, rec(i, i))
		second = append(second, rec(20+i, 20+i))
	}
	_, snaps := runSteps(t, op, 1, 4, 128, nil, first, 0, 1)
	runSteps(t, op, 1, 2, 128, redistribute(snaps, 2, 128), second, 0, 0)
	got := c.Values()
	sort.Ints(got)
	if len(got) != 40 || got[0] != 0 || got[39] != 39 {
		t.Fatalf("collected %v", got)
	}
}

// A region failover restores one subtask of a transactional text sink from
// the union of every subtask's transactions while the others run on: the
// restored subtask commits and aborts only its own old transactions, and a
// running subtask's open part file survives.
func TestCheckpointWriteAsTextRegionFailover(t *testing.T) {
	dir := t.TempDir()
	op := FromElements(NewEnvironment(), "").WriteAsText(dir).n.newOperator
	h0 := startHarness(t, op, 1, 0, 2, 128, nil, 0)
	h1 := startHarness(t, op, 1, 1, 2, 128, nil, 0)
	h0.send(0, "a0")
	h1.send(0, "a1")
	s0, s1 := h0.snapshot(1), h1.snapshot(1)
	// Subtask 0 goes on writing its open transaction; subtask 1 fails
	// before checkpoint 1's notification.
	h0.send(0, "b0")
	h0.sync()
	h1.send(0, "b1")
	h1.outputs()
	h1.fail()
	restored := redistribute([]*runtime.OperatorSnapshot{s0, s1}, 2, 128)[1]
	h1 = startHarness(t, op, 1, 1, 2, 128, restored, 0)
	h1.send(0, "c1")
	h1.sync()
	expectLines(t, dir, "a1") // its own pending part file of checkpoint 1, committed on restore
	h0.send(0, "d0")
	h0.snapshot(2)
	h1.snapshot(2)
	h0.notify(2)
	h1.notify(2)
	expectLines(t, dir, "a0", "a1", "b0", "c1", "d0")
}
