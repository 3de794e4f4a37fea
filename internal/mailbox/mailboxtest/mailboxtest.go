// Package mailboxtest drives endpoints built on an Executor from a test's
// goroutine, one turn at a time, as the fault simulator does, but in the
// order things were queued.
package mailboxtest

import (
	"context"
	"sync"

	"github.com/gofl/gofl/internal/mailbox"
)

// StepExecutor queues every turn and outgoing call; Drain runs them. Safe
// for concurrent use: handlers called from other goroutines may post.
type StepExecutor struct {
	mu    sync.Mutex
	turns []func()
}

func (e *StepExecutor) push(fn func()) { e.mu.Lock(); e.turns = append(e.turns, fn); e.mu.Unlock() }

// Post implements mailbox.Executor.
func (e *StepExecutor) Post(_ *mailbox.Mailbox, fn func()) { e.push(fn) }

// Call implements mailbox.Executor: fn runs at once.
func (e *StepExecutor) Call(_ *mailbox.Mailbox, fn func()) { fn() }

// Go implements mailbox.Executor: the call runs as a turn of its own, and
// its continuation is queued after it.
func (e *StepExecutor) Go(m *mailbox.Mailbox, call func(context.Context), then func()) {
	e.push(func() { call(m.Context()); e.push(then) })
}

// Drain runs turns until none is left and returns how many ran.
func (e *StepExecutor) Drain() int {
	n := 0
	for {
		e.mu.Lock()
		if len(e.turns) == 0 {
			e.mu.Unlock()
			return n
		}
		fn := e.turns[0]
		e.turns = e.turns[1:]
		e.mu.Unlock()
		fn()
		n++
	}
}

// Pending is the number of queued turns.
func (e *StepExecutor) Pending() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.turns)
}

var _ mailbox.Executor = (*StepExecutor)(nil)
