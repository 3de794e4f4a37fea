package network

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"
)

// ResultPartitionID identifies a result partition inside a runner: an opaque
// key chosen by the caller (Flink's IntermediateResultPartitionID plus the
// producer's ExecutionAttemptID). Consumers address one subpartition of it.
type ResultPartitionID string

// ResultPartitionType says how finished buffers are kept.
type ResultPartitionType int

const (
	// Pipelined keeps finished buffers in memory until consumed; the
	// partition's buffer pool bounds them, so a slow consumer backpressures
	// the producer. It is consumable while being produced, once per
	// subpartition, and released when every subpartition delivered
	// EndOfPartition.
	Pipelined ResultPartitionType = iota
	// Blocking spills finished buffers to one file per subpartition under
	// Config.SpillDir. It is consumable after Finish, any number of times,
	// until Release deletes the files.
	Blocking
)

func (t ResultPartitionType) String() string {
	if t == Blocking {
		return "BLOCKING"
	}
	return "PIPELINED"
}

var (
	// ErrPartitionReleased is returned by writers and views of a released
	// partition.
	ErrPartitionReleased = errors.New("network: result partition released")
	// ErrPartitionFinished is returned when writing after Finish.
	ErrPartitionFinished = errors.New("network: result partition finished")
)

// lengthPrefix is the size of a record's length prefix inside a buffer.
const lengthPrefix = 4

// ResultPartition is what a task writes its output into: one subpartition
// per consumer subtask. Records are framed length-prefixed (u32 big endian)
// into network buffers from the partition's bounded pool; a record larger
// than the space left continues in the next buffer(s).
//
// The writer methods (Emit, Broadcast, BroadcastEvent, Finish) must be
// called from one goroutine, the task's, like Flink's RecordWriter; Flush,
// Release and Metrics may be called from any goroutine.
type ResultPartition struct {
	id       ResultPartitionID
	typ      ResultPartitionType
	cfg      Config
	ctx      context.Context
	pool     *BufferPool
	subs     []*subpartition
	log      zerolog.Logger
	onFree   func(*ResultPartition) // unregisters from the manager
	flushAll bool                   // FlushAlways

	finished     atomic.Bool
	released     atomic.Bool
	releaseOnce  sync.Once
	unconsumed   atomic.Int32 // pipelined: subpartitions that have not delivered EndOfPartition
	spillDirPath string
}

func newResultPartition(ctx context.Context, id ResultPartitionID, typ ResultPartitionType, n int, cfg Config, log zerolog.Logger) (*ResultPartition, error) {
	if n < 1 {
		return nil, fmt.Errorf("network: partition %q needs at least one subpartition", id)
	}
	p := &ResultPartition{
		id: id, typ: typ, cfg: cfg, ctx: ctx,
		pool:     newBufferPool(cfg.partitionPoolSize(n), cfg.BufferSize),
		log:      log.With().Str("partition", string(id)).Logger(),
		flushAll: cfg.FlushTimeout == FlushAlways,
	}
	p.unconsumed.Store(int32(n))
	if typ == Blocking {
		dir := cfg.SpillDir
		if dir == "" {
			dir = os.TempDir()
		}
		d, err := os.MkdirTemp(dir, "gofl-partition-"+sanitize(string(id))+"-")
		if err != nil {
			return nil, fmt.Errorf("network: spill directory for partition %q: %w", id, err)
		}
		p.spillDirPath = d
	}
	p.subs = make([]*subpartition, n)
	for i := range p.subs {
		s := &subpartition{p: p, index: i}
		if typ == Blocking {
			s.path = filepath.Join(p.spillDirPath, fmt.Sprintf("sub-%d.data", i))
			f, err := os.Create(s.path)
			if err != nil {
				p.Release()
				return nil, fmt.Errorf("network: spill file for partition %q: %w", id, err)
			}
			s.file = f
			s.fw = bufio.NewWriterSize(f, 64*1024)
		}
		p.subs[i] = s
	}
	return p, nil
}

