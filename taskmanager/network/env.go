package network

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// ShuffleEnvironment is a runner's data plane (Flink's
// NettyShuffleEnvironment): the partition registry, the connection manager
// with its data server, and the output flusher that ships partially filled
// buffers every FlushTimeout (one goroutine for all partitions).
type ShuffleEnvironment struct {
	cfg   Config
	log   zerolog.Logger
	parts *ResultPartitionManager
	conns *ConnectionManager

	mu      sync.Mutex
	started bool
	closed  bool
	stop    chan struct{}
	wg      sync.WaitGroup
}

// NewShuffleEnvironment validates cfg (zero fields take defaults) and
// returns an environment; Start opens the data port.
func NewShuffleEnvironment(cfg Config, log zerolog.Logger) (*ShuffleEnvironment, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	parts := NewResultPartitionManager()
	return &ShuffleEnvironment{cfg: cfg, log: log, parts: parts,
		conns: NewConnectionManager(cfg, parts, log), stop: make(chan struct{})}, nil
}

// Config returns the effective configuration.
func (e *ShuffleEnvironment) Config() Config { return e.cfg }

// Start listens on addr ("host:port", port 0 picks one) and starts the
// output flusher.
func (e *ShuffleEnvironment) Start(addr string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started || e.closed {
		return fmt.Errorf("network: shuffle environment already started or closed")
	}
	if err := e.conns.Listen(addr); err != nil {
		return err
	}
	e.startLocked()
	return nil
}

// StartListener is Start on a listener created elsewhere, such as the data
// port a TaskManager opened for its job runner; the environment owns ln.
func (e *ShuffleEnvironment) StartListener(ln net.Listener) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started || e.closed {
		ln.Close()
		return fmt.Errorf("network: shuffle environment already started or closed")
	}
	if err := e.conns.Serve(ln); err != nil {
		return err
	}
	e.startLocked()
	return nil
}

func (e *ShuffleEnvironment) startLocked() {
	e.started = true
	if e.cfg.FlushTimeout > 0 {
		e.wg.Add(1)
		go e.flushLoop()
	}
}

func (e *ShuffleEnvironment) flushLoop() {
	defer e.wg.Done()
	t := time.NewTicker(e.cfg.FlushTimeout)
	defer t.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-t.C:
			for _, p := range e.parts.Partitions() {
				if p.typ == Pipelined {
					p.Flush()
				}
			}
		}
	}
}

// Addr returns the data port's address.
func (e *ShuffleEnvironment) Addr() string { return e.conns.Addr() }

// PartitionManager returns the partition registry.
func (e *ShuffleEnvironment) PartitionManager() *ResultPartitionManager { return e.parts }

// ConnectionManager returns the connection manager.
func (e *ShuffleEnvironment) ConnectionManager() *ConnectionManager { return e.conns }

// CreateResultPartition creates and registers a partition. ctx cancels
// writers blocked on back pressure (the task's context).
func (e *ShuffleEnvironment) CreateResultPartition(ctx context.Context, id ResultPartitionID, typ ResultPartitionType, numSubpartitions int) (*ResultPartition, error) {
	p, err := newResultPartition(ctx, id, typ, numSubpartitions, e.cfg, e.log)
	if err != nil {
		return nil, err
	}
	if err := e.parts.Register(p); err != nil {
		p.Release()
		return nil, err
	}
	return p, nil
}

// CreateInputGate creates a gate with one channel per spec and requests
// the subpartitions. A channel whose Address is empty or this runner's
// data address reads locally.
func (e *ShuffleEnvironment) CreateInputGate(name string, specs []InputChannelSpec) (*InputGate, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("network: input gate %q without channels", name)
	}
	self := e.Addr()
	numRemote := 0
	for _, s := range specs {
		if s.Address != "" && s.Address != self {
			numRemote++
		}
	}
	g := newInputGate(name, e.cfg, e.log, append([]InputChannelSpec(nil), specs...), numRemote)
	for i, s := range specs {
		if s.Address == "" || s.Address == self {
			g.channels[i] = &localInputChannel{g: g, idx: i, spec: s, mgr: e.parts}
		} else {
			g.channels[i] = newRemoteInputChannel(g, i, s, e.conns)
		}
	}
	if err := g.requestPartitions(); err != nil {
		g.Close()
		return nil, err
	}
	return g, nil
}

// Close stops the flusher, closes every connection and releases every
// partition. Gates are closed by their owners.
func (e *ShuffleEnvironment) Close() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	close(e.stop)
	e.mu.Unlock()
	e.wg.Wait()
	e.conns.Close()
	e.parts.Shutdown()
}
