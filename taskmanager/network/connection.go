package network

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// ConnectionManager is the runner's side of the data plane network
// (Flink's NettyConnectionManager): one TCP server (the data port) serving
// subpartitions to remote consumers, and at most one client connection per
// remote runner address, multiplexing every remote input channel to it.
// It owns every goroutine it starts (accept loop, one reader and one writer
// per connection); Close stops them all.
type ConnectionManager struct {
	cfg Config
	log zerolog.Logger
	mgr *ResultPartitionManager

	ln net.Listener
	wg sync.WaitGroup

	mu      sync.Mutex
	clients map[string]*clientConn
	servers map[*serverConn]struct{}
	closed  bool
	dials   int // client connections ever established
}

// NewConnectionManager returns a manager serving the partitions of mgr.
func NewConnectionManager(cfg Config, mgr *ResultPartitionManager, log zerolog.Logger) *ConnectionManager {
	return &ConnectionManager{cfg: cfg, log: log, mgr: mgr,
		clients: map[string]*clientConn{}, servers: map[*serverConn]struct{}{}}
}

// Listen starts the data server on addr (e.g. "127.0.0.1:0").
func (cm *ConnectionManager) Listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("network: data port: %w", err)
	}
	return cm.Serve(ln)
}

// Serve starts the data server on a listener created elsewhere (a job
// runner's data port is opened by its TaskManager and inherited). The
// connection manager owns ln from then on and closes it in Close.
func (cm *ConnectionManager) Serve(ln net.Listener) error {
	cm.mu.Lock()
	if cm.closed {
		cm.mu.Unlock()
		ln.Close()
		return errManagerClosed
	}
	cm.ln = ln
	cm.mu.Unlock()
	cm.wg.Add(1)
	go cm.acceptLoop(ln)
	return nil
}

// Addr returns the data server's address, or "" before Listen.
func (cm *ConnectionManager) Addr() string {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	if cm.ln == nil {
		return ""
	}
	return cm.ln.Addr().String()
}

// ConnectionCounts returns the open client connections (this runner
// consuming), the open server connections (others consuming from this
// runner), and the client connections ever established.
func (cm *ConnectionManager) ConnectionCounts() (clients, servers, dials int) {
	cm.mu.Lock()
	defer cm.mu.Unlock()
	for _, c := range cm.clients {
		if c.conn != nil {
			clients++
		}
	}
	return clients, len(cm.servers), cm.dials
}

func (cm *ConnectionManager) acceptLoop(ln net.Listener) {
	defer cm.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			cm.mu.Lock()
			closed := cm.closed
			cm.mu.Unlock()
			if !closed {
				cm.log.Error().Err(err).Msg("data server accept failed")
			}
			return
		}
		setNoDelay(c)
		if cm.cfg.TLS != nil {
			c = tls.Server(c, cm.cfg.TLS) // handshaken by the connection's reader
		}
		sc := newServerConn(cm, c)
		cm.mu.Lock()
		if cm.closed {
			cm.mu.Unlock()
			c.Close()
			continue
		}
		cm.servers[sc] = struct{}{}
		cm.wg.Add(2)
		cm.mu.Unlock()
		go sc.readLoop()
		go sc.writeLoop()
	}
}

func setNoDelay(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
}