func sanitize(s string) string {
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

// ID returns the partition's ID.
func (p *ResultPartition) ID() ResultPartitionID { return p.id }

// Type returns the partition's type.
func (p *ResultPartition) Type() ResultPartitionType { return p.typ }

// NumSubpartitions returns the number of subpartitions.
func (p *ResultPartition) NumSubpartitions() int { return len(p.subs) }

// SpillDir returns the directory of a blocking partition's files.
func (p *ResultPartition) SpillDir() string { return p.spillDirPath }

// Emit appends a record to a subpartition. It blocks while the partition's
// buffer pool is exhausted (back pressure) and returns the context's error
// when the partition's context is cancelled.
func (p *ResultPartition) Emit(subpartition int, record []byte) error {
	if uint(subpartition) >= uint(len(p.subs)) {
		return fmt.Errorf("network: partition %q has no subpartition %d", p.id, subpartition)
	}
	s := p.subs[subpartition]
	s.mu.Lock()
	if b := s.cur; b != nil && len(b.seg)-b.size >= lengthPrefix+len(record) {
		binary.BigEndian.PutUint32(b.seg[b.size:], uint32(len(record)))
		copy(b.seg[b.size+lengthPrefix:], record)
		b.size += lengthPrefix + len(record)
		s.records++
		s.bytes += int64(lengthPrefix + len(record))
		s.mu.Unlock()
		if p.flushAll {
			s.flush()
		}
		return nil
	}
	s.mu.Unlock()
	err := s.emitSlow(record)
	if err == nil && p.flushAll {
		s.flush()
	}
	return err
}

// OverdraftBuffers is how many buffers beyond its pool a partition lends
// to a writer that waits for Available (Flink's overdraft buffers).
const OverdraftBuffers = 5

// Available returns nil when the partition's pool has a buffer free, else
// a channel closed when a buffer may have come back (check again). A
// writer that waits for it before each batch of records (a source's poll,
// an input batch) lets its task take checkpoint triggers and priority
// barriers while back-pressured instead of blocking inside Emit; in return
// the partition lends it up to OverdraftBuffers extra buffers, so a batch
// started while available does not block. Without calls to Available the
// pool is bounded as before. Any goroutine; non-blocking.
func (p *ResultPartition) Available() <-chan struct{} {
	return p.pool.available(OverdraftBuffers)
}

// Broadcast appends a record to every subpartition.
func (p *ResultPartition) Broadcast(record []byte) error {
	for i := range p.subs {
		if err := p.Emit(i, record); err != nil {
			return err
		}
	}
	return nil
}

// BroadcastEvent ships the partially filled buffers and then the event to
// every subpartition, so the event stays ordered with the records.
func (p *ResultPartition) BroadcastEvent(ev Event) error {
	data := EncodeEvent(ev)
	if len(data) > p.cfg.BufferSize {
		return fmt.Errorf("network: event of %d bytes exceeds the buffer size", len(data))
	}
	if p.finished.Load() {
		return ErrPartitionFinished
	}
	for _, s := range p.subs {
		if err := s.addEvent(&Buffer{seg: data, size: len(data), isEvent: true}); err != nil {
			return err
		}
	}
	return nil
}

// EmitEvent ships the subpartition's partially filled buffer and then the
// event to that subpartition only (a watermark, for instance, which a
// producer sends to each consumer in turn).
func (p *ResultPartition) EmitEvent(subpartition int, ev Event) error {
	if uint(subpartition) >= uint(len(p.subs)) {
		return fmt.Errorf("network: partition %q has no subpartition %d", p.id, subpartition)
	}
	if ev.Kind() == KindEndOfPartition {
		return fmt.Errorf("network: EndOfPartition is sent by Finish")
	}
	data := EncodeEvent(ev)
	if len(data) > p.cfg.BufferSize {
		return fmt.Errorf("network: event of %d bytes exceeds the buffer size", len(data))
	}
	if p.finished.Load() {
		return ErrPartitionFinished
	}
	return p.subs[subpartition].addEvent(&Buffer{seg: data, size: len(data), isEvent: true})
}

// InFlightBuffer is a copy of a buffer a priority event overtook: records
// (length-prefixed, whole records only) or one encoded event.
type InFlightBuffer struct {
	Data    []byte
	IsEvent bool
}

// EmitPriorityEvent sends ev on a pipelined subpartition ahead of the
// buffers queued there and not consumed yet (Flink's priority events: an
// unaligned checkpoint barrier). The partially filled buffer is finished
// first; the event goes before the first queued buffer that starts at a
// record boundary, after earlier priority events, so no record is split by
// it. It returns copies of the overtaken buffers in order: the output's
// in-flight data of the checkpoint. They are still delivered after the
// event. The event is sent without credit. Writer goroutine only.
func (p *ResultPartition) EmitPriorityEvent(subpartition int, ev Event) ([]InFlightBuffer, error) {
	if uint(subpartition) >= uint(len(p.subs)) {
		return nil, fmt.Errorf("network: partition %q has no subpartition %d", p.id, subpartition)
	}
	if p.typ != Pipelined {
		return nil, fmt.Errorf("network: priority event on the %s partition %q", p.typ, p.id)
	}
	data := EncodeEvent(ev)
	if len(data) > p.cfg.BufferSize {
		return nil, fmt.Errorf("network: event of %d bytes exceeds the buffer size", len(data))
	}
	if p.finished.Load() {
		return nil, ErrPartitionFinished
	}
	return p.subs[subpartition].addPriority(&Buffer{seg: data, size: len(data), isEvent: true, priority: true})
}

func (s *subpartition) addPriority(ev *Buffer) ([]InFlightBuffer, error) {
	s.mu.Lock()
	if s.released {
		s.mu.Unlock()
		return nil, ErrPartitionReleased
	}
	if s.ended {
		s.mu.Unlock()
		return nil, ErrPartitionFinished
	}
	if b := s.cur; b != nil {
		s.cur = nil
		s.addLocked(b) // the view is notified below
	}
	pos := s.head
	for pos < len(s.queue) && (s.queue[pos].priority || s.queue[pos].cont) {
		pos++
	}
	var over []InFlightBuffer
	for _, b := range s.queue[pos:] {
		over = append(over, InFlightBuffer{Data: append([]byte(nil), b.Data()...), IsEvent: b.isEvent})
	}
	s.queue = append(s.queue, nil)
	copy(s.queue[pos+1:], s.queue[pos:])
	s.queue[pos] = ev
	s.priority++
	s.buffers++
	var notify func()
	if s.view != nil {
		notify = s.view.listener
		if s.view.onPriority != nil {
			notify = s.view.onPriority
		}
	}
	s.mu.Unlock()
	if notify != nil {
		notify()
	}
	return over, nil
}

// Flush ships every partially filled buffer.
func (p *ResultPartition) Flush() {
	for _, s := range p.subs {
		s.flush()
	}
}

// Finish sends EndOfPartition to every subpartition; a blocking partition
// becomes readable.
func (p *ResultPartition) Finish() error {
	if err := p.BroadcastEvent(EndOfPartition{}); err != nil {
		return err
	}
	p.finished.Store(true)
	if p.typ == Blocking {
		for _, s := range p.subs {
			if err := s.finishFile(); err != nil {
				return err
			}
		}
	}
	return nil
}

// Release drops all buffers, fails blocked writers and views, deletes a
// blocking partition's files and unregisters the partition. Idempotent.
func (p *ResultPartition) Release() {
	p.releaseOnce.Do(func() {
		p.released.Store(true)
		p.pool.destroy()
		for _, s := range p.subs {
			if s != nil {
				s.release()
			}
		}
		if p.spillDirPath != "" {
			if err := os.RemoveAll(p.spillDirPath); err != nil {
				p.log.Warn().Err(err).Msg("deleting spill files")
			}
		}
		if p.onFree != nil {
			p.onFree(p)
		}
	})
}

// IsReleased reports whether Release was called.
func (p *ResultPartition) IsReleased() bool { return p.released.Load() }

// PartitionMetrics is a snapshot of a partition's counters.
type PartitionMetrics struct {
	NumRecordsOut int64
	NumBytesOut   int64 // serialized bytes, length prefixes included
	NumBuffersOut int64 // finished buffers (data and events)
	// BackPressuredTimeMs is the time writers spent blocked requesting a
	// buffer (Flink's backPressuredTimeMsPerSecond, accumulated).
	BackPressuredTimeMs int64
	// QueuedBuffers is the number of finished buffers not yet consumed
	// (pipelined) — Flink's outPoolUsage numerator together with InUse.
	QueuedBuffers int
	Pool          PoolStats
}

// Metrics returns a snapshot of the partition's counters.
func (p *ResultPartition) Metrics() PartitionMetrics {
	var m PartitionMetrics
	for _, s := range p.subs {
		s.mu.Lock()
		m.NumRecordsOut += s.records
		m.NumBytesOut += s.bytes
		m.NumBuffersOut += s.buffers
		m.QueuedBuffers += len(s.queue) - s.head
		s.mu.Unlock()
	}
	m.Pool = p.pool.Stats()
	m.BackPressuredTimeMs = m.Pool.BackPressed.Milliseconds()
	return m
}

// subpartition holds the buffer under construction and, for pipelined
// partitions, the queue of finished buffers; for blocking ones the spill
// file.
type subpartition struct {
	p     *ResultPartition
	index int

	mu      sync.Mutex
	cur     *Buffer
	queue   []*Buffer
	head    int
	backlog int // data buffers in queue
	// priority counts the priority events in queue not consumed yet.
	priority int
	view     *pipelinedView
	released bool
	ended    bool // EndOfPartition added

	// blocking
	path       string
	file       *os.File
	fw         *bufio.Writer
	numBuffers int
	ferr       error
	views      map[*blockingView]struct{}

	records, bytes, buffers int64
}

func (s *subpartition) emitSlow(rec []byte) error {
	p := s.p
	headerDone := false
	s.mu.Lock()
	for {
		if s.released {
			s.mu.Unlock()
			return ErrPartitionReleased
		}
		if s.ended {
			s.mu.Unlock()
			return ErrPartitionFinished
		}
		if b := s.cur; b != nil {
			if !headerDone {
				if len(b.seg)-b.size >= lengthPrefix {
					binary.BigEndian.PutUint32(b.seg[b.size:], uint32(len(rec)))
					b.size += lengthPrefix
					s.bytes += int64(lengthPrefix + len(rec))
					headerDone = true
				}
			}
			if headerDone {
				n := copy(b.seg[b.size:], rec)
				b.size += n
				rec = rec[n:]
			}
			var notify func()
			if b.size == len(b.seg) || !headerDone {
				s.cur = nil
				notify = s.addLocked(b)
			}
			if headerDone && len(rec) == 0 {
				s.records++
				s.mu.Unlock()
				if notify != nil {
					notify()
				}
				return nil
			}
			if notify != nil {
				s.mu.Unlock()
				notify()
				s.mu.Lock()
				continue
			}
		}
		s.mu.Unlock()
		b, err := p.pool.request(p.ctx)
		if err != nil {
			if errors.Is(err, ErrPoolClosed) {
				return ErrPartitionReleased
			}
			return err
		}
		s.mu.Lock()
		if s.released {
			s.mu.Unlock()
			b.Recycle()
			return ErrPartitionReleased
		}
		b.cont = headerDone
		s.cur = b
	}
}

// addLocked takes a finished buffer; it returns the availability
// notification to call after unlocking, if any.
func (s *subpartition) addLocked(b *Buffer) func() {
	if b.size == 0 && !b.isEvent {
		b.Recycle()
		return nil
	}
	s.buffers++
	if s.p.typ == Blocking {
		s.spillLocked(b)
		return nil
	}
	wasEmpty := s.head == len(s.queue)
	if s.head > 0 && s.head == len(s.queue) {
		s.queue = s.queue[:0]
		s.head = 0
	}
	s.queue = append(s.queue, b)
	if !b.isEvent {
		s.backlog++
	}
	if wasEmpty && s.view != nil {
		return s.view.listener
	}
	return nil
}

func (s *subpartition) flush() {
	s.mu.Lock()
	var notify func()
	if b := s.cur; b != nil && b.size > 0 {
		s.cur = nil
		notify = s.addLocked(b)
	}
	s.mu.Unlock()
	if notify != nil {
		notify()
	}
}

func (s *subpartition) addEvent(ev *Buffer) error {
	s.mu.Lock()
	if s.released {
		s.mu.Unlock()
		return ErrPartitionReleased
	}
	if s.ended {
		s.mu.Unlock()
		return ErrPartitionFinished
	}
	var n1 func()
	if b := s.cur; b != nil {
		s.cur = nil
		n1 = s.addLocked(b)
	}
	n2 := s.addLocked(ev)
	if ev.isEvent && ev.size == 1 && EventKind(ev.seg[0]) == KindEndOfPartition {
		s.ended = true
	}
	s.mu.Unlock()
	if n1 != nil {
		n1()
	} else if n2 != nil {
		n2()
	}
	return nil
}

func (s *subpartition) release() {
	s.mu.Lock()
	if s.released {
		s.mu.Unlock()
		return
	}
	s.released = true
	if s.cur != nil {
		s.cur.Recycle()
		s.cur = nil
	}
	for _, b := range s.queue[s.head:] {
		b.Recycle()
	}
	s.queue, s.head, s.backlog = nil, 0, 0
	var listeners []func()
	if s.view != nil {
		listeners = append(listeners, s.view.listener)
	}
	for v := range s.views {
		listeners = append(listeners, v.listener)
	}
	if s.file != nil {
		s.file.Close()
		s.file = nil
	}
	s.mu.Unlock()
	for _, l := range listeners {
		l()
	}
}

// spill file record: flags u8 (1 = event), length u32, data.
func (s *subpartition) spillLocked(b *Buffer) {
	if s.ferr == nil && s.fw != nil {
		var hdr [5]byte
		if b.isEvent {
			hdr[0] = 1
		}
		binary.BigEndian.PutUint32(hdr[1:], uint32(b.size))
		if _, err := s.fw.Write(hdr[:]); err != nil {
			s.ferr = err
		} else if _, err := s.fw.Write(b.Data()); err != nil {
			s.ferr = err
		}
		s.numBuffers++
	}
	b.Recycle()
}

func (s *subpartition) finishFile() error {
	s.mu.Lock()
	err := s.ferr
	if err == nil && s.fw != nil {
		err = s.fw.Flush()
		if cerr := s.file.Close(); err == nil {
			err = cerr
		}
		s.file, s.fw = nil, nil
	}
	var listeners []func()
	for v := range s.views {
		listeners = append(listeners, v.listener)
	}
	s.mu.Unlock()
	for _, l := range listeners {
		l()
	}
	if err != nil {
		return fmt.Errorf("network: spilling partition %q subpartition %d: %w", s.p.id, s.index, err)
	}
	return nil
}

// SubpartitionView is how a consumer (a local input channel or the server
// side of a remote one) reads one subpartition: Flink's
// ResultSubpartitionView. NextBuffer never blocks; it returns a nil buffer
// when nothing is available, and the listener given at creation is called
// whenever data may have become available (spurious calls are allowed).
type SubpartitionView interface {
	// NextBuffer returns the next buffer, the number of data buffers
	// queued behind it (the backlog) and whether more is available now.
	NextBuffer() (buf *Buffer, backlog int, more bool, err error)
	// Release gives up the view; its unread buffers stay with the partition.
	Release()
}

func (s *subpartition) createView(listener func()) (SubpartitionView, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return nil, ErrPartitionReleased
	}
	if s.p.typ == Blocking {
		v := &blockingView{s: s, listener: listener, pool: newBufferPool(2, s.p.cfg.BufferSize)}
		if s.views == nil {
			s.views = map[*blockingView]struct{}{}
		}
		s.views[v] = struct{}{}
		return v, nil
	}
	if s.view != nil {
		return nil, fmt.Errorf("network: subpartition %d of partition %q is already being consumed", s.index, s.p.id)
	}
	s.view = &pipelinedView{s: s, listener: listener}
	return s.view, nil
}

