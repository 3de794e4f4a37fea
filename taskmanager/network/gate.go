package network

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/internal/backoff"
)

// ErrGateClosed is returned by a closed input gate.
var ErrGateClosed = errors.New("network: input gate closed")

// InputChannelSpec names one consumed subpartition and where it lives.
type InputChannelSpec struct {
	Partition    ResultPartitionID
	Subpartition int
	// Address is the producer runner's data address (host:port). Empty, or
	// the local server's address, selects a LocalInputChannel.
	Address string
}

// BufferOrEvent is what InputGate.Next returns: a data buffer (the caller
// must Recycle it) or a decoded event, with the index of its channel.
//
// Priority marks a priority event (an unaligned checkpoint barrier)
// delivered ahead of the buffers its channel received before it; Position
// marks the same event again at its place in the channel's order: what the
// channel delivers between the two was overtaken by it.
type BufferOrEvent struct {
	Buffer   *Buffer
	Event    Event
	Channel  int
	Priority bool
	Position bool
}

// RecordOrEvent is what InputGate.NextRecord returns. Record aliases a
// network buffer and is valid until the next call.
type RecordOrEvent struct {
	Record   []byte
	Event    Event
	Channel  int
	Priority bool // see BufferOrEvent
	Position bool
}

// ChannelError is the failure of one input channel.
type ChannelError struct {
	Channel int
	Spec    InputChannelSpec
	Err     error
}

func (e *ChannelError) Error() string {
	return fmt.Sprintf("network: input channel %d (%s/%d@%s): %v", e.Channel, e.Spec.Partition, e.Spec.Subpartition, e.Spec.Address, e.Err)
}
func (e *ChannelError) Unwrap() error { return e.Err }

type inputChannel interface {
	requestSubpartition() error
	getNextBuffer() (*Buffer, bool, error)
	// getPriorityEvent returns the channel's next priority event if it
	// has one, else nil; the channel then delivers its position marker in
	// order.
	getPriorityEvent() (*Buffer, error)
	release()
}

// InputGate is a task's reader of one consumed result: one input channel per
// consumed subpartition. Next and NextRecord are for one goroutine, the
// task's; Block/UnblockChannel, Metrics and Close may be called from any.
type InputGate struct {
	name     string
	cfg      Config
	log      zerolog.Logger
	specs    []InputChannelSpec
	channels []inputChannel

	// Remote channels' buffers: exclusive ones taken at setup, floating
	// ones handed out by backlog.
	exclusivePool *BufferPool
	floatingPool  *BufferPool

	mu          sync.Mutex
	queue       []int
	queued      []bool
	blocked     []bool
	pending     []bool // notified while blocked
	finished    []bool
	numFinished int
	closed      bool
	err         error // sticky channel failure
	wake        chan struct{}
	// prioQueue lists a channel once per priority event it announced;
	// prioCount is its length, read without the lock on the record path.
	prioQueue  []int
	prioCount  atomic.Int32
	prioSignal chan struct{}

	// record iteration state, consumer goroutine only
	cur     *Buffer
	curPos  int
	curCh   int
	spans   []span
	pendRec int64

	recordsIn, bytesIn, buffersIn, eventsIn atomic.Int64
	waitNs                                  atomic.Int64
}

type span struct {
	buf    []byte
	need   int
	active bool
}

func newInputGate(name string, cfg Config, log zerolog.Logger, specs []InputChannelSpec, numRemote int) *InputGate {
	n := len(specs)
	return &InputGate{
		name: name, cfg: cfg, log: log.With().Str("gate", name).Logger(), specs: specs,
		exclusivePool: newBufferPool(numRemote*cfg.BuffersPerChannel, cfg.BufferSize),
		floatingPool:  newBufferPool(cfg.floating(), cfg.BufferSize),
		queued:        make([]bool, n), blocked: make([]bool, n), pending: make([]bool, n),
		finished: make([]bool, n), spans: make([]span, n), channels: make([]inputChannel, n),
		wake: make(chan struct{}, 1), prioSignal: make(chan struct{}, 1),
	}
}

