package runtime

import (
	"slices"
	"sync"
	"testing"
)

// recyclingGate is a LocalGate that records the batches given back.
type recyclingGate struct {
	*LocalGate
	mu       sync.Mutex
	recycled [][]Event
}

func (g *recyclingGate) Recycle(evs []Event) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.recycled = append(g.recycled, evs)
}

// gaveBack reports whether batch (by its first event) was recycled.
func (g *recyclingGate) gaveBack(batch []Event) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.ContainsFunc(g.recycled, func(evs []Event) bool { return &evs[:1][0] == &batch[0] })
}

// A batch the task read through goes back to its gate; one whose tail an
// exactly-once barrier held back does not, as the held events are still
// to be processed from it.
func TestTaskRecyclesOnlyBatchesItIsDoneWith(t *testing.T) {
	op := &ckOp{name: "op"}
	g := &recyclingGate{LocalGate: NewLocalGate(2, 64)}
	h := startGateTask(t, op, []*LocalGate{g.LocalGate}, []InputGate{g}, TaskEnv{}, true)
	read := []Event{rec(1), rec(2)}
	blocked := []Event{rec(3), bar(1, true), rec(4)}
	h.send(0, 0, read...)
	h.send(0, 0, blocked...)
	h.send(0, 1, rec(10), bar(1, true), rec(11))
	h.resp.waitAck(t, 1)
	h.send(0, 0, eop())
	h.send(0, 1, eop())
	h.finalCheckpoint(2)
	if !g.gaveBack(read) {
		t.Fatal("the batch read through was not recycled")
	}
	if g.gaveBack(blocked) {
		t.Fatal("the batch whose events were held back was recycled")
	}
	before, after := split(h.out.sub(0), 1)
	if !slices.Equal(sorted(before), []int{1, 2, 3, 10}) || !slices.Equal(sorted(after), []int{4, 11}) {
		t.Fatalf("records around the barrier: before %v, after %v", before, after)
	}
}
