// Package mailbox gives an endpoint (Dispatcher, ResourceManager, JobMaster,
// TaskExecutor) one goroutine that owns its state, like Flink's RPC main
// thread. RPC handlers and timers hand it work with Post or Call; outgoing
// calls run with Go, whose continuation comes back to the mailbox, so the
// endpoint's state is never touched by two goroutines and needs no locks.
//
// Post never blocks: the queue is unbounded, so an endpoint may post to
// itself or to another endpoint from inside its own turn without risking a
// deadlock, and a slow endpoint never stalls the ones posting to it.
//
// A mailbox built with NewWithExecutor hands all of this to an Executor
// instead: the fault simulator runs every endpoint's work on one thread in
// an order drawn from its seed.
package mailbox

import (
	"context"
	"errors"
	"sync"
)

// ErrClosed is returned for work handed to a mailbox that has stopped.
var ErrClosed = errors.New("mailbox: closed")

// Executor runs a mailbox's work somewhere other than its own goroutine;
// the fault simulator implements it. Its methods are called from whatever
// goroutine uses the mailbox (in a simulation, the simulator's only one).
type Executor interface {
	// Post schedules fn to run as one turn of m. Non-blocking.
	Post(m *Mailbox, fn func())
	// Call runs fn as a turn of m before it returns (a request handler
	// waiting for its answer), or never if the executor stops first; in
	// either case fn is not running when Call returns. Blocking.
	Call(m *Mailbox, fn func())
	// Go runs call off the mailbox, at a time of the executor's choosing,
	// and afterwards schedules then as a turn of m. Non-blocking.
	Go(m *Mailbox, call func(ctx context.Context), then func())
}

// Mailbox runs functions one at a time on the goroutine that called Run.
type Mailbox struct {
	mu      sync.Mutex
	queue   []func()
	signal  chan struct{} // capacity 1: work was queued
	done    chan struct{}
	once    sync.Once
	workers sync.WaitGroup
	ctx     context.Context
	cancel  context.CancelFunc
	exec    Executor
}

// New returns a mailbox; work queues up until Run starts.
func New() *Mailbox {
	ctx, cancel := context.WithCancel(context.Background())
	return &Mailbox{signal: make(chan struct{}, 1), done: make(chan struct{}), ctx: ctx, cancel: cancel}
}

// NewWithExecutor returns a mailbox whose work exec runs; Run then only
// waits for Close or ctx.
func NewWithExecutor(exec Executor) *Mailbox {
	m := New()
	m.exec = exec
	return m
}

// Run executes queued work until ctx ends or Close, then cancels the calls
// started with Go and waits for them. It blocks; call it once, from the
// owner.
func (m *Mailbox) Run(ctx context.Context) {
	defer m.stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.ctx.Done():
			return
		case <-m.signal:
		}
		for {
			fn := m.take()
			if fn == nil {
				break
			}
			fn()
			if m.ctx.Err() != nil || ctx.Err() != nil {
				return
			}
		}
	}
}

func (m *Mailbox) take() func() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.queue) == 0 {
		return nil
	}
	fn := m.queue[0]
	m.queue[0] = nil
	m.queue = m.queue[1:]
	if len(m.queue) == 0 {
		m.queue = nil // let a burst's backing array go
	}
	return fn
}

func (m *Mailbox) stop() {
	m.once.Do(func() {
		close(m.done)
		m.cancel()
		m.mu.Lock()
		m.queue = nil
		m.mu.Unlock()
	})
	m.workers.Wait()
}

// Close stops the mailbox from inside (e.g. a job that ended); Run returns
// after the current function. With an Executor, Close also marks the
// mailbox done, as no Run loop is there to do it.
func (m *Mailbox) Close() {
	m.cancel()
	if m.exec != nil {
		m.once.Do(func() { close(m.done) })
	}
}

// Done is closed once the mailbox stopped running work.
func (m *Mailbox) Done() <-chan struct{} { return m.done }

// Post queues fn. It never blocks and returns false if the mailbox
// stopped. Safe from any goroutine.
func (m *Mailbox) Post(fn func()) bool {
	if m.ctx.Err() != nil {
		return false
	}
	if m.exec != nil {
		m.exec.Post(m, fn)
		return true
	}
	m.mu.Lock()
	m.queue = append(m.queue, fn)
	m.mu.Unlock()
	select {
	case m.signal <- struct{}{}:
	default:
	}
	return true
}

// Len is the number of queued functions, for metrics and tests.
func (m *Mailbox) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.queue)
}

// Call runs fn on the mailbox and waits for its result, or for ctx.
func Call[T any](ctx context.Context, m *Mailbox, fn func() (T, error)) (T, error) {
	var zero T
	if m.exec != nil {
		if m.ctx.Err() != nil {
			return zero, ErrClosed
		}
		var v T
		var err error
		ran := false
		m.exec.Call(m, func() { v, err = fn(); ran = true })
		if !ran { // the executor stopped first
			return zero, ErrClosed
		}
		return v, err
	}
	type result struct {
		v   T
		err error
	}
	reply := make(chan result, 1)
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
	if m.exec != nil {
		var v T
		var err error
		m.exec.Go(m, func(ctx context.Context) { v, err = call(ctx) }, func() { then(v, err) })
		return
	}
	m.workers.Add(1)
	go func() {
		defer m.workers.Done()
		v, err := call(m.ctx)
		m.Post(func() { then(v, err) })
	}()
}

// Context ends when the mailbox stops; use it for work the mailbox owns.
func (m *Mailbox) Context() context.Context { return m.ctx }
