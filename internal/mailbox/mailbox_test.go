package mailbox

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCallRunsOnMailboxInOrder(t *testing.T) {
	m := New()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { m.Run(ctx); close(stopped) }()
	var seen []int
	for i := 0; i < 100; i++ {
		i := i
		m.Post(func() { seen = append(seen, i) })
	}
	n, err := Call(ctx, m, func() (int, error) { return len(seen), nil })
	if err != nil || n != 100 {
		t.Fatalf("Call = %d, %v", n, err)
	}
	for i, v := range seen {
		if v != i {
			t.Fatalf("order broken at %d: %v", i, seen)
		}
	}
	cancel()
	<-stopped
	if _, err := Call(context.Background(), m, func() (int, error) { return 1, nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Call after stop = %v, want ErrClosed", err)
	}
}

func TestGoContinuesOnMailboxAndIsCancelledOnStop(t *testing.T) {
	m := New()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { m.Run(ctx); close(stopped) }()
	got := make(chan int, 1)
	Go(m, func(context.Context) (int, error) { return 7, nil }, func(v int, err error) { got <- v })
	if v := <-got; v != 7 {
		t.Fatalf("continuation got %d", v)
	}
	Go(m, func(ctx context.Context) (int, error) { <-ctx.Done(); return 0, ctx.Err() }, func(int, error) {})
	cancel()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not stop a blocked call")
	}
}

func TestPostFromInsideNeverBlocks(t *testing.T) {
	m := New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan struct{})
	go func() { m.Run(ctx); close(stopped) }()
	// One turn posts far more than any fixed queue would hold.
	n, err := Call(ctx, m, func() (int, error) {
		for range 100000 {
			m.Post(func() {})
		}
		return m.Len(), nil
	})
	if err != nil || n != 100000 {
		t.Fatalf("queued %d, %v", n, err)
	}
	if _, err := Call(ctx, m, func() (int, error) { return m.Len(), nil }); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-stopped
	if m.Post(func() {}) {
		t.Fatal("Post after stop should report false")
	}
}

// stepExecutor queues everything and runs it when the test says.
type stepExecutor struct{ turns []func() }

func (e *stepExecutor) Post(_ *Mailbox, fn func()) { e.turns = append(e.turns, fn) }
func (e *stepExecutor) Call(_ *Mailbox, fn func()) { fn() }
func (e *stepExecutor) Go(m *Mailbox, call func(context.Context), then func()) {
	e.turns = append(e.turns, func() { call(m.Context()); e.turns = append(e.turns, then) })
}

func TestExecutorRunsEverything(t *testing.T) {
	e := &stepExecutor{}
	m := NewWithExecutor(e)
	var log []string
	m.Post(func() { log = append(log, "post") })
	Go(m, func(context.Context) (int, error) { log = append(log, "call"); return 3, nil },
		func(v int, err error) { log = append(log, "then") })
	v, err := Call(context.Background(), m, func() (int, error) { log = append(log, "inline"); return 1, nil })
	if v != 1 || err != nil {
		t.Fatal(v, err)
	}
	for len(e.turns) > 0 {
		fn := e.turns[0]
		e.turns = e.turns[1:]
		fn()
	}
	if got := strings.Join(log, ","); got != "inline,post,call,then" {
		t.Fatalf("order %s", got)
	}
	m.Close()
	select {
	case <-m.Done():
	default:
		t.Fatal("Close should mark an executor mailbox done")
	}
	if _, err := Call(context.Background(), m, func() (int, error) { return 0, nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Call after Close = %v", err)
	}
}
