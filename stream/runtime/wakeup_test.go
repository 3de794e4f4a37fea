package runtime

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// wakingSource emits its values one per Poll, each only once it was made
// available (offer, as a coordinator's event arrives): until then it finds
// nothing and asks to be polled again in an hour.
type wakingSource struct {
	vals      []int
	available atomic.Int32
	wake      chan struct{}
	polled    chan struct{} // receives after each NothingAvailable
}

func (s *wakingSource) offer() {
	s.available.Add(1)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *wakingSource) Open(*Context) error     { return nil }
func (s *wakingSource) Close() error            { return nil }
func (s *wakingSource) Wakeup() <-chan struct{} { return s.wake }
func (s *wakingSource) Poll(out Output) (PollStatus, time.Time, error) {
	if len(s.vals) == 0 {
		return EndOfInput, time.Time{}, nil
	}
	if s.available.Load() == 0 {
		s.polled <- struct{}{}
		return NothingAvailable, time.Now().Add(time.Hour), nil
	}
	s.available.Add(-1)
	out.Collect(Record{Value: s.vals[0]})
	s.vals = s.vals[1:]
	return MoreAvailable, time.Time{}, nil
}

// TestWakingSourceEndsTheWait checks that a source's Wakeup ends the
// task's wait after NothingAvailable at once, not at the time Poll asked
// for (an hour): how a split from the coordinator reaches a waiting
// reader.
func TestWakingSourceEndsTheWait(t *testing.T) {
	src := &wakingSource{vals: []int{1, 2}, wake: make(chan struct{}, 1), polled: make(chan struct{})}
	spec := &TaskSpec{
		Name:      "waking",
		Operators: []OperatorSpec{{ID: "src", Name: "src", Input: -1, NewSource: func() Source { return src }}},
		Outputs:   []OutputSpec{{From: 0, NewPartitioner: func(int) Partitioner { return Forward{} }}},
	}
	w := newRecWriter(1)
	done := make(chan error, 1)
	go func() {
		done <- RunTask(context.Background(), spec, TaskEnv{Parallelism: 1, MaxParallelism: 128, Writers: []ResultWriter{w}})
	}()
	deadline := time.After(time.Minute)
	for i := range 2 {
		select {
		case <-src.polled: // the task found nothing and waits
			src.offer()
		case <-deadline:
			t.Fatalf("the task did not poll again after its source's Wakeup (%d values offered)", i)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-deadline:
		t.Fatal("the task still waits after its source's Wakeup")
	}
	var got []any
	for _, ev := range w.sub(0) {
		if ev.Kind == EventRecord {
			got = append(got, ev.Record.Value)
		}
	}
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("written %v, want [1 2]", got)
	}
}
