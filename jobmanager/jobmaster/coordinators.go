package jobmaster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/mailbox"
	"github.com/gofl/gofl/internal/outbox"
	"github.com/gofl/gofl/jobgraph"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/jobmanager/scheduler"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/stream/source"
)

// ErrCoordinator wraps the failures of an operator coordinator; they fail
// the job globally (Flink's OperatorCoordinator failJob), and the restart
// strategy decides whether it restarts.
var ErrCoordinator = errors.New("jobmaster: operator coordinator failed")

// opCoordinator is one operator coordinator the JobMaster runs (a source's
// split enumerator, Flink's OperatorCoordinatorHolder). Everything in it
// runs on the JobMaster's mailbox: the enumerator's callbacks are posted
// there (source.Executor) and its events leave through the TaskManagers'
// outboxes, so no goroutine of its own owns JobMaster state.
type opCoordinator struct {
	jm          *JobMaster
	opID        string
	name        string // the registered coordinator
	vertex      jobgraph.VertexID
	parallelism int
	coord       source.OperatorCoordinator
	started     bool
	// failed is set from a failure until the next deployment of the
	// source resets the coordinator to the latest completed checkpoint.
	failed bool
	closed bool
	// current is the attempt of each subtask the coordinator serves: the
	// latest deployed. A new one resets the subtask (SubtaskReset).
	current map[int32]eg.ExecutionAttemptID
	// inSeq and outSeq are the last event numbers received from and sent
	// to each attempt.
	inSeq  map[eg.ExecutionAttemptID]int64
	outSeq map[eg.ExecutionAttemptID]int64
	// states are the coordinator checkpoints of pending checkpoints;
	// lastID/lastState the latest completed one (restored after a
	// coordinator failure).
	states    map[int64][]byte
	lastID    int64
	lastState []byte
}

// newCoordinators builds the coordinators the job's operators name. An
// operator naming a coordinator this binary has not registered fails the
// submission.
func (jm *JobMaster) newCoordinators() error {
	jm.coords = map[string]*opCoordinator{}
	for _, v := range jm.jg.Vertices {
		for _, op := range v.Operators {
			if op.Coordinator == "" {
				continue
			}
			f, ok := source.LookupCoordinator(op.Coordinator)
			if !ok {
				return fmt.Errorf("%w: operator %q needs the coordinator %q, which this JobManager does not have (registered: %v)",
					jobgraph.ErrInvalid, op.Name, op.Coordinator, source.RegisteredCoordinators())
			}
			c := &opCoordinator{jm: jm, opID: op.ID, name: op.Coordinator, vertex: v.ID, parallelism: v.Parallelism,
				current: map[int32]eg.ExecutionAttemptID{}, inSeq: map[eg.ExecutionAttemptID]int64{},
				outSeq: map[eg.ExecutionAttemptID]int64{}, states: map[int64][]byte{}}
			coord, err := f(op.CoordinatorConfig, v.Parallelism, c, c)
			if err != nil {
				return fmt.Errorf("%w: building the coordinator of operator %q: %w", jobgraph.ErrInvalid, op.Name, err)
			}
			c.coord = coord
			jm.coords[op.ID] = c
		}
	}
	return nil
}

// preferSourceHosts asks each coordinator where its source's data lives
// (source.HostPreferrer: HDFS block hosts) and tells the scheduler, so
// the source's subtasks get slots on those hosts where there are some.
// Called from New, before scheduling, as Flink computes input splits when
// it builds the ExecutionGraph; a failure only costs the preference.
func (jm *JobMaster) preferSourceHosts() {
	for _, c := range jm.sortedCoordinators() {
		hp, ok := c.coord.(source.HostPreferrer)
		if !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), preferredHostsTimeout)
		hosts, err := hp.PreferredHosts(ctx)
		cancel()
		if err != nil {
			jm.log.Warn().Err(err).Str("operator_id", c.opID).Msg("no preferred hosts for the source: scheduling it anywhere")
			continue
		}
		jm.sched.SetPreferredHosts(c.vertex, hosts)
		if len(hosts) > 0 {
			jm.log.Debug().Str("operator_id", c.opID).Interface("hosts", hosts).Msg("source prefers hosts")
		}
	}
}

// preferredHostsTimeout bounds the NameNode's answer for a source's hosts:
// a job's submission waits for it.
const preferredHostsTimeout = 30 * time.Second

// sortedCoordinators returns the coordinators in operator ID order.
func (jm *JobMaster) sortedCoordinators() []*opCoordinator {
	out := make([]*opCoordinator, 0, len(jm.coords))
	for _, c := range jm.coords {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].opID < out[j].opID })
	return out
}

