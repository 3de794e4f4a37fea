// Package mailbox gives an endpoint (Dispatcher, ResourceManager, JobMaster,
// TaskExecutor) one goroutine that owns its state, like Flink's RPC main
// thread. RPC handlers and timers hand it work with Post or Call; outgoing
// calls run with Go, whose continuation comes back to the mailbox, so the
// endpoint's state is never touched by two goroutines and needs no locks.
package mailbox

import (
	"context"
	"errors"
	"sync"
)

// ErrClosed is returned for work handed to a mailbox that has stopped.
var ErrClosed = errors.New("mailbox: closed")

// Mailbox runs functions one at a time on the goroutine that called Run.
type Mailbox struct {
	ch      chan func()
	done    chan struct{}
	once    sync.Once
	workers sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc
}

// New returns a mailbox; work queues up until Run starts.
func New() *Mailbox {
	ctx, cancel := context.WithCancel(context.Background())
	return &Mailbox{ch: make(chan func(), 1024), done: make(chan struct{}), ctx: ctx, cancel: cancel}
}

// Run executes queued work until ctx ends, then cancels the calls started
// with Go and waits for them. It blocks; call it once, from the owner.
func (m *Mailbox) Run(ctx context.Context) {
	defer m.stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.ctx.Done():
			return
		case fn := <-m.ch:
			fn()
		}
	}
}

func (m *Mailbox) stop() {
	m.once.Do(func() {
		close(m.done)
		m.cancel()
	})
	m.workers.Wait()
}

// Close stops the mailbox from inside (e.g. a job that ended); Run returns
// after the current function.
func (m *Mailbox) Close() { m.cancel() }

// Done is closed once the mailbox stopped running work.
func (m *Mailbox) Done() <-chan struct{} { return m.done }

// Post queues fn. It blocks while the queue is full and returns false if the
// mailbox stopped. Safe from any goroutine.
func (m *Mailbox) Post(fn func()) bool {
	select {
	case m.ch <- fn:
		return true
	case <-m.done:
		return false
	case <-m.ctx.Done():
		return false
	}
}

// Call runs fn on the mailbox and waits for its result, or for ctx.
func Call[T any](ctx context.Context, m *Mailbox, fn func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	reply := make(chan result, 1)
	var zero T
	if !m.Post(func() { v, err := fn(); reply <- result{v, err} }) {
		return zero, ErrClosed
	}
	select {
	case r := <-reply:
		return r.v, r.err
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-m.done:
		return zero, ErrClosed
	}
}

// Go runs call on its own goroutine with a context that ends when the
// mailbox stops, then runs then(result) on the mailbox. The mailbox owns the
// goroutine: Run waits for it before returning.
func Go[T any](m *Mailbox, call func(ctx context.Context) (T, error), then func(T, error)) {
	m.workers.Add(1)
	go func() {
		defer m.workers.Done()
		v, err := call(m.ctx)
		m.Post(func() { then(v, err) })
	}()
}

// Context ends when the mailbox stops; use it for work the mailbox owns.
func (m *Mailbox) Context() context.Context { return m.ctx }