// client returns the connection to addr, dialing it if needed.
func (cm *ConnectionManager) client(ctx context.Context, addr string) (*clientConn, error) {
	cm.mu.Lock()
	if cm.closed {
		cm.mu.Unlock()
		return nil, errManagerClosed
	}
	cc, ok := cm.clients[addr]
	if !ok {
		cc = newClientConn(cm, addr)
		cm.clients[addr] = cc
		cm.mu.Unlock()
		cc.dial(ctx)
	} else {
		cm.mu.Unlock()
	}
	select {
	case <-cc.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if cc.conn == nil {
		return nil, cc.err
	}
	return cc, nil
}

// Close closes the data server and every connection and waits for their
// goroutines.
func (cm *ConnectionManager) Close() {
	cm.mu.Lock()
	if cm.closed {
		cm.mu.Unlock()
		cm.wg.Wait()
		return
	}
	cm.closed = true
	ln := cm.ln
	clients := make([]*clientConn, 0, len(cm.clients))
	for _, c := range cm.clients {
		clients = append(clients, c)
	}
	servers := make([]*serverConn, 0, len(cm.servers))
	for s := range cm.servers {
		servers = append(servers, s)
	}
	cm.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	for _, c := range clients {
		<-c.ready
		c.fail(errManagerClosed, false)
	}
	for _, s := range servers {
		s.close(nil)
	}
	cm.wg.Wait()
}

// ---------------------------------------------------------------- server

type serverConn struct {
	cm   *ConnectionManager
	conn net.Conn
	peer string
	log  zerolog.Logger
	br   *bufio.Reader
	bw   *bufio.Writer

	mu      sync.Mutex
	readers map[uint32]*viewReader
	maxID   uint32
	anyID   bool
	queue   []*viewReader
	ctrl    [][]byte
	wake    chan struct{}
	done    chan struct{}
	closed  bool
}

// viewReader is the server side of one remote input channel (Flink's
// CreditBasedSequenceNumberingViewReader).
type viewReader struct {
	sc       *serverConn
	id       uint32
	view     SubpartitionView
	credit   int
	queued   bool
	hasMore  bool
	notifies uint64
	released bool
	seq      uint32 // writer goroutine only
}

func newServerConn(cm *ConnectionManager, c net.Conn) *serverConn {
	peer := c.RemoteAddr().String()
	return &serverConn{cm: cm, conn: c, peer: peer,
		log:     cm.log.With().Str("peer", peer).Str("side", "server").Logger(),
		br:      bufio.NewReaderSize(c, 16*1024),
		bw:      bufio.NewWriterSize(c, 256*1024),
		readers: map[uint32]*viewReader{},
		wake:    make(chan struct{}, 1), done: make(chan struct{})}
}

func (sc *serverConn) signal() {
	select {
	case sc.wake <- struct{}{}:
	default:
	}
}

// close closes the connection and releases every view; err (nil for a
// normal close) is logged.
func (sc *serverConn) close(err error) {
	sc.mu.Lock()
	if sc.closed {
		sc.mu.Unlock()
		return
	}
	sc.closed = true
	readers := sc.readers
	sc.readers = map[uint32]*viewReader{}
	for _, r := range readers {
		r.released = true
	}
	sc.queue = nil
	close(sc.done)
	sc.mu.Unlock()
	if err != nil {
		var pe *ProtocolError
		if errors.As(err, &pe) {
			sc.log.Error().Err(err).Msg("closing data connection")
		} else {
			sc.log.Debug().Err(err).Msg("data connection closed")
		}
	}
	sc.conn.Close()
	for _, r := range readers {
		r.view.Release()
	}
	sc.cm.mu.Lock()
	delete(sc.cm.servers, sc)
	sc.cm.mu.Unlock()
}

func (sc *serverConn) violation(format string, args ...any) error {
	return &ProtocolError{Peer: sc.peer, Msg: fmt.Sprintf(format, args...)}
}

func (sc *serverConn) readLoop() {
	defer sc.cm.wg.Done()
	err := sc.serve()
	sc.close(err)
}

func (sc *serverConn) serve() error {
	if tc, ok := sc.conn.(*tls.Conn); ok {
		ctx, cancel := context.WithTimeout(context.Background(), sc.cm.cfg.ConnectTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			sc.cm.log.Warn().Str("peer", sc.peer).Err(err).
				Msg("data connection refused: TLS handshake failure (the peer has no certificate of this cluster's CA, security.ssl.internal.*)")
			return fmt.Errorf("network: TLS handshake with %s: %w", sc.peer, err)
		}
	}
	if _, err := sc.conn.Write(magic[:]); err != nil {
		return err
	}
	if err := readMagic(sc.br, sc.peer); err != nil {
		return err
	}
	maxFrame := sc.cm.cfg.MaxFrameSize
	payload := make([]byte, 0, 256)
	for {
		h, err := readFrameHeader(sc.br, maxFrame, sc.peer)
		if err != nil {
			return err
		}
		if h.typ != msgPartitionRequest && h.length > 64 {
			return sc.violation("frame type %d of %d bytes", h.typ, h.length)
		}
		// Allocation is bounded by MaxFrameSize and only grows with data
		// actually sent.
		payload = payload[:0]
		if h.length > 0 {
			if cap(payload) < h.length {
				payload = make([]byte, 0, h.length)
			}
			payload = payload[:h.length]
			if _, err := io.ReadFull(sc.br, payload); err != nil {
				return err
			}
		}
		switch h.typ {
		case msgPartitionRequest:
			if h.length < 8 {
				return sc.violation("short PartitionRequest (%d bytes)", h.length)
			}
			if sc.anyID && h.id <= sc.maxID || h.id == fatalReceiverID {
				return sc.violation("PartitionRequest reuses receiver id %d", h.id)
			}
			sc.anyID, sc.maxID = true, h.id
			sub := binary.BigEndian.Uint32(payload)
			credit := binary.BigEndian.Uint32(payload[4:])
			if credit > maxCredit {
				return sc.violation("initial credit %d", credit)
			}
			sc.partitionRequest(h.id, ResultPartitionID(payload[8:]), int(sub), int(credit))
		case msgAddCredit:
			if h.length != 4 {
				return sc.violation("AddCredit of %d bytes", h.length)
			}
			if !sc.anyID || h.id > sc.maxID {
				return sc.violation("AddCredit for unknown receiver id %d", h.id)
			}
			if err := sc.addCredit(h.id, int(binary.BigEndian.Uint32(payload))); err != nil {
				return err
			}
		case msgCancelPartitionRequest:
			if !sc.anyID || h.id > sc.maxID {
				return sc.violation("CancelPartitionRequest for unknown receiver id %d", h.id)
			}
			sc.mu.Lock()
			r := sc.readers[h.id]
			sc.mu.Unlock()
			if r != nil {
				sc.releaseReader(r)
			}
		case msgCloseRequest:
			return nil
		default:
			return sc.violation("unexpected frame type %d", h.typ)
		}
	}
}

func (sc *serverConn) partitionRequest(id uint32, pid ResultPartitionID, sub, credit int) {
	r := &viewReader{sc: sc, id: id, credit: credit}
	view, err := sc.cm.mgr.CreateSubpartitionView(pid, sub, r.notify)
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if err != nil {
		sc.ctrl = append(sc.ctrl, errorFrame(id, errors.Is(err, ErrPartitionNotFound), err.Error()))
		sc.signal()
		return
	}
	if sc.closed {
		defer view.Release() // runs after the unlock
		return
	}
	r.view = view
	r.hasMore = true
	sc.readers[id] = r
	if r.credit > 0 || viewHasPriority(view) {
		r.queued = true
		sc.queue = append(sc.queue, r)
		sc.signal()
	}
}

func errorFrame(id uint32, notFound bool, msg string) []byte {
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	b := appendFrameHeader(make([]byte, 0, frameHeaderSize+1+len(msg)), msgErrorResponse, id, 1+len(msg))
	var flags byte
	if notFound {
		flags = flagPartitionNotFound
	}
	return append(append(b, flags), msg...)
}

func (sc *serverConn) addCredit(id uint32, n int) error {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	r := sc.readers[id]
	if r == nil {
		return nil // released meanwhile
	}
	if n <= 0 || n > maxCredit || r.credit+n > maxCredit {
		return sc.violation("credit %d for receiver %d (has %d)", n, id, r.credit)
	}
	r.credit += n
	if r.hasMore && !r.queued {
		r.queued = true
		sc.queue = append(sc.queue, r)
		sc.signal()
	}
	return nil
}

// notify is the view's availability listener.
func (r *viewReader) notify() {
	sc := r.sc
	sc.mu.Lock()
	r.notifies++
	r.hasMore = true
	if !r.released && !r.queued && r.view != nil && (r.credit > 0 || viewHasPriority(r.view)) {
		r.queued = true
		sc.queue = append(sc.queue, r)
		sc.mu.Unlock()
		sc.signal()
		return
	}
	sc.mu.Unlock()
}

func (sc *serverConn) releaseReader(r *viewReader) {
	sc.mu.Lock()
	if r.released {
		sc.mu.Unlock()
		return
	}
	r.released = true
	delete(sc.readers, r.id)
	sc.mu.Unlock()
	r.view.Release()
}

func (sc *serverConn) writeLoop() {
	defer sc.cm.wg.Done()
	if err := sc.write(); err != nil {
		sc.close(err)
	}
}

func (sc *serverConn) write() error {
	var ctrl [][]byte
	for {
		sc.mu.Lock()
		for len(sc.ctrl) == 0 && len(sc.queue) == 0 {
			sc.mu.Unlock()
			if sc.bw.Buffered() > 0 {
				if err := sc.bw.Flush(); err != nil {
					return err
				}
			} else {
				select {
				case <-sc.wake:
				case <-sc.done:
					return nil
				}
			}
			sc.mu.Lock()
		}
		if sc.closed {
			sc.mu.Unlock()
			return nil
		}
		ctrl, sc.ctrl = sc.ctrl, ctrl[:0]
		var r *viewReader
		if len(sc.queue) > 0 {
			r = sc.queue[0]
			sc.queue[0] = nil
			sc.queue = sc.queue[1:]
			r.queued = false
			if r.released || r.credit <= 0 && !viewHasPriority(r.view) {
				r = nil
			}
		}
		var n0 uint64
		if r != nil {
			n0 = r.notifies
		}
		sc.mu.Unlock()
		for _, f := range ctrl {
			if _, err := sc.bw.Write(f); err != nil {
				return err
			}
		}
		if r != nil {
			if err := sc.writeFrom(r, n0); err != nil {
				return err
			}
		}
	}
}

func (sc *serverConn) writeFrom(r *viewReader, n0 uint64) error {
	b, backlog, more, err := r.view.NextBuffer()
	if err != nil {
		sc.releaseReader(r)
		_, werr := sc.bw.Write(errorFrame(r.id, false, err.Error()))
		return werr
	}
	if b == nil {
		return nil
	}
	sc.mu.Lock()
	if !b.priority {
		r.credit--
	}
	if r.notifies != n0 {
		more = true
	}
	r.hasMore = more
	if more && !r.queued && !r.released && (r.credit > 0 || viewHasPriority(r.view)) {
		r.queued = true
		sc.queue = append(sc.queue, r)
	}
	sc.mu.Unlock()

	var h [frameHeaderSize + bufferResponseHeaderSize]byte
	h[0] = msgBufferResponse
	binary.BigEndian.PutUint32(h[1:], r.id)
	binary.BigEndian.PutUint32(h[5:], uint32(bufferResponseHeaderSize+b.size))
	binary.BigEndian.PutUint32(h[9:], r.seq)
	binary.BigEndian.PutUint32(h[13:], uint32(backlog))
	if b.isEvent {
		h[17] = flagEvent
	}
	if b.priority {
		h[17] |= flagPriority
	}
	r.seq++
	eop := b.isEvent && b.size == 1 && EventKind(b.seg[0]) == KindEndOfPartition
	_, err = sc.bw.Write(h[:])
	if err == nil {
		_, err = sc.bw.Write(b.Data())
	}
	b.Recycle()
	if eop {
		sc.releaseReader(r)
	}
	return err
}

// ---------------------------------------------------------------- client

type clientConn struct {
	cm    *ConnectionManager
	addr  string
	log   zerolog.Logger
	ready chan struct{} // closed once dialed (conn set) or failed (err set)
	conn  net.Conn
	err   error
	br    *bufio.Reader
	bw    *bufio.Writer

	mu       sync.Mutex
	channels map[uint32]*remoteInputChannel
	nextID   uint32
	ctrl     [][]byte
	credits  []*remoteInputChannel
	failed   bool
	// handshaken is set once the server's handshake arrived: a failure
	// after it is a lost connection, before it a failed connect.
	handshaken bool
	wake       chan struct{}
	done       chan struct{}
}

func newClientConn(cm *ConnectionManager, addr string) *clientConn {
	return &clientConn{cm: cm, addr: addr, ready: make(chan struct{}),
		log:      cm.log.With().Str("peer", addr).Str("side", "client").Logger(),
		channels: map[uint32]*remoteInputChannel{},
		wake:     make(chan struct{}, 1), done: make(chan struct{})}
}

func (cc *clientConn) dial(ctx context.Context) {
	d := net.Dialer{Timeout: cc.cm.cfg.ConnectTimeout}
	c, err := d.DialContext(ctx, "tcp", cc.addr)
	if err == nil {
		setNoDelay(c)
		if cfg := cc.cm.cfg.TLS; cfg != nil {
			tc := tls.Client(c, cfg)
			hctx, cancel := context.WithTimeout(ctx, cc.cm.cfg.ConnectTimeout)
			err = tc.HandshakeContext(hctx)
			cancel()
			if err != nil {
				c.Close()
				err = fmt.Errorf("TLS handshake failure (both runners need a certificate of the cluster's CA, security.ssl.internal.*): %w", err)
			}
			c = tc
		}
	}
	if err == nil {
		_, err = c.Write(magic[:])
		if err != nil {
			c.Close()
		}
	}
	cc.cm.mu.Lock()
	if err == nil && cc.cm.closed {
		c.Close()
		err = errManagerClosed
	}
	if err != nil {
		cc.err = fmt.Errorf("network: connecting to %s: %w", cc.addr, err)
		cc.failed = true
		close(cc.done)
		if cc.cm.clients[cc.addr] == cc {
			delete(cc.cm.clients, cc.addr)
		}
		cc.cm.mu.Unlock()
		close(cc.ready)
		return
	}
	cc.conn = c
	cc.br = bufio.NewReaderSize(c, 256*1024)
	cc.bw = bufio.NewWriterSize(c, 4*1024)
	cc.cm.dials++
	cc.cm.wg.Add(2)
	cc.cm.mu.Unlock()
	close(cc.ready)
	go cc.readLoop()
	go cc.writeLoop()
}

func (cc *clientConn) signal() {
	select {
	case cc.wake <- struct{}{}:
	default:
	}
}

// register assigns a receiver id and queues the PartitionRequest.
func (cc *clientConn) register(ch *remoteInputChannel, credit int) (uint32, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.failed {
		return 0, ch.transportError(cc.err, cc.handshaken)
	}
	id := cc.nextID
	cc.nextID++
	cc.channels[id] = ch
	pid := ch.spec.Partition
	f := appendFrameHeader(make([]byte, 0, frameHeaderSize+8+len(pid)), msgPartitionRequest, id, 8+len(pid))
	f = binary.BigEndian.AppendUint32(f, uint32(ch.spec.Subpartition))
	f = binary.BigEndian.AppendUint32(f, uint32(credit))
	cc.ctrl = append(cc.ctrl, append(f, pid...))
	cc.signal()
	return id, nil
}

// unregister forgets a receiver id, optionally telling the server.
func (cc *clientConn) unregister(id uint32, cancel bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if _, ok := cc.channels[id]; !ok {
		return
	}
	delete(cc.channels, id)
	if cancel && !cc.failed {
		cc.ctrl = append(cc.ctrl, appendFrameHeader(nil, msgCancelPartitionRequest, id, 0))
		cc.signal()
	}
}

func (cc *clientConn) queueCredit(ch *remoteInputChannel) {
	cc.mu.Lock()
	if !ch.creditQueued && !cc.failed {
		ch.creditQueued = true
		cc.credits = append(cc.credits, ch)
		cc.signal()
	}
	cc.mu.Unlock()
}

func (cc *clientConn) violation(format string, args ...any) error {
	return &ProtocolError{Peer: cc.addr, Msg: fmt.Sprintf(format, args...)}
}

// fail closes the connection and fails its channels with err; a broken
// transport fails each with a *PartitionConnectionError for its own
// partition.
func (cc *clientConn) fail(err error, logIt bool) {
	cc.mu.Lock()
	if cc.failed {
		cc.mu.Unlock()
		return
	}
	cc.failed = true
	cc.err = err
	lost := cc.handshaken
	chans := cc.channels
	cc.channels = map[uint32]*remoteInputChannel{}
	close(cc.done)
	cc.mu.Unlock()
	if cc.conn != nil {
		cc.conn.Close()
	}
	cc.cm.mu.Lock()
	if cc.cm.clients[cc.addr] == cc {
		delete(cc.cm.clients, cc.addr)
	}
	cc.cm.mu.Unlock()
	affected := 0
	for _, ch := range chans {
		if ch.onError(ch.transportError(err, lost)) {
			affected++
		}
	}
	if logIt {
		// A producer closing after every channel got EndOfPartition is
		// no failure.
		ev := cc.log.Debug()
		if affected > 0 {
			ev = cc.log.Error()
		}
		ev.Err(err).Int("failedChannels", affected).Msg("data connection failed")
	}
}

func (cc *clientConn) readLoop() {
	defer cc.cm.wg.Done()
	err := cc.read()
	cc.mu.Lock()
	failed := cc.failed
	cc.mu.Unlock()
	if !failed {
		if err == io.EOF {
			err = fmt.Errorf("network: connection to %s closed by peer: %w", cc.addr, err)
		} else if !errors.As(err, new(*ProtocolError)) {
			err = fmt.Errorf("network: connection to %s: %w", cc.addr, err)
		}
		cc.fail(err, true)
	}
}

func (cc *clientConn) lookup(id uint32) (*remoteInputChannel, error) {
	cc.mu.Lock()
	ch, next := cc.channels[id], cc.nextID
	cc.mu.Unlock()
	if ch == nil && id >= next {
		return nil, cc.violation("frame for unknown receiver id %d", id)
	}
	return ch, nil
}

func (cc *clientConn) read() error {
	// A server that accepted but does not answer counts as a failed
	// connect after ConnectTimeout.
	cc.conn.SetReadDeadline(time.Now().Add(cc.cm.cfg.ConnectTimeout))
	if err := readMagic(cc.br, cc.addr); err != nil {
		return err
	}
	cc.conn.SetReadDeadline(time.Time{})
	cc.mu.Lock()
	cc.handshaken = true
	cc.mu.Unlock()
	maxFrame := cc.cm.cfg.MaxFrameSize
	bufSize := cc.cm.cfg.BufferSize
	var hdr [bufferResponseHeaderSize]byte
	for {
		h, err := readFrameHeader(cc.br, maxFrame, cc.addr)
		if err != nil {
			return err
		}
		switch h.typ {
		case msgBufferResponse:
			n := h.length - bufferResponseHeaderSize
			if n < 0 || n > bufSize {
				return cc.violation("BufferResponse with %d data bytes (buffer size %d)", n, bufSize)
			}
			if _, err := io.ReadFull(cc.br, hdr[:]); err != nil {
				return err
			}
			seq, backlog, flags := binary.BigEndian.Uint32(hdr[:]), binary.BigEndian.Uint32(hdr[4:]), hdr[8]
			if flags&^(flagEvent|flagPriority) != 0 || flags == flagPriority || backlog > maxCredit {
				return cc.violation("BufferResponse flags %#x backlog %d", flags, backlog)
			}
			ch, err := cc.lookup(h.id)
			if err != nil {
				return err
			}
			if flags&flagPriority != 0 {
				// A priority event needs no credit: it gets its own buffer.
				b := &Buffer{seg: make([]byte, n), size: n, isEvent: true, priority: true}
				if _, err := io.ReadFull(cc.br, b.seg); err != nil {
					return err
				}
				if ch == nil {
					continue
				}
				if err := ch.onPriority(b, seq, int(backlog)); err != nil {
					return cc.violation("receiver %d: %v", h.id, err)
				}
				continue
			}
			if ch == nil { // cancelled meanwhile
				if _, err := cc.br.Discard(n); err != nil {
					return err
				}
				continue
			}
			b := ch.takeBuffer()
			if b == nil {
				if ch.isReleased() {
					if _, err := cc.br.Discard(n); err != nil {
						return err
					}
					continue
				}
				return cc.violation("BufferResponse for receiver %d without credit", h.id)
			}
			if _, err := io.ReadFull(cc.br, b.seg[:n]); err != nil {
				ch.returnBuffer(b)
				return err
			}
			b.size, b.isEvent = n, flags&flagEvent != 0
			if err := ch.onBuffer(b, seq, int(backlog)); err != nil {
				return cc.violation("receiver %d: %v", h.id, err)
			}
		case msgErrorResponse:
			if h.length < 1 || h.length > 4096 {
				return cc.violation("ErrorResponse of %d bytes", h.length)
			}
			p := make([]byte, h.length)
			if _, err := io.ReadFull(cc.br, p); err != nil {
				return err
			}
			msg := string(p[1:])
			if h.id == fatalReceiverID {
				return fmt.Errorf("network: fatal error from %s: %s", cc.addr, msg)
			}
			ch, err := cc.lookup(h.id)
			if err != nil {
				return err
			}
			if ch != nil {
				cc.unregister(h.id, false)
				ch.onRemoteError(p[0]&flagPartitionNotFound != 0, msg)
			}
		default:
			return cc.violation("unexpected frame type %d", h.typ)
		}
	}
}

func (cc *clientConn) writeLoop() {
	defer cc.cm.wg.Done()
	if err := cc.write(); err != nil {
		cc.fail(fmt.Errorf("network: writing to %s: %w", cc.addr, err), true)
	}
}

func (cc *clientConn) write() error {
	var ctrl [][]byte
	var credits []*remoteInputChannel
	var f [frameHeaderSize + 4]byte
	for {
		select {
		case <-cc.wake:
		case <-cc.done:
			return nil
		}
		cc.mu.Lock()
		ctrl, cc.ctrl = cc.ctrl, ctrl[:0]
		credits, cc.credits = cc.credits, credits[:0]
		for _, ch := range credits {
			ch.creditQueued = false
		}
		cc.mu.Unlock()
		for _, b := range ctrl {
			if _, err := cc.bw.Write(b); err != nil {
				return err
			}
		}
		for _, ch := range credits {
			id, n := ch.takeUnannounced()
			if n <= 0 {
				continue
			}
			f[0] = msgAddCredit
			binary.BigEndian.PutUint32(f[1:], id)
			binary.BigEndian.PutUint32(f[5:], 4)
			binary.BigEndian.PutUint32(f[9:], uint32(n))
			if _, err := cc.bw.Write(f[:]); err != nil {
				return err
			}
		}
		if err := cc.bw.Flush(); err != nil {
			return err
		}
	}
}

// remoteInputChannel reads a subpartition of another runner through the
// shared client connection, with credit-based flow control: its exclusive
// buffers are the initial credit; floating buffers of the gate are requested
// by the sender's backlog; every buffer freed is announced as credit.
type remoteInputChannel struct {
	g    *InputGate
	idx  int
	spec InputChannelSpec
	cm   *ConnectionManager

	mu           sync.Mutex
	conn         *clientConn
	id           uint32
	numExclusive int
	free         []*Buffer
	received     []*Buffer
	head         int
	// prio holds priority events not taken yet; each left a position
	// marker in received where it arrived.
	prio         []*Buffer
	expectedSeq  uint32
	backlog      int
	unannounced  int
	waiting      bool // listening on the floating pool
	eop          bool // EndOfPartition received: nothing more expected
	err          error
	released     bool
	retries      int // partition requests retried so far
	timer        *time.Timer
	creditQueued bool // guarded by conn.mu
}

func newRemoteInputChannel(g *InputGate, idx int, spec InputChannelSpec, cm *ConnectionManager) *remoteInputChannel {
	ch := &remoteInputChannel{g: g, idx: idx, spec: spec, cm: cm, numExclusive: g.cfg.BuffersPerChannel}
	for range ch.numExclusive {
		b := g.exclusivePool.tryRequest()
		if b == nil {
			break // cannot happen: the pool is sized for every channel
		}
		b.owner = ch
		ch.free = append(ch.free, b)
	}
	return ch
}

func (ch *remoteInputChannel) requestSubpartition() error {
	ctx, cancel := context.WithTimeout(context.Background(), ch.cm.cfg.ConnectTimeout)
	defer cancel()
	cc, err := ch.cm.client(ctx, ch.spec.Address)
	if err != nil {
		return ch.transportError(err, false)
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.released {
		return nil
	}
	ch.unannounced = 0
	ch.expectedSeq = 0
	id, err := cc.register(ch, len(ch.free))
	if err != nil {
		return err
	}
	ch.conn, ch.id = cc, id
	return nil
}

func (ch *remoteInputChannel) isReleased() bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.released
}

func (ch *remoteInputChannel) takeBuffer() *Buffer {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	n := len(ch.free)
	if n == 0 || ch.released {
		return nil
	}
	b := ch.free[n-1]
	ch.free = ch.free[:n-1]
	return b
}

// returnBuffer puts back a buffer taken but not filled.
func (ch *remoteInputChannel) returnBuffer(b *Buffer) {
	ch.mu.Lock()
	if !ch.released {
		ch.free = append(ch.free, b)
		ch.mu.Unlock()
		return
	}
	ch.mu.Unlock()
	ch.toPool(b)
}

func (ch *remoteInputChannel) toPool(b *Buffer) {
	if b.floating {
		b.owner = ch.g.floatingPool
		ch.g.floatingPool.recycle(b)
	} else {
		b.owner = ch.g.exclusivePool
		ch.g.exclusivePool.recycle(b)
	}
}

func (ch *remoteInputChannel) onBuffer(b *Buffer, seq uint32, backlog int) error {
	ch.mu.Lock()
	if ch.released {
		ch.mu.Unlock()
		ch.toPool(b)
		return nil
	}
	if seq != ch.expectedSeq {
		exp := ch.expectedSeq
		ch.mu.Unlock()
		ch.toPool(b)
		return fmt.Errorf("buffer out of order: sequence number %d, expected %d", seq, exp)
	}
	ch.expectedSeq++
	if b.isEvent && b.size == 1 && EventKind(b.seg[0]) == KindEndOfPartition {
		ch.eop = true
	}
	wasEmpty := ch.head == len(ch.received)
	if wasEmpty && ch.head > 0 {
		ch.received, ch.head = ch.received[:0], 0
	}
	ch.received = append(ch.received, b)
	ch.backlog = backlog
	announce := ch.requestFloatingLocked()
	conn := ch.conn
	ch.mu.Unlock()
	if wasEmpty {
		ch.g.notify(ch.idx)
	}
	if announce && conn != nil {
		conn.queueCredit(ch)
	}
	return nil
}

// onPriority takes a priority event: it is handed out ahead of the buffers
// received so far (getPriorityEvent), and a position marker goes behind
// them, so the consumer knows which buffers it overtook.
func (ch *remoteInputChannel) onPriority(b *Buffer, seq uint32, backlog int) error {
	ch.mu.Lock()
	if ch.released {
		ch.mu.Unlock()
		return nil
	}
	if seq != ch.expectedSeq {
		exp := ch.expectedSeq
		ch.mu.Unlock()
		return fmt.Errorf("buffer out of order: sequence number %d, expected %d", seq, exp)
	}
	if len(ch.prio) >= maxPendingPriority {
		ch.mu.Unlock()
		return fmt.Errorf("more than %d priority events pending", maxPendingPriority)
	}
	ch.expectedSeq++
	wasEmpty := ch.head == len(ch.received)
	if wasEmpty && ch.head > 0 {
		ch.received, ch.head = ch.received[:0], 0
	}
	ch.received = append(ch.received, positionOf(b))
	ch.prio = append(ch.prio, b)
	ch.backlog = backlog
	ch.mu.Unlock()
	ch.g.notifyPriority(ch.idx)
	if wasEmpty {
		ch.g.notify(ch.idx)
	}
	return nil
}

func (ch *remoteInputChannel) getPriorityEvent() (*Buffer, error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.err != nil {
		return nil, ch.err
	}
	if len(ch.prio) == 0 {
		return nil, nil
	}
	b := ch.prio[0]
	ch.prio[0] = nil
	ch.prio = ch.prio[1:]
	return b, nil
}

// requestFloatingLocked tops the free buffers up to backlog + exclusive
// from the gate's floating pool (Flink's numRequiredBuffers) and reports
// whether new credit is to be announced.
func (ch *remoteInputChannel) requestFloatingLocked() bool {
	got := false
	for !ch.waiting && len(ch.free) < ch.backlog+ch.numExclusive {
		b := ch.g.floatingPool.requestOrListen(ch)
		if b == nil {
			ch.waiting = true
			break
		}
		b.owner, b.floating = ch, true
		ch.free = append(ch.free, b)
		ch.unannounced++
		got = true
	}
	return got
}

// offerBuffer is called by the floating pool when a buffer is recycled.
func (ch *remoteInputChannel) offerBuffer(b *Buffer) bool {
	ch.mu.Lock()
	ch.waiting = false
	if ch.released || len(ch.free) >= ch.backlog+ch.numExclusive {
		ch.mu.Unlock()
		return false
	}
	b.owner, b.floating = ch, true
	ch.free = append(ch.free, b)
	ch.unannounced++
	ch.requestFloatingLocked()
	conn := ch.conn
	ch.mu.Unlock()
	if conn != nil {
		conn.queueCredit(ch)
	}
	return true
}

// recycle is called when the consumer is done with a received buffer.
func (ch *remoteInputChannel) recycle(b *Buffer) {
	ch.mu.Lock()
	if ch.released || b.floating && len(ch.free) >= ch.backlog+ch.numExclusive {
		ch.mu.Unlock()
		ch.toPool(b)
		return
	}
	b.size, b.isEvent = 0, false
	ch.free = append(ch.free, b)
	ch.unannounced++
	conn := ch.conn
	ch.mu.Unlock()
	if conn != nil {
		conn.queueCredit(ch)
	}
}

func (ch *remoteInputChannel) takeUnannounced() (uint32, int) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	n := ch.unannounced
	ch.unannounced = 0
	if ch.released {
		return ch.id, 0
	}
	return ch.id, n
}

