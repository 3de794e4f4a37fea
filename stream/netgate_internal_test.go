package stream

import (
	"testing"

	"github.com/gofl/gofl/stream/runtime"
)

// A batch the task recycles is handed out again, cleared, and taking it
// allocates nothing; a small one (a trickle's) is not kept.
func TestNetGateReusesRecycledBatches(t *testing.T) {
	g := newNetGate(nil, nil)
	full := g.batch(netBatchSize)
	for i := range netBatchSize {
		full = append(full, runtime.Event{Kind: runtime.EventRecord, Record: runtime.Record{Value: i}})
	}
	g.Recycle(full)
	again := g.batch(8)
	if len(again) != 0 || cap(again) != netBatchSize || &again[:1][0] != &full[0] {
		t.Fatalf("got a batch of len %d cap %d, want the recycled one, empty", len(again), cap(again))
	}
	if v := again[:netBatchSize][netBatchSize-1].Record.Value; v != nil {
		t.Fatalf("a recycled batch still holds record value %v", v)
	}
	g.Recycle(make([]runtime.Event, 3, 8))
	if small := g.batch(netBatchSize); cap(small) != netBatchSize {
		t.Fatalf("got a recycled small batch (cap %d)", cap(small))
	}
	if n := testing.AllocsPerRun(100, func() { g.Recycle(g.batch(netBatchSize)) }); n != 0 {
		t.Fatalf("%v allocations per batch taken and recycled, want 0", n)
	}
}
