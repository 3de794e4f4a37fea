package mailbox

import (
	"context"
	"errors"
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