func (ch *remoteInputChannel) getNextBuffer() (*Buffer, bool, error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.err != nil {
		return nil, false, ch.err
	}
	if ch.head == len(ch.received) {
		return nil, false, nil
	}
	b := ch.received[ch.head]
	ch.received[ch.head] = nil
	ch.head++
	return b, ch.head < len(ch.received), nil
}

// onError fails the channel unless it already received EndOfPartition:
// then everything it expected is here, and a connection closing (the
// producer's runner exiting) is a clean end. It reports whether the
// channel failed.
func (ch *remoteInputChannel) onError(err error) bool {
	ch.mu.Lock()
	if ch.eop || ch.released {
		ch.mu.Unlock()
		return false
	}
	if ch.err == nil {
		ch.err = err
	}
	ch.mu.Unlock()
	ch.g.notify(ch.idx)
	return true
}

// transportError is err as this channel's failure: a broken or failed
// connection (lost tells which) becomes a *PartitionConnectionError naming
// the channel's partition, so the producer is rerun; anything else (a
// protocol violation, this runner shutting down) stays as it is.
func (ch *remoteInputChannel) transportError(err error, lost bool) error {
	if !isConnectionLoss(err) {
		return err
	}
	return &PartitionConnectionError{ID: ch.spec.Partition, Subpartition: ch.spec.Subpartition,
		Remote: ch.spec.Address, Lost: lost, Err: err}
}

