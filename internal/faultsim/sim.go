package faultsim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/gofl/gofl/internal/clock"
	"github.com/gofl/gofl/internal/mailbox"
)

// Faults is how hostile the simulated network is. Probabilities are per
// message; zero values make a perfect network.
type Faults struct {
	// Drop loses a request (never delivered) or its reply (delivered, the
	// caller never hears back); either way the caller's call times out.
	Drop float64
	// Duplicate delivers a request a second time, later.
	Duplicate float64
	// MinLatency and MaxLatency bound one message's travel time; calls to
	// the same peer that overlap in flight may arrive in any order.
	MinLatency, MaxLatency time.Duration
	// Late is the chance that a message takes up to LateLatency instead.
	Late        float64
	LateLatency time.Duration
}

// Sim is one deterministic run: one goroutine, a manual clock and one
// random source drawn from the seed decide every interleaving of mailbox
// turns and every fate of a message.
type Sim struct {
	Seed  uint64
	Clock *clock.Fake
	Rand  *rand.Rand
	net   Faults
	// callTimeout is how long a caller waits for a lost message; the
	// endpoints are configured with the same RPC timeout.
	callTimeout time.Duration

	nodes []*Node
	ready []*box // boxes with turns queued
	steps int
	trace []string
	// replyDelay is set by invoke for the call being delivered.
	replyDelay time.Duration
	// cut holds partitioned node pairs (both orders).
	cut  map[[2]string]bool
	calm bool // HealAll was called
	// endpoints by simulated address.
	endpoints map[string]*endpoint
}

// New returns a simulation seeded with seed.
func New(seed uint64, faults Faults, callTimeout time.Duration) *Sim {
	if faults.MaxLatency < faults.MinLatency {
		faults.MaxLatency = faults.MinLatency
	}
	return &Sim{
		Seed:        seed,
		Clock:       clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		Rand:        rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		net:         faults,
		callTimeout: callTimeout,
		cut:         map[[2]string]bool{},
		endpoints:   map[string]*endpoint{},
	}
}

// Node is one simulated process: its endpoints' mailboxes share its fate.
type Node struct {
	Name  string
	sim   *Sim
	alive bool
	boxes map[*mailbox.Mailbox]*box
	// Incarnation counts restarts; messages to an old incarnation are lost.
	Incarnation int
}

type box struct {
	node   *Node
	inc    int
	m      *mailbox.Mailbox
	turns  []func()
	queued bool // in sim.ready
}

// AddNode registers a live process.
func (s *Sim) AddNode(name string) *Node {
	n := &Node{Name: name, sim: s, alive: true, boxes: map[*mailbox.Mailbox]*box{}}
	s.nodes = append(s.nodes, n)
	return n
}

// Alive reports whether the process runs.
func (n *Node) Alive() bool { return n.alive }

// Crash kills the process: its queued turns, timers and calls in flight
// are gone, and calls to it fail as connection refused.
func (n *Node) Crash() {
	if !n.alive {
		return
	}
	n.alive = false
	for _, b := range n.boxes {
		b.turns = nil
	}
	n.boxes = map[*mailbox.Mailbox]*box{}
	n.sim.tracef("crash %s", n.Name)
}

// Restart brings a crashed process back as a new incarnation; the caller
// builds fresh endpoints on it.
func (n *Node) Restart() {
	n.alive = true
	n.Incarnation++
	n.sim.tracef("restart %s (incarnation %d)", n.Name, n.Incarnation)
}

// Executor is the mailbox.Executor for endpoints of this node's current
// incarnation: once the node crashes, nothing its endpoints post or call
// runs again, even after a restart.
func (n *Node) Executor() mailbox.Executor { return nodeExec{n, n.Incarnation} }

type nodeExec struct {
	n   *Node
	inc int
}

func (e nodeExec) live() bool { return e.n.alive && e.n.Incarnation == e.inc }

func (e nodeExec) box(m *mailbox.Mailbox) *box {
	b := e.n.boxes[m]
	if b == nil {
		b = &box{node: e.n, inc: e.inc, m: m}
		e.n.boxes[m] = b
	}
	return b
}

