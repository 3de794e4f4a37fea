package kafka

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gofl/gofl/connectors/kafka/kafkatest"
	"github.com/gofl/gofl/stream/source"
)

// sentEvents records, per reader, the kinds of the coordinator's events
// and the splits they carried.
type sentEvents struct {
	mu     sync.Mutex
	kinds  map[int][]source.EventKind
	splits map[int]int
}

func (g *sentEvents) Send(sub int, ev source.Event) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.kinds[sub] = append(g.kinds[sub], ev.Kind)
	g.splits[sub] += len(ev.Splits)
}

func (g *sentEvents) sent(sub int) ([]source.EventKind, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.kinds[sub]), g.splits[sub]
}

type postedCalls chan func()

func (p postedCalls) Post(fn func()) { p <- fn }

// A bounded source's enumerator assigns its partitions and signals the end
// at once, while a reader may not have registered yet (a slow
// TaskManager): that reader gets its partition before the end, not the end
// alone. After the reader's reset it gets both again.
func TestBoundedSourceReaderRegisteringLateGetsItsSplitsFirst(t *testing.T) {
	broker := kafkatest.Broker(t)
	in := kafkatest.Topic(t, broker, "late-reader", 2)
	src, err := NewSource([]string{broker}, intValue, Topics(in), BoundedBy(Latest()))
	if err != nil {
		t.Fatal(err)
	}
	gw := &sentEvents{kinds: map[int][]source.EventKind{}, splits: map[int]int{}}
	calls := make(postedCalls, 16)
	c, err := source.NewCoordinator[int](src, 2, gw, calls)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	run := func(fn func() error) {
		t.Helper()
		if err := fn(); err != nil {
			t.Fatal(err)
		}
	}
	run(c.Start)
	early, late := SplitOwner(in, 0, 2), SplitOwner(in, 1, 2)
	run(func() error { return c.HandleEventFromOperator(early, source.Event{Kind: source.ReaderRegistration}) })
	want := []source.EventKind{source.AddSplits, source.NoMoreSplits}
	for deadline := time.After(time.Minute); ; {
		if kinds, _ := gw.sent(early); slices.Equal(kinds, want) {
			break
		}
		select {
		case fn := <-calls:
			fn()
		case <-deadline:
			kinds, _ := gw.sent(early)
			t.Fatalf("the registered reader was sent %v, want %v", kinds, want)
		}
	}
	if kinds, _ := gw.sent(late); len(kinds) != 0 {
		t.Fatalf("the unregistered reader was sent %v", kinds)
	}
	run(func() error { return c.HandleEventFromOperator(late, source.Event{Kind: source.ReaderRegistration}) })
	if kinds, n := gw.sent(late); !slices.Equal(kinds, want) || n != 1 {
		t.Fatalf("the late reader was sent %v with %d splits, want %v with 1", kinds, n, want)
	}
	c.SubtaskReset(late, 0)
	run(func() error { return c.HandleEventFromOperator(late, source.Event{Kind: source.ReaderRegistration}) })
	if kinds, n := gw.sent(late); !slices.Equal(kinds, append(want, want...)) || n != 2 {
		t.Fatalf("after its reset the late reader was sent %v with %d splits in all, want %v with 2", kinds, n, append(want, want...))
	}
}