type pipelinedView struct {
	s        *subpartition
	listener func()
	// onPriority, when set, is called instead of listener when a priority
	// event is queued (a local input channel's gate fetches it at once).
	onPriority func()
}

// setPriorityListener sets onPriority; called once, before any priority
// event can be queued for this view's consumer.
func (v *pipelinedView) setPriorityListener(l func()) {
	v.s.mu.Lock()
	v.onPriority = l
	v.s.mu.Unlock()
}

// hasPriority reports whether the next buffer is a priority event, which
// is sent without credit.
func (v *pipelinedView) hasPriority() bool {
	s := v.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.released && s.head < len(s.queue) && s.queue[s.head].priority
}

// nextPriority returns the next priority event if only continuation
// buffers precede it, else nil; marked: its position marker took its
// place in the queue (delivered in order after those continuations).
func (v *pipelinedView) nextPriority() (b *Buffer, marked bool) {
	s := v.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return nil, false
	}
	// addPriority puts the event behind the continuations of a record
	// already begun: take it from there, leaving its position marker in
	// its place, so the consumer need not drain them first.
	i := s.head
	for i < len(s.queue) && !s.queue[i].priority && s.queue[i].cont {
		i++
	}
	if i == len(s.queue) || !s.queue[i].priority {
		return nil, false
	}
	b = s.queue[i]
	s.priority--
	if i == s.head {
		s.queue[s.head] = nil
		s.head++
		return b, false
	}
	s.queue[i] = positionOf(b)
	return b, true
}