func (e nodeExec) Post(m *mailbox.Mailbox, fn func()) {
	if !e.live() {
		return
	}
	b := e.box(m)
	b.turns = append(b.turns, fn)
	if !b.queued {
		b.queued = true
		e.n.sim.ready = append(e.n.sim.ready, b)
	}
}

func (e nodeExec) Call(m *mailbox.Mailbox, fn func()) { fn() }

func (e nodeExec) Go(m *mailbox.Mailbox, call func(context.Context), then func()) {
	s := e.n.sim
	if !e.live() {
		return
	}
	s.Clock.AfterFunc(s.latency(), func() {
		if !e.live() {
			return
		}
		s.replyDelay = s.latency()
		call(context.Background())
		s.Clock.AfterFunc(s.replyDelay, func() { e.Post(m, then) })
	})
}

func (s *Sim) latency() time.Duration {
	f := s.net
	if f.Late > 0 && s.Rand.Float64() < f.Late {
		return f.MinLatency + time.Duration(s.Rand.Int64N(int64(f.LateLatency-f.MinLatency)+1))
	}
	return f.MinLatency + time.Duration(s.Rand.Int64N(int64(f.MaxLatency-f.MinLatency)+1))
}

// Partition cuts (or, with cut false, heals) the link between a and b.
func (s *Sim) Partition(a, b string, cut bool) {
	if cut && s.calm {
		return
	}
	if cut {
		s.cut[[2]string{a, b}], s.cut[[2]string{b, a}] = true, true
	} else {
		delete(s.cut, [2]string{a, b})
		delete(s.cut, [2]string{b, a})
	}
	s.tracef("partition %s-%s %v", a, b, cut)
}

// HealAll removes every partition and stops injecting faults: later
// partitions are ignored and Calm reports true.
func (s *Sim) HealAll() {
	s.calm = true
	clear(s.cut)
	s.net.Drop, s.net.Duplicate, s.net.Late = 0, 0, 0
	s.tracef("heal")
}

// Step runs one mailbox turn, chosen at random among the ready ones, or,
// when none is ready, moves the clock to the next timer. It reports false
// when nothing is left to do.
func (s *Sim) Step() bool {
	s.steps++
	if len(s.ready) > 0 {
		i := s.Rand.IntN(len(s.ready))
		b := s.ready[i]
		live := b.node.alive && b.node.Incarnation == b.inc
		if len(b.turns) == 0 || !live { // its node crashed
			b.queued, b.turns = false, nil
			s.ready = slices.Delete(s.ready, i, i+1)
			return true
		}
		fn := b.turns[0]
		b.turns[0] = nil
		b.turns = b.turns[1:]
		if len(b.turns) == 0 {
			b.queued = false
			s.ready = slices.Delete(s.ready, i, i+1)
		}
		fn()
		return true
	}
	return s.Clock.Step()
}

// RunUntil steps until cond holds, the simulated time passes limit, or
// nothing is left; it reports whether cond held.
func (s *Sim) RunUntil(limit time.Time, cond func() bool) bool {
	for !cond() {
		if s.Clock.Now().After(limit) {
			return false
		}
		if len(s.ready) == 0 {
			if at, ok := s.Clock.Next(); !ok || at.After(limit) {
				s.Clock.Advance(limit.Sub(s.Clock.Now()) + time.Nanosecond)
				return cond()
			}
		}
		if !s.Step() {
			return cond()
		}
	}
	return true
}

// Calm reports whether HealAll ended the faults.
func (s *Sim) Calm() bool { return s.calm }

// Steps is the number of steps taken.
func (s *Sim) Steps() int { return s.steps }

func (s *Sim) tracef(format string, args ...any) {
	if len(s.trace) < 4096 {
		s.trace = append(s.trace, fmt.Sprintf("%s ", s.Clock.Now().Format("15:04:05.000"))+fmt.Sprintf(format, args...))
	}
}

// Trace is the log of faults injected so far (bounded).
func (s *Sim) Trace() []string { return s.trace }
