// Package clock lets endpoints read time and set timers through an
// interface, so that tests and the fault simulator drive time themselves.
// Real is the wall clock. Fake is a manual clock: time moves only when its
// owner calls Advance (or Step), and due timers fire in deadline order on
// the caller's goroutine, which makes runs that use it deterministic.
package clock

import (
	"container/heap"
	"sync"
	"time"
)

// Clock is a source of time and timers. Implementations are safe for
// concurrent use.
type Clock interface {
	// Now returns the current time. Non-blocking.
	Now() time.Time
	// AfterFunc calls f once, after d, on a goroutine of the clock's
	// choosing (Real: its own; Fake: the goroutine that advances it). f must
	// not block for long; endpoints use it only to post to their mailbox.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether it
	// did. Idempotent.
	Stop() bool
	// Reset re-arms the timer to fire after d, whether or not it fired or
	// was stopped; it reports whether it was still pending.
	Reset(d time.Duration) bool
}

// Real is the wall clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time                            { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Or returns c, or Real when c is nil: the default for optional Config fields.
func Or(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}

// Fake is a manual clock. The zero value is not usable; use NewFake.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers timerHeap
	// armed is closed at the next arm (see Armed); nil when nobody waits.
	armed chan struct{}
}

// NewFake returns a manual clock set to start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now implements Clock.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc implements Clock; f runs inside Advance or Step.
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	t := &fakeTimer{c: c, f: f, index: -1}
	c.mu.Lock()
	c.arm(t, d)
	c.mu.Unlock()
	return t
}

func (c *Fake) arm(t *fakeTimer, d time.Duration) {
	c.seq++
	t.at, t.seq = c.now.Add(max(d, 0)), c.seq
	heap.Push(&c.timers, t)
	if c.armed != nil {
		close(c.armed)
		c.armed = nil
	}
}

// Armed returns a channel closed once a timer is pending (at once if one
// is): a test waits on it before it steps time, instead of polling
// Pending.
func (c *Fake) Armed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) > 0 {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if c.armed == nil {
		c.armed = make(chan struct{})
	}
	return c.armed
}

// Advance moves time forward by d, firing every timer due by then in
// deadline order (ties in the order they were set); timers set by fired
// functions fire too if they fall due within d.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for c.fireNext(end) {
	}
	c.mu.Lock()
	if c.now.Before(end) {
		c.now = end
	}
	c.mu.Unlock()
}

// Next returns the deadline of the earliest pending timer.
func (c *Fake) Next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return time.Time{}, false
	}
	return c.timers[0].at, true
}

// Step moves time to the earliest pending timer and fires it (and any due
// at the same instant). It reports false when no timer is pending.
func (c *Fake) Step() bool {
	at, ok := c.Next()
	if !ok {
		return false
	}
	for c.fireNext(at) {
	}
	return true
}

// Pending counts the timers not yet fired or stopped.
func (c *Fake) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

func (c *Fake) fireNext(end time.Time) bool {
	c.mu.Lock()
	if len(c.timers) == 0 || c.timers[0].at.After(end) {
		c.mu.Unlock()
		return false
	}
	t := heap.Pop(&c.timers).(*fakeTimer)
	if t.at.After(c.now) {
		c.now = t.at
	}
	f := t.f
	c.mu.Unlock()
	f()
	return true
}

type fakeTimer struct {
	c     *Fake
	f     func()
	at    time.Time
	seq   uint64
	index int // in the heap; -1 when not pending
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&t.c.timers, t.index)
	return true
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	pending := t.index >= 0
	if pending {
		heap.Remove(&t.c.timers, t.index)
	}
	t.c.arm(t, d)
	return pending
}

type timerHeap []*fakeTimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*fakeTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}
