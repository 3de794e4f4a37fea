package stream

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/stream/runtime"
	"github.com/gofl/gofl/stream/source"
	"github.com/gofl/gofl/taskmanager/runner"
)

// opGateway is an operator's runtime.OperatorEventGateway. Incoming events
// are numbered by the sender (seq > 0): repeats are dropped and a gap is
// an error the operator fails with; seq 0 (the local executor) is taken as
// is. send carries outgoing events, numbered from 1.
type opGateway struct {
	mu     sync.Mutex
	inbox  [][]byte
	lastIn int64
	err    error
	// arrived receives when inbox or err changed (buffered: one signal
	// stands for any number), to wake the operator's task.
	arrived chan struct{}

	outSeq int64 // task goroutine only
	send   func(seq int64, payload []byte)
}

func newOpGateway(send func(seq int64, payload []byte)) *opGateway {
	return &opGateway{send: send, arrived: make(chan struct{}, 1)}
}

// Arrivals receives when events (or an error) arrived since the last
// ReceiveEvents; a waiting source's task wakes on it (WakingSource).
func (g *opGateway) Arrivals() <-chan struct{} { return g.arrived }

func (g *opGateway) signal() {
	select {
	case g.arrived <- struct{}{}:
	default:
	}
}

// deliver queues an event from the coordinator; safe from any goroutine.
func (g *opGateway) deliver(seq int64, payload []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	defer g.signal()
	switch {
	case g.err != nil:
	case seq == 0:
		g.inbox = append(g.inbox, payload)
	case seq <= g.lastIn:
	case seq != g.lastIn+1:
		g.err = fmt.Errorf("stream: operator event %d arrived after %d: events from the coordinator were lost", seq, g.lastIn)
	default:
		g.lastIn = seq
		g.inbox = append(g.inbox, payload)
	}
}

func (g *opGateway) fail(err error) {
	g.mu.Lock()
	if g.err == nil {
		g.err = err
	}
	g.mu.Unlock()
	g.signal()
}

// SendEventToCoordinator implements runtime.OperatorEventGateway.
func (g *opGateway) SendEventToCoordinator(payload []byte) {
	g.outSeq++
	g.send(g.outSeq, payload)
}

// ReceiveEvents implements runtime.OperatorEventGateway.
func (g *opGateway) ReceiveEvents() ([][]byte, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.inbox
	g.inbox = nil
	return out, g.err
}

// operatorGateway returns the gateway of operator opID of task t, made on
// first use (events may arrive before the operator opens); under ex.mu.
func (ex *clusterExecutor) operatorGatewayLocked(t *clusterTask, opID string) *opGateway {
	if g := t.gateways[opID]; g != nil {
		return g
	}
	if t.gateways == nil {
		t.gateways = map[string]*opGateway{}
	}
	g := newOpGateway(func(seq int64, payload []byte) {
		ex.reportCheckpoint(&pb.RunnerCheckpointReport{Report: &pb.RunnerCheckpointReport_OperatorEvent{OperatorEvent: &pb.OperatorEventRequest{
			JobId: t.jobID, Attempt: t.attempt, OperatorId: opID, Seq: seq, Payload: payload}}})
	})
	t.gateways[opID] = g
	return g
}

func (ex *clusterExecutor) operatorGateway(t *clusterTask, opID string) runtime.OperatorEventGateway {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	return ex.operatorGatewayLocked(t, opID)
}

// SendOperatorEventToTask implements runner.OperatorEventExecutor.
func (ex *clusterExecutor) SendOperatorEventToTask(req *pb.OperatorEventRequest) error {
	key := attemptString(req.Attempt)
	ex.mu.Lock()
	t := ex.tasks[key]
	if t == nil || t.canceled {
		ex.mu.Unlock()
		return fmt.Errorf("%w: %s", runner.ErrTaskNotFound, key)
	}
	g := ex.operatorGatewayLocked(t, req.OperatorId)
	ex.mu.Unlock()
	g.deliver(req.Seq, req.Payload)
	return nil
}

// localCoordinators runs the operator coordinators of a job in the local
// executor, as the JobMaster does on a cluster. mu stands for the
// JobMaster's mailbox: every coordinator call holds it.
type localCoordinators struct {
	mu     sync.Mutex
	coords map[string]*localCoordinator
}

type localCoordinator struct {
	lc    *localCoordinators
	coord source.OperatorCoordinator
	subs  []*opGateway
}

// newLocalCoordinators builds and starts the coordinators g's operators
// name; nil when there are none.
func newLocalCoordinators(g *jobgraph.JobGraph) (*localCoordinators, error) {
	lc := &localCoordinators{coords: map[string]*localCoordinator{}}
	for _, v := range g.Vertices {
		for _, op := range v.Operators {
			if op.Coordinator == "" {
				continue
			}
			f, ok := source.LookupCoordinator(op.Coordinator)
			if !ok {
				return nil, errors.Join(fmt.Errorf("operator %q: coordinator %q is not registered", op.Name, op.Coordinator), lc.close())
			}
			c := &localCoordinator{lc: lc}
			for i := 0; i < v.Parallelism; i++ {
				sub := i
				var gw *opGateway
				gw = newOpGateway(func(_ int64, payload []byte) { c.fromOperator(sub, gw, payload) })
				c.subs = append(c.subs, gw)
			}
			coord, err := f(op.CoordinatorConfig, v.Parallelism, c, c)
			if err != nil {
				return nil, errors.Join(fmt.Errorf("operator %q: %w", op.Name, err), lc.close())
			}
			c.coord = coord
			lc.coords[op.ID] = c
		}
	}
	if len(lc.coords) == 0 {
		return nil, nil
	}
	lc.mu.Lock()
	var err error
	for _, c := range lc.coords {
		if err = c.coord.Start(); err != nil {
			break
		}
	}
	lc.mu.Unlock()
	if err != nil {
		// Without mu: closing waits for async calls that may be posting.
		return nil, errors.Join(err, lc.close())
	}
	return lc, nil
}

// gateway is TaskEnv.OperatorEvents of subtask sub.
func (lc *localCoordinators) gateway(sub int) func(string) runtime.OperatorEventGateway {
	if lc == nil {
		return nil
	}
	return func(opID string) runtime.OperatorEventGateway {
		if c := lc.coords[opID]; c != nil {
			return c.subs[sub]
		}
		return nil
	}
}

// close closes every coordinator; called without mu once the tasks ended
// (Close waits for async calls, which take mu to post their results).
func (lc *localCoordinators) close() error {
	if lc == nil {
		return nil
	}
	var err error
	for _, c := range lc.coords {
		err = errors.Join(err, c.coord.Close())
	}
	return err
}

func (c *localCoordinator) fromOperator(sub int, gw *opGateway, payload []byte) {
	ev, _, err := source.EventCodec.Decode(payload)
	if err == nil {
		c.lc.mu.Lock()
		err = c.coord.HandleEventFromOperator(sub, ev)
		c.lc.mu.Unlock()
	}
	if err != nil {
		gw.fail(fmt.Errorf("stream: operator coordinator: %w", err))
	}
}

// Send implements source.Gateway; called under mu.
func (c *localCoordinator) Send(sub int, ev source.Event) {
	if sub >= 0 && sub < len(c.subs) {
		c.subs[sub].deliver(0, source.EventCodec.Append(nil, ev))
	}
}

// Post implements source.Executor: fn runs under mu. Only the
// coordinator's async calls post, from their own goroutines.
func (c *localCoordinator) Post(fn func()) {
	c.lc.mu.Lock()
	defer c.lc.mu.Unlock()
	fn()
}
