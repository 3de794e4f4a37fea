package network

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Buffer is one network buffer: a fixed-size memory segment, the number of
// bytes written, and whether it carries an event instead of records. A
// buffer goes back to where it came from with Recycle, exactly once.
type Buffer struct {
	seg     []byte // len(seg) == capacity
	size    int
	isEvent bool
	owner   recycler // nil: unpooled (events)
	// floating marks a receive buffer taken from a gate's floating pool.
	floating bool
	// cont: the buffer starts with the continuation of a record begun in
	// the previous buffer (a priority event may not be inserted before it).
	cont bool
	// priority marks a priority event (it overtook the buffers queued
	// before it); position marks the place in its channel's order where a
	// priority event was received (consumer side only, never on the wire).
	priority bool
	position bool
}

type recycler interface{ recycle(*Buffer) }

// Data returns the written bytes.
func (b *Buffer) Data() []byte { return b.seg[:b.size] }

// IsEvent reports whether the buffer holds a serialized event.
func (b *Buffer) IsEvent() bool { return b.isEvent }

// Recycle returns the buffer to its pool (or receiving channel).
func (b *Buffer) Recycle() {
	if b.owner != nil {
		b.owner.recycle(b)
	}
}

// ErrPoolClosed is returned by a request on a destroyed buffer pool.
var ErrPoolClosed = errors.New("network: buffer pool destroyed")

// BufferPool is a bounded pool of equally sized buffers. Buffers are
// allocated lazily up to Size and reused afterwards, so the memory of a pool
// never exceeds Size*BufferSize.
type BufferPool struct {
	bufSize int
	size    int
	// overdraft is how many buffers beyond size a request may take (see
	// ResultPartition.Available); 0 until enabled.
	overdraft int

	mu        sync.Mutex
	free      []*Buffer
	allocated int
	inUse     int
	maxInUse  int
	waitCh    chan struct{} // closed when a buffer returns, if someone waits
	// availSince is when available() first told a writer to wait; the
	// time until a buffer returns counts as back pressure, as a blocked
	// request does.
	availSince time.Time
	listeners  []bufferListener
	destroyed  bool
	doneCh     chan struct{}

	backPressuredNs atomic.Int64
}

// bufferListener is offered a recycled buffer; it returns false to decline.
type bufferListener interface {
	offerBuffer(*Buffer) bool
}

func newBufferPool(size, bufSize int) *BufferPool {
	return &BufferPool{bufSize: bufSize, size: size, doneCh: make(chan struct{})}
}

// tryRequest returns a buffer or nil without blocking.
func (p *BufferPool) tryRequest() *Buffer {
	p.mu.Lock()
	b := p.tryRequestLocked()
	p.mu.Unlock()
	return b
}

func (p *BufferPool) tryRequestLocked() *Buffer {
	if p.destroyed {
		return nil
	}
	var b *Buffer
	if n := len(p.free); n > 0 {
		b = p.free[n-1]
		p.free = p.free[:n-1]
	} else if p.allocated < p.size+p.overdraft {
		p.allocated++
		b = &Buffer{seg: make([]byte, p.bufSize), owner: p}
	} else {
		return nil
	}
	p.inUse++
	if p.inUse > p.maxInUse {
		p.maxInUse = p.inUse
	}
	b.size = 0
	b.isEvent, b.cont = false, false
	return b
}

// requestOrListen returns a buffer, or registers l to be offered the next
// recycled one.
func (p *BufferPool) requestOrListen(l bufferListener) *Buffer {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b := p.tryRequestLocked(); b != nil || p.destroyed {
		return b
	}
	p.listeners = append(p.listeners, l)
	return nil
}

// request blocks until a buffer is available, ctx is done or the pool is
// destroyed. Time spent blocked counts as back pressure.
func (p *BufferPool) request(ctx context.Context) (*Buffer, error) {
	var start time.Time
	for {
		p.mu.Lock()
		if p.destroyed {
			p.mu.Unlock()
			return nil, ErrPoolClosed
		}
		if b := p.tryRequestLocked(); b != nil {
			p.mu.Unlock()
			if !start.IsZero() {
				p.backPressuredNs.Add(int64(time.Since(start)))
			}
			return b, nil
		}
		if p.waitCh == nil {
			p.waitCh = make(chan struct{})
		}
		ch := p.waitCh
		p.endAvailWaitLocked() // this request measures from here on
		p.mu.Unlock()
		if start.IsZero() {
			start = time.Now()
		}
		select {
		case <-ch:
		case <-p.doneCh:
		case <-ctx.Done():
			p.backPressuredNs.Add(int64(time.Since(start)))
			return nil, ctx.Err()
		}
	}
}

// available returns nil when fewer than size buffers are in use (or the
// pool is destroyed), else a channel closed when one is recycled; it
// enables up to overdraft buffers beyond size. Spurious wake-ups happen.
func (p *BufferPool) available(overdraft int) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.overdraft < overdraft {
		p.overdraft = overdraft
	}
	if p.destroyed || p.inUse < p.size {
		return nil
	}
	if p.waitCh == nil {
		p.waitCh = make(chan struct{})
	}
	if p.availSince.IsZero() {
		p.availSince = time.Now()
	}
	return p.waitCh
}

// endAvailWaitLocked counts the wait available() started as back pressure.
func (p *BufferPool) endAvailWaitLocked() {
	if !p.availSince.IsZero() {
		p.backPressuredNs.Add(int64(time.Since(p.availSince)))
		p.availSince = time.Time{}
	}
}

func (p *BufferPool) recycle(b *Buffer) {
	p.mu.Lock()
	p.inUse--
	if p.destroyed {
		p.mu.Unlock()
		return
	}
	for len(p.listeners) > 0 {
		l := p.listeners[0]
		p.listeners = p.listeners[1:]
		p.mu.Unlock()
		b.size, b.isEvent, b.cont = 0, false, false
		if l.offerBuffer(b) {
			p.mu.Lock()
			p.inUse++
			if p.inUse > p.maxInUse {
				p.maxInUse = p.inUse
			}
			p.mu.Unlock()
			return
		}
		p.mu.Lock()
		if p.destroyed {
			p.mu.Unlock()
			return
		}
	}
	p.free = append(p.free, b)
	if p.waitCh != nil {
		close(p.waitCh)
		p.waitCh = nil
	}
	p.endAvailWaitLocked()
	p.mu.Unlock()
}

// destroy wakes all waiters with ErrPoolClosed and drops free buffers;
// buffers still out are dropped when recycled.
func (p *BufferPool) destroy() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.destroyed {
		return
	}
	p.destroyed = true
	p.free = nil
	p.listeners = nil
	p.endAvailWaitLocked()
	close(p.doneCh)
	if p.waitCh != nil {
		close(p.waitCh)
		p.waitCh = nil
	}
}

// PoolStats is a snapshot of a buffer pool's counters.
type PoolStats struct {
	Size        int // configured bound
	Allocated   int // buffers ever allocated (never above Size)
	InUse       int // buffers currently handed out
	MaxInUse    int // high-water mark of InUse
	BackPressed time.Duration
}

// Stats returns the pool's counters.
func (p *BufferPool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PoolStats{Size: p.size, Allocated: p.allocated, InUse: p.inUse, MaxInUse: p.maxInUse,
		BackPressed: time.Duration(p.backPressuredNs.Load())}
}
