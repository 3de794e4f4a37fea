package kafka

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gofl/gofl/connectors/kafka/kafkatest"
	"github.com/gofl/gofl/stream/source"
)

// enumCtx runs the enumerator's async calls one at a time when the test
// steps it, ignoring their delays and periods (each runs once).
type enumCtx struct {
	p        int
	calls    []func()
	assigned map[int][]PartitionSplit
	noMore   map[int]bool
}

func (c *enumCtx) CurrentParallelism() int                      { return c.p }
func (c *enumCtx) RegisteredReaders() map[int]source.ReaderInfo { return nil }
func (c *enumCtx) SendEventToSourceReader(int, []byte)          {}
func (c *enumCtx) SignalNoMoreSplits(subtask int)               { c.noMore[subtask] = true }
func (c *enumCtx) AssignSplits(a map[int][]PartitionSplit) {
	for r, sp := range a {
		c.assigned[r] = append(c.assigned[r], sp...)
	}
}
func (c *enumCtx) CallAsync(call func() (any, error), handler func(any, error), _, _ time.Duration) {
	c.calls = append(c.calls, func() { handler(call()) })
}

// A bounded source whose first offset lookup fails looks again (it has no
// periodic discovery that would), and the partitions found again keep the
// configured starting offsets (Latest here), not the earliest ones of
// partitions discovered later.
func TestBoundedEnumeratorRetriesAFailedDiscovery(t *testing.T) {
	broker := kafkatest.Broker(t)
	in := kafkatest.Topic(t, broker, "retry", 2)
	if err := kafkatest.ProduceNumbers(broker, in, 2, 0, 10); err != nil {
		t.Fatal(err)
	}
	src, err := NewSource([]string{broker}, intValue, Topics(in), StartingOffsets(Latest()), BoundedBy(Latest()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := &enumCtx{p: 2, assigned: map[int][]PartitionSplit{}, noMore: map[int]bool{}}
	en, err := src.CreateEnumerator(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e := en.(*enumerator)
	failures := 1
	e.listOffsets = func(c context.Context, sp []PartitionSplit, init OffsetsInitializer, set func(*PartitionSplit, int64)) error {
		if failures > 0 {
			failures--
			return errors.New("injected: listing offsets failed")
		}
		return e.offsets(c, sp, init, set)
	}
	if err := e.Start(); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for steps := 0; len(ctx.calls) > 0; steps++ {
		if steps > 10 {
			t.Fatal("the enumerator keeps calling")
		}
		call := ctx.calls[0]
		ctx.calls = ctx.calls[1:]
		call()
	}
	if failures != 0 {
		t.Fatal("the injected failure did not happen")
	}
	var n int
	for r, splits := range ctx.assigned {
		for _, sp := range splits {
			n++
			if sp.StartingOffset != 5 || sp.StoppingOffset != 5 {
				t.Errorf("reader %d got %+v, want it to start and stop at the latest offset 5", r, sp)
			}
		}
	}
	if n != 2 || !ctx.noMore[0] || !ctx.noMore[1] {
		t.Fatalf("assigned %v, no more splits %v; want both partitions assigned and both readers told", ctx.assigned, ctx.noMore)
	}
}