func (ch *remoteInputChannel) onRemoteError(notFound bool, msg string) {
	if !notFound {
		ch.onError(fmt.Errorf("network: producer %s: %s", ch.spec.Address, msg))
		return
	}
	ch.mu.Lock()
	if ch.released {
		ch.mu.Unlock()
		return
	}
	ch.conn = nil
	next, ok := nextBackoff(ch.retries, ch.g.cfg)
	if ok {
		ch.retries++
		ch.timer = time.AfterFunc(next, func() {
			if err := ch.requestSubpartition(); err != nil {
				ch.onError(err)
			}
		})
		ch.mu.Unlock()
		return
	}
	ch.mu.Unlock()
	ch.onError(&PartitionNotFoundError{ID: ch.spec.Partition, Subpartition: ch.spec.Subpartition, Remote: ch.spec.Address})
}

func (ch *remoteInputChannel) release() {
	ch.mu.Lock()
	if ch.released {
		ch.mu.Unlock()
		return
	}
	ch.released = true
	if ch.timer != nil {
		ch.timer.Stop()
	}
	bufs := append(ch.free, ch.received[ch.head:]...)
	ch.free, ch.received, ch.head, ch.prio = nil, nil, 0, nil
	conn, id := ch.conn, ch.id
	ch.mu.Unlock()
	for _, b := range bufs {
		if !b.position {
			ch.toPool(b)
		}
	}
	if conn != nil {
		conn.unregister(id, true)
	}
}