// startCoordinators restores the coordinators from the checkpoint or
// savepoint the job starts from and starts them; on the mailbox.
func (jm *JobMaster) startCoordinators() {
	for _, c := range jm.sortedCoordinators() {
		if r := jm.cfg.Restored; r != nil {
			if st := coordinatorState(r.Metadata, c.opID); st != nil {
				c.lastID, c.lastState = r.ID, st
				if err := c.coord.ResetToCheckpoint(r.ID, st); err != nil {
					c.fail(err)
					continue
				}
			}
		}
		if err := c.coord.Start(); err != nil {
			c.fail(err)
			continue
		}
		c.started = true
	}
}

func coordinatorState(md *pb.CheckpointMetadata, opID string) []byte {
	for _, o := range md.GetOperators() {
		if o.GetOperatorId() == opID && len(o.GetCoordinatorState()) > 0 {
			return o.GetCoordinatorState()
		}
	}
	return nil
}

// fail fails the job globally for a coordinator's failure; the coordinator
// ignores events until the source's next deployment resets it.
func (c *opCoordinator) fail(err error) {
	if c.failed || c.closed {
		return
	}
	c.failed = true
	cause := fmt.Errorf("%w: %s (%s): %w", ErrCoordinator, c.opID, c.name, err)
	c.jm.log.Warn().Err(cause).Str("operator_id", c.opID).Msg("operator coordinator failed; failing the job")
	c.jm.feed(scheduler.FailJob{Cause: cause})
}

// Post implements source.Executor: fn runs on the mailbox, unless the
// coordinator closed meanwhile.
func (c *opCoordinator) Post(fn func()) {
	c.jm.mb.Post(func() {
		if !c.closed && !c.failed {
			fn()
			c.jm.flush()
		}
	})
}

// Send implements source.Gateway: the event goes to the subtask's current
// attempt through its TaskManager's outbox, numbered. An event for a
// subtask without a running attempt is dropped: the splits it carries are
// the subtask's uncheckpointed ones, which its reset gives back. An event
// that cannot be delivered fails the job (the reader would wait for it for
// ever).
func (c *opCoordinator) Send(subtask int, ev source.Event) {
	a, ok := c.current[int32(subtask)]
	if !ok || c.closed {
		return
	}
	jm := c.jm
	g := jm.sched.Graph()
	v, err := g.Lookup(a)
	// Not only RUNNING: a reader's first events may overtake its state
	// update (they travel another runner stream).
	if err != nil || g.Vertices[v].Current.State.IsTerminal() || g.Vertices[v].Current.Location.ID == "" {
		jm.log.Debug().Str("attempt", a.String()).Int("kind", int(ev.Kind)).Msg("operator event for a subtask that does not run; dropped")
		return
	}
	tm := jm.tms[g.Vertices[v].Current.Location.ID]
	if tm == nil {
		return
	}
	c.outSeq[a]++
	req := &pb.OperatorEventRequest{JobId: jm.jobID, Attempt: attemptProto(a), OperatorId: c.opID, Seq: c.outSeq[a],
		Payload: source.EventCodec.Append(nil, ev)}
	cl := tm.client
	what := fmt.Sprintf("SendOperatorEventToTask %d %s", req.Seq, a)
	jm.send(tm.out, outbox.Message{What: what,
		Call: func(ctx context.Context) error { _, err := cl.SendOperatorEventToTask(ctx, req); return err },
		Done: func(err error) {
			if err == nil || status.Code(err) == codes.NotFound || errors.Is(err, outbox.ErrClosed) {
				return // delivered, or the attempt is gone (its reset gives the splits back)
			}
			if _, lerr := jm.sched.Graph().Lookup(a); lerr != nil {
				return
			}
			jm.feed(scheduler.FailJob{Cause: fmt.Errorf("%w: %s: event %d for %s not delivered: %w", ErrCoordinator, c.opID, req.Seq, a, err)})
		}})
}

// coordinatorsDeploying tells the coordinators of d's vertex that a new
// attempt of a subtask is deployed: the previous attempt's splits go back
// (assigned after the checkpoint the new attempt restores), and a failed
// coordinator is reset to the latest completed checkpoint first.
func (jm *JobMaster) coordinatorsDeploying(d scheduler.Deployment) {
	if len(jm.coords) == 0 {
		return
	}
	a := attemptID(d.Descriptor.Attempt)
	restored := d.Descriptor.GetTaskRestore().GetCheckpointId()
	for _, c := range jm.sortedCoordinators() {
		if c.vertex != a.JobVertex || c.closed {
			continue
		}
		if c.failed {
			c.failed = false
			if err := c.coord.ResetToCheckpoint(c.lastID, c.lastState); err != nil {
				c.fail(err)
				continue
			}
			c.current = map[int32]eg.ExecutionAttemptID{}
			c.started = true
		}
		if prev, ok := c.current[a.Subtask]; ok && prev != a {
			c.coord.SubtaskReset(int(a.Subtask), restored)
			delete(c.inSeq, prev)
			delete(c.outSeq, prev)
		}
		c.current[a.Subtask] = a
	}
}