// notifyPriority announces a priority event of channel i (blocked or not).
func (g *InputGate) notifyPriority(i int) {
	g.mu.Lock()
	if g.closed || g.finished[i] {
		g.mu.Unlock()
		return
	}
	g.prioQueue = append(g.prioQueue, i)
	g.prioCount.Add(1)
	g.mu.Unlock()
	for _, c := range []chan struct{}{g.prioSignal, g.wake} {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// PriorityAvailable is signalled when a priority event arrived; a reader
// blocked elsewhere (handing on earlier records) calls PollPriority then.
// Spurious signals are allowed.
func (g *InputGate) PriorityAvailable() <-chan struct{} { return g.prioSignal }

// PollPriority returns a priority event ahead of everything else the
// gate holds, without blocking; ok is false when there is none. Owner
// goroutine only (like Next). Next and NextRecord return priority events
// first, too.
func (g *InputGate) PollPriority() (boe BufferOrEvent, ok bool, err error) {
	for g.prioCount.Load() > 0 {
		g.mu.Lock()
		if g.closed {
			g.mu.Unlock()
			return BufferOrEvent{}, false, ErrGateClosed
		}
		if len(g.prioQueue) == 0 {
			g.mu.Unlock()
			return BufferOrEvent{}, false, nil
		}
		i := g.prioQueue[0]
		g.prioQueue = g.prioQueue[1:]
		g.prioCount.Add(-1)
		g.mu.Unlock()
		b, err := g.channels[i].getPriorityEvent()
		if err != nil {
			return BufferOrEvent{}, false, g.fail(i, err)
		}
		if b == nil {
			continue // already delivered in order
		}
		ev, err := DecodeEvent(b.Data())
		if err != nil {
			return BufferOrEvent{}, false, &ChannelError{Channel: i, Spec: g.specs[i], Err: err}
		}
		g.eventsIn.Add(1)
		g.notify(i) // its position marker follows
		return BufferOrEvent{Event: ev, Channel: i, Priority: true}, true, nil
	}
	return BufferOrEvent{}, false, nil
}

// fail records channel i's failure as the gate's sticky error.
func (g *InputGate) fail(i int, err error) error {
	cerr := &ChannelError{Channel: i, Spec: g.specs[i], Err: err}
	g.mu.Lock()
	if g.err == nil {
		g.err = cerr
	}
	g.mu.Unlock()
	return cerr
}

// NumChannels returns the number of input channels.
func (g *InputGate) NumChannels() int { return len(g.channels) }

// notify marks channel i as having data (Flink's notifyChannelNonEmpty).
func (g *InputGate) notify(i int) {
	g.mu.Lock()
	if g.closed || g.finished[i] || g.queued[i] {
		g.mu.Unlock()
		return
	}
	if g.blocked[i] {
		g.pending[i] = true
		g.mu.Unlock()
		return
	}
	g.queued[i] = true
	g.queue = append(g.queue, i)
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// BlockChannel stops delivering from channel i (Flink's blocked channels
// during checkpoint barrier alignment). Data that arrives meanwhile stays
// in the channel, bounded by its credit.
func (g *InputGate) BlockChannel(i int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if i < 0 || i >= len(g.blocked) || g.blocked[i] {
		return
	}
	g.blocked[i] = true
	if g.queued[i] {
		g.queued[i] = false
		g.pending[i] = true
		for k, c := range g.queue {
			if c == i {
				g.queue = append(g.queue[:k], g.queue[k+1:]...)
				break
			}
		}
	}
}

// UnblockChannel resumes channel i.
func (g *InputGate) UnblockChannel(i int) {
	g.mu.Lock()
	if i < 0 || i >= len(g.blocked) || !g.blocked[i] {
		g.mu.Unlock()
		return
	}
	g.blocked[i] = false
	p := g.pending[i]
	g.pending[i] = false
	g.mu.Unlock()
	if p {
		g.notify(i)
	}
}

// Next returns the next buffer or event of any channel, blocking until one
// is available. After every channel delivered EndOfPartition it returns
// io.EOF. EndOfPartition events are returned too.
func (g *InputGate) Next(ctx context.Context) (BufferOrEvent, error) {
	var waitStart time.Time
	for {
		g.mu.Lock()
		if g.closed {
			g.mu.Unlock()
			return BufferOrEvent{}, ErrGateClosed
		}
		if g.err != nil {
			err := g.err
			g.mu.Unlock()
			return BufferOrEvent{}, err
		}
		if g.numFinished == len(g.channels) {
			g.mu.Unlock()
			return BufferOrEvent{}, io.EOF
		}
		if len(g.prioQueue) > 0 {
			g.mu.Unlock()
			boe, ok, err := g.PollPriority()
			if err != nil || ok {
				return boe, err
			}
			continue
		}
		if len(g.queue) == 0 {
			g.mu.Unlock()
			if waitStart.IsZero() {
				waitStart = time.Now()
			}
			select {
			case <-g.wake:
				continue
			case <-ctx.Done():
				g.waitNs.Add(int64(time.Since(waitStart)))
				return BufferOrEvent{}, ctx.Err()
			}
		}
		i := g.queue[0]
		g.queue = g.queue[1:]
		g.queued[i] = false
		g.mu.Unlock()

		b, more, err := g.channels[i].getNextBuffer()
		if err != nil {
			cerr := &ChannelError{Channel: i, Spec: g.specs[i], Err: err}
			g.mu.Lock()
			if g.err == nil {
				g.err = cerr
			}
			g.mu.Unlock()
			return BufferOrEvent{}, cerr
		}
		if more {
			g.notify(i)
		}
		if b == nil {
			continue
		}
		if !waitStart.IsZero() {
			g.waitNs.Add(int64(time.Since(waitStart)))
		}
		if !b.isEvent {
			g.buffersIn.Add(1)
			return BufferOrEvent{Buffer: b, Channel: i}, nil
		}
		ev, err := DecodeEvent(b.Data())
		b.Recycle()
		if err != nil {
			return BufferOrEvent{}, &ChannelError{Channel: i, Spec: g.specs[i], Err: err}
		}
		if b.position {
			return BufferOrEvent{Event: ev, Channel: i, Position: true}, nil
		}
		g.eventsIn.Add(1)
		if b.priority {
			return BufferOrEvent{Event: ev, Channel: i, Priority: true}, nil
		}
		if ev.Kind() == KindEndOfPartition {
			g.mu.Lock()
			if !g.finished[i] {
				g.finished[i] = true
				g.numFinished++
			}
			g.mu.Unlock()
			g.channels[i].release()
		}
		return BufferOrEvent{Event: ev, Channel: i}, nil
	}
}

// NextRecord returns the next record (with its channel index) or event. A
// record may span several buffers of its channel; then it is reassembled
// into a per-channel buffer. Returns io.EOF after every channel delivered
// EndOfPartition.
func (g *InputGate) NextRecord(ctx context.Context) (RecordOrEvent, error) {
	if b := g.cur; b != nil && g.prioCount.Load() == 0 {
		pos := g.curPos
		if pos+lengthPrefix <= b.size && !g.spans[g.curCh].active {
			end := pos + lengthPrefix + int(binary.BigEndian.Uint32(b.seg[pos:]))
			if end <= b.size && end > pos {
				g.curPos = end
				g.pendRec++
				return RecordOrEvent{Record: b.seg[pos+lengthPrefix : end], Channel: g.curCh}, nil
			}
		}
	}
	return g.nextRecordSlow(ctx)
}

func (g *InputGate) nextRecordSlow(ctx context.Context) (RecordOrEvent, error) {
	for {
		if g.prioCount.Load() > 0 {
			// Ahead of the rest of the current buffer too.
			boe, ok, err := g.PollPriority()
			if err != nil {
				return RecordOrEvent{}, err
			}
			if ok {
				return RecordOrEvent{Event: boe.Event, Channel: boe.Channel, Priority: true}, nil
			}
		}
		if b := g.cur; b != nil {
			ch := g.curCh
			sp := &g.spans[ch]
			rest := b.size - g.curPos
			switch {
			case sp.active:
				n := min(sp.need, rest)
				sp.buf = append(sp.buf, b.seg[g.curPos:g.curPos+n]...)
				sp.need -= n
				g.curPos += n
				if sp.need == 0 {
					sp.active = false
					g.pendRec++
					return RecordOrEvent{Record: sp.buf, Channel: ch}, nil
				}
			case rest == 0:
			case rest < lengthPrefix:
				return RecordOrEvent{}, g.corrupt(ch, fmt.Errorf("%d stray bytes at the end of a buffer", rest))
			default:
				n := int(binary.BigEndian.Uint32(b.seg[g.curPos:]))
				if n > g.cfg.MaxRecordSize || n < 0 {
					return RecordOrEvent{}, g.corrupt(ch, fmt.Errorf("record of %d bytes exceeds the maximum %d", n, g.cfg.MaxRecordSize))
				}
				g.curPos += lengthPrefix
				if n <= rest-lengthPrefix {
					pos := g.curPos
					g.curPos += n
					g.pendRec++
					return RecordOrEvent{Record: b.seg[pos : pos+n], Channel: ch}, nil
				}
				// spanning record: start reassembly with what is here
				have := rest - lengthPrefix
				sp.buf = append(sp.buf[:0], b.seg[g.curPos:g.curPos+have]...)
				sp.need = n - have
				sp.active = true
				g.curPos += have
			}
			if g.curPos < b.size {
				continue
			}
			g.cur = nil
			g.recordsIn.Add(g.pendRec)
			g.pendRec = 0
			b.Recycle()
		}
		boe, err := g.Next(ctx)
		if err != nil {
			g.recordsIn.Add(g.pendRec)
			g.pendRec = 0
			return RecordOrEvent{}, err
		}
		if boe.Event != nil {
			if g.spans[boe.Channel].active && !boe.Priority {
				return RecordOrEvent{}, g.corrupt(boe.Channel, errors.New("event inside a record spanning buffers"))
			}
			return RecordOrEvent{Event: boe.Event, Channel: boe.Channel, Priority: boe.Priority, Position: boe.Position}, nil
		}
		g.bytesIn.Add(int64(boe.Buffer.size))
		g.cur, g.curPos, g.curCh = boe.Buffer, 0, boe.Channel
	}
}

func (g *InputGate) corrupt(ch int, err error) error {
	if g.cur != nil {
		g.cur.Recycle()
		g.cur = nil
	}
	return &ChannelError{Channel: ch, Spec: g.specs[ch], Err: fmt.Errorf("corrupt record stream: %w", err)}
}

// GateMetrics is a snapshot of an input gate's counters.
type GateMetrics struct {
	NumRecordsIn int64
	NumBytesIn   int64 // bytes of data buffers handed to NextRecord
	NumBuffersIn int64
	NumEventsIn  int64
	// IdleTimeMs is the time Next waited for data (Flink's idleTimeMs).
	IdleTimeMs int64
	// Exclusive and Floating are the remote channels' receive buffers.
	Exclusive PoolStats
	Floating  PoolStats
}

// Metrics returns a snapshot of the gate's counters. NumRecordsIn is
// updated when a buffer has been fully read.
func (g *InputGate) Metrics() GateMetrics {
	return GateMetrics{
		NumRecordsIn: g.recordsIn.Load(), NumBytesIn: g.bytesIn.Load(),
		NumBuffersIn: g.buffersIn.Load(), NumEventsIn: g.eventsIn.Load(),
		IdleTimeMs: time.Duration(g.waitNs.Load()).Milliseconds(),
		Exclusive:  g.exclusivePool.Stats(), Floating: g.floatingPool.Stats(),
	}
}

// Close releases every channel and its buffers. Blocked Next calls of other
// goroutines are not woken (Next is the owner's); use its context.
func (g *InputGate) Close() {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return
	}
	g.closed = true
	g.mu.Unlock()
	for _, c := range g.channels {
		if c != nil {
			c.release()
		}
	}
	g.exclusivePool.destroy()
	g.floatingPool.destroy()
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

func (g *InputGate) requestPartitions() error {
	for i, c := range g.channels {
		if err := c.requestSubpartition(); err != nil {
			return &ChannelError{Channel: i, Spec: g.specs[i], Err: err}
		}
	}
	return nil
}

// localInputChannel reads a subpartition view of the same process directly:
// the producer's buffers are handed over without copying.
type localInputChannel struct {
	g    *InputGate
	idx  int
	spec InputChannelSpec
	mgr  *ResultPartitionManager

	mu       sync.Mutex
	view     SubpartitionView
	err      error
	released bool
	retries  int // partition requests retried so far
	timer    *time.Timer
	// pos is the position marker of the priority event just taken; it is
	// delivered next (nothing of this channel was overtaken at the gate).
	pos *Buffer
}

func (c *localInputChannel) requestSubpartition() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released || c.view != nil {
		return nil
	}
	v, err := c.mgr.CreateSubpartitionView(c.spec.Partition, c.spec.Subpartition, func() { c.g.notify(c.idx) })
	if err != nil {
		if errors.Is(err, ErrPartitionNotFound) && c.retryLocked() {
			return nil
		}
		c.err = err
		c.g.notify(c.idx) // deliver the error through Next
		return nil
	}
	c.view = v
	if pv, ok := v.(*pipelinedView); ok {
		pv.setPriorityListener(func() {
			c.g.notifyPriority(c.idx)
			c.g.notify(c.idx)
		})
	}
	c.g.notify(c.idx)
	return nil
}

func (c *localInputChannel) getPriorityEvent() (*Buffer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	pv, ok := c.view.(*pipelinedView)
	if !ok || c.pos != nil {
		return nil, nil
	}
	b, marked := pv.nextPriority()
	if b != nil && !marked {
		c.pos = positionOf(b)
	}
	return b, nil
}

// retryLocked schedules another request with doubling backoff (Flink's
// request-backoff) and reports whether it did.
func (c *localInputChannel) retryLocked() bool {
	next, ok := nextBackoff(c.retries, c.g.cfg)
	if !ok {
		return false
	}
	c.retries++
	c.timer = time.AfterFunc(next, func() { c.requestSubpartition() })
	return true
}

// nextBackoff is the pause before a channel's retry number n (from 0) and
// whether to retry at all: Flink's request-backoff doubles from the
// initial pause and gives up once a pause has reached the max. The pause
// is jittered so that the consumers of one late producer do not ask in
// step.
func nextBackoff(n int, cfg Config) (time.Duration, bool) {
	if cfg.PartitionRequestMaxBackoff < 0 {
		return 0, false
	}
	bc := backoff.Config{Initial: cfg.PartitionRequestInitialBackoff, Max: cfg.PartitionRequestMaxBackoff, Jitter: -1}
	if n > 0 && bc.Delay(n-1, nil) >= cfg.PartitionRequestMaxBackoff {
		return 0, false
	}
	bc.Jitter = 0.2
	return bc.Delay(n, nil), true
}

func (c *localInputChannel) getNextBuffer() (*Buffer, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, err := c.view, c.err
	if err != nil {
		return nil, false, err
	}
	if p := c.pos; p != nil {
		c.pos = nil
		return p, true, nil
	}
	if v == nil {
		return nil, false, nil
	}
	b, _, more, err := v.NextBuffer()
	if err == nil && b != nil && b.priority {
		// Reached in order before the gate fetched it.
		c.pos = positionOf(b)
		more = true
	}
	return b, more, err
}

// positionOf is the position marker of priority event b.
func positionOf(b *Buffer) *Buffer {
	d := append([]byte(nil), b.Data()...)
	return &Buffer{seg: d, size: len(d), isEvent: true, position: true}
}

// viewHasPriority reports whether v's next buffer is a priority event.
func viewHasPriority(v SubpartitionView) bool {
	pv, ok := v.(*pipelinedView)
	return ok && pv.hasPriority()
}

func (c *localInputChannel) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return
	}
	c.released = true
	if c.timer != nil {
		c.timer.Stop()
	}
	if c.view != nil {
		c.view.Release()
		c.view = nil
	}
}