func (v *pipelinedView) NextBuffer() (*Buffer, int, bool, error) {
	s := v.s
	s.mu.Lock()
	if s.released {
		s.mu.Unlock()
		return nil, 0, false, ErrPartitionReleased
	}
	if s.head == len(s.queue) {
		s.mu.Unlock()
		return nil, 0, false, nil
	}
	b := s.queue[s.head]
	s.queue[s.head] = nil
	s.head++
	if !b.isEvent {
		s.backlog--
	}
	if b.priority {
		s.priority--
	}
	backlog, more := s.backlog, s.head < len(s.queue)
	eop := b.isEvent && b.size == 1 && EventKind(b.seg[0]) == KindEndOfPartition
	s.mu.Unlock()
	if eop && s.p.unconsumed.Add(-1) == 0 {
		// Every subpartition delivered EndOfPartition: Flink releases a
		// pipelined partition on consumption.
		s.p.Release()
	}
	return b, backlog, more, nil
}

func (v *pipelinedView) Release() {
	s := v.s
	s.mu.Lock()
	if s.view == v {
		s.view = nil
	}
	s.mu.Unlock()
}

type blockingView struct {
	s        *subpartition
	listener func()
	pool     *BufferPool

	mu      sync.Mutex
	f       *os.File
	r       *bufio.Reader
	read    int
	done    bool
	release bool
}