// coordinatorsCheckpoint snapshots every coordinator for checkpoint id,
// before its triggers leave (Flink checkpoints the coordinators first).
func (jm *JobMaster) coordinatorsCheckpoint(id int64) {
	for _, c := range jm.sortedCoordinators() {
		if c.failed || c.closed || !c.started {
			continue
		}
		st, err := c.coord.CheckpointCoordinator(id)
		if err != nil {
			c.fail(err)
			continue
		}
		c.states[id] = st
	}
}

// coordinatorsCompleted tells the coordinators that checkpoint id
// completed (complete) or was aborted.
func (jm *JobMaster) coordinatorsCompleted(id int64, complete bool) {
	for _, c := range jm.sortedCoordinators() {
		st, ok := c.states[id]
		if !complete {
			delete(c.states, id)
			continue
		}
		if ok {
			c.lastID, c.lastState = id, st
		}
		for old := range c.states {
			if old <= id {
				delete(c.states, old)
			}
		}
		if !c.failed && !c.closed {
			c.coord.NotifyCheckpointComplete(id)
		}
	}
}

// addCoordinatorStates puts the coordinators' checkpoints of md's
// checkpoint into its operators' states, before the _metadata is written.
func (jm *JobMaster) addCoordinatorStates(md *pb.CheckpointMetadata) {
	for _, c := range jm.sortedCoordinators() {
		st, ok := c.states[md.GetCheckpointId()]
		if !ok {
			continue
		}
		var op *pb.OperatorState
		for _, o := range md.Operators {
			if o.OperatorId == c.opID {
				op = o
			}
		}
		if op == nil {
			op = &pb.OperatorState{OperatorId: c.opID, Parallelism: int32(c.parallelism)}
			md.Operators = append(md.Operators, op)
		}
		op.CoordinatorState = st
	}
}

// closeCoordinators stops every coordinator once.
func (jm *JobMaster) closeCoordinators() {
	for _, c := range jm.sortedCoordinators() {
		if c.closed {
			continue
		}
		c.closed = true
		if err := c.coord.Close(); err != nil {
			jm.log.Warn().Err(err).Str("operator_id", c.opID).Msg("closing the operator coordinator failed")
		}
	}
}

// SendOperatorEventToCoordinator hands an operator's event to its
// coordinator. Events of one attempt are numbered: a repeat is ignored, a
// gap (a lost event) fails the job. NOT_FOUND for an attempt that is not
// its subtask's current one or an operator without a coordinator.
func (jm *JobMaster) SendOperatorEventToCoordinator(ctx context.Context, req *pb.OperatorEventRequest) (*pb.Ack, error) {
	if req.Attempt == nil {
		return nil, status.Error(codes.InvalidArgument, "jobmaster: operator event without an attempt")
	}
	ev, n, err := source.EventCodec.Decode(req.Payload)
	if err == nil && n != len(req.Payload) {
		err = errors.New("trailing bytes")
	}
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "jobmaster: undecodable operator event: %v", err)
	}
	a := attemptID(req.Attempt)
	return mailbox.Call(ctx, jm.mb, func() (*pb.Ack, error) {
		c := jm.coords[req.OperatorId]
		if c == nil {
			return nil, status.Errorf(codes.NotFound, "jobmaster: operator %s has no coordinator", req.OperatorId)
		}
		g := jm.sched.Graph()
		v, err := g.Lookup(a)
		if err != nil || c.current[a.Subtask] != a {
			return nil, status.Errorf(codes.NotFound, "jobmaster: operator event of attempt %s, not the current one", a)
		}
		if c.failed || c.closed {
			return &pb.Ack{}, nil
		}
		switch last := c.inSeq[a]; {
		case req.Seq <= last:
			return &pb.Ack{}, nil // a repeat
		case req.Seq != last+1:
			jm.feed(scheduler.FailJob{Cause: fmt.Errorf("%w: %s: event %d of %s arrived after %d: events were lost", ErrCoordinator, c.opID, req.Seq, a, last)})
			return &pb.Ack{}, nil
		}
		c.inSeq[a] = req.Seq
		if ev.Host == "" {
			ev.Host = g.Vertices[v].Current.Location.Host
		}
		jm.hold(func() {
			if err := c.coord.HandleEventFromOperator(int(a.Subtask), ev); err != nil {
				c.fail(err)
			}
		})
		jm.flush()
		return &pb.Ack{}, nil
	})
}