func (v *blockingView) offerBuffer(b *Buffer) bool {
	// The buffer goes back to the pool's free list; wake the consumer.
	v.listener()
	return false
}

func (v *blockingView) NextBuffer() (*Buffer, int, bool, error) {
	s := v.s
	s.mu.Lock()
	released, finished, total, ferr := s.released, s.p.finished.Load() && s.fw == nil, s.numBuffers, s.ferr
	s.mu.Unlock()
	if released {
		return nil, 0, false, ErrPartitionReleased
	}
	if ferr != nil {
		return nil, 0, false, ferr
	}
	if !finished {
		return nil, 0, false, nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.done || v.release {
		return nil, 0, false, nil
	}
	if v.f == nil {
		f, err := os.Open(s.path)
		if err != nil {
			return nil, 0, false, fmt.Errorf("network: reading partition %q: %w", s.p.id, err)
		}
		v.f, v.r = f, bufio.NewReaderSize(f, 64*1024)
	}
	b := v.pool.requestOrListen(v)
	if b == nil {
		return nil, 0, false, nil
	}
	var hdr [5]byte
	if _, err := io.ReadFull(v.r, hdr[:]); err != nil {
		b.Recycle()
		return nil, 0, false, fmt.Errorf("network: reading partition %q: %w", s.p.id, err)
	}
	n := int(binary.BigEndian.Uint32(hdr[1:]))
	if n > len(b.seg) {
		b.Recycle()
		return nil, 0, false, fmt.Errorf("network: corrupt spill file of partition %q", s.p.id)
	}
	if _, err := io.ReadFull(v.r, b.seg[:n]); err != nil {
		b.Recycle()
		return nil, 0, false, fmt.Errorf("network: reading partition %q: %w", s.p.id, err)
	}
	b.size, b.isEvent = n, hdr[0] == 1
	v.read++
	if v.read == total {
		v.done = true
		v.f.Close()
		v.f = nil
	}
	// Backlog counts the remaining buffers (events included: a reader
	// needs credit for them too).
	return b, total - v.read, !v.done, nil
}

func (v *blockingView) Release() {
	v.mu.Lock()
	v.release = true
	if v.f != nil {
		v.f.Close()
		v.f = nil
	}
	v.mu.Unlock()
	v.pool.destroy()
	s := v.s
	s.mu.Lock()
	delete(s.views, v)
	s.mu.Unlock()
}
