package runtime

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"time"
)

// InputGate delivers the events of every channel of one logical input of a
// task (all producer subtasks of all edges into that input), in FIFO order
// per channel. A local gate is a Go channel; a network gate decodes buffers
// into batches. The task stops reading once every channel has delivered
// EventEndOfPartition, so Batches is never closed.
type InputGate interface {
	NumChannels() int
	Batches() <-chan ChannelBatch
}

// RecyclingInputGate is an InputGate that takes back the Events of the
// batches the task is done with, to fill later batches: a network gate
// allocated a batch for every 256 records, half the allocations of a
// keyed exchange (bench-kafka).
type RecyclingInputGate interface {
	InputGate
	// Recycle takes back evs, a batch's Events the task read through and
	// keeps no reference to (none of it held back or captured). It never
	// blocks; the gate may drop evs.
	Recycle(evs []Event)
}

// ResultWriter writes one produced result: a subpartition per consumer
// subtask. Emit may buffer; Flush hands buffered events on and may block
// under backpressure; Finish flushes and ends every subpartition with
// EventEndOfPartition. Errors (the job was cancelled, the network failed)
// abort the task. A ResultWriter is used by one goroutine. With
// checkpointing, barriers, cancellations and EventEndOfData are emitted on
// every subpartition and flushed right away.
type ResultWriter interface {
	NumSubpartitions() int
	Emit(subpartition int, ev Event) error
	Flush() error
	Finish() error
}

// OperatorSpec is one operator of a chain.
type OperatorSpec struct {
	ID   string
	Name string
	Kind string
	// NewOperator creates the operator of one subtask; NewSource instead for
	// a source head.
	NewOperator func() Operator
	NewSource   func() Source
	// Input is the chain index of the operator feeding this one, or -1 for
	// the head (fed by the task's input gates).
	Input int
	// InputTag, for a chained operator, names the side output of its input
	// operator it reads (Context.SideOutput); "" is the main output.
	InputTag string
}

// OutputSpec is one produced result of a chain.
type OutputSpec struct {
	// From is the chain index of the operator whose output this is.
	From int
	// NewPartitioner creates the partitioner of one producer subtask.
	NewPartitioner func(subtask int) Partitioner
	// Codec encodes the records of this output for the network.
	Codec Codec
	// Tag names the side output of operator From this output carries
	// (Context.SideOutput); "" is the main output. Watermarks reach side
	// outputs too.
	Tag string
	// NewCombiner, optional, creates the combiner of one producer subtask
	// that pre-aggregates the output's records (see Combiner); it is used
	// only when the task runs without checkpointing. CombinerName names it
	// in errors.
	NewCombiner  func() Combiner
	CombinerName string
}

// TaskSpec is the chain a vertex runs: operators in chain order (the head
// first; each other operator fed by an earlier one), the number of logical
// inputs of the head (0 for a source, at most 2), and the results.
type TaskSpec struct {
	Name      string
	Operators []OperatorSpec
	NumInputs int
	Outputs   []OutputSpec
	// InputCodecs decodes the records of each logical input that arrive
	// from the network (all edges into one input carry the same type).
	InputCodecs []Codec
}

// TaskEnv is what one subtask is given to run: its position, its input
// gates (one per logical input), its writers (aligned with
// TaskSpec.Outputs), a clock (time.Now when nil) and where accumulator
// results go (see Context.Accumulate).
type TaskEnv struct {
	SubtaskIndex   int
	Parallelism    int
	MaxParallelism int
	Gates          []InputGate
	Writers        []ResultWriter
	Now            func() time.Time
	Accumulate     func(name string, value []byte)
	// OperatorEvents returns the gateway of an operator to its
	// coordinator; nil: none.
	OperatorEvents func(operatorID string) OperatorEventGateway
	// Control delivers the CheckpointCoordinator's triggers and
	// notifications; nil when checkpointing is off.
	Control <-chan CheckpointControl
	// Responder takes the task's snapshots; set with Control.
	Responder CheckpointResponder
	// Restore is the state the task starts from; nil for a fresh start.
	Restore *TaskRestore
	// Checkpointing: the job takes periodic checkpoints
	// (execution.checkpointing.interval > 0), so sinks stage output and a
	// finished task waits for a final checkpoint. A streaming job's tasks
	// get Control even without it, for savepoints.
	Checkpointing bool
	// StateBackend configures the keyed state backends operators create
	// with Context.NewKeyedStateBackend (zero value: hashmap).
	StateBackend StateBackendOptions
	// Batch is the slot's managed memory and the I/O manager the task's
	// batch operators (sorts, joins) reserve and spill with. A nil Memory:
	// DefaultManagedMemory for the task alone; a nil IO: one on
	// os.TempDir that the task closes (removing its spill files) when it
	// ends.
	Batch BatchMemory
	// Metrics is the subtask's metric group; each operator gets its
	// subgroup named by the operator's name as Context.Metrics (Flink's
	// operator scope). Nil: a
	// LocalMetrics per task.
	Metrics MetricGroup
	// Watermarks receives the task's current input and output watermarks
	// for its metrics; nil: not reported.
	Watermarks *WatermarkGauges
}

// OperatorError is a failure of one operator: an error it returned or a
// panic in it (then Stack holds the goroutine's stack).
type OperatorError struct {
	Task       string
	Subtask    int
	Operator   string
	OperatorID string
	Err        error
	Stack      string
}

func (e *OperatorError) Error() string {
	s := fmt.Sprintf("operator %q (task %q, subtask %d) failed: %v", e.Operator, e.Task, e.Subtask, e.Err)
	if e.Stack != "" {
		s += "\n" + e.Stack
	}
	return s
}

func (e *OperatorError) Unwrap() error { return e.Err }

// abort unwinds a task for a reason outside the operators (cancellation, a
// writer failing).
type abort struct{ err error }

type opNode struct {
	t     *task
	index int
	spec  *OperatorSpec
	op    Operator
	src   Source
	ctx   *Context
	outs  []Output
	// side holds the outputs of each side output tag, in sideTags order.
	side     map[string][]Output
	sideTags []string
	opened   bool
	// ckOp and listener are the operator's checkpoint interfaces, nil when
	// it does not implement them.
	ckOp     CheckpointedOperator
	listener CheckpointListener
}

type task struct {
	ctx     context.Context
	spec    *TaskSpec
	env     TaskEnv
	nodes   []*opNode
	timers  procQueue
	writers []ResultWriter
	now     func() time.Time
	// wakeup ends a wait early: a source's (WakingSource) while it waits
	// after NothingAvailable, else nil.
	wakeup <-chan struct{}
	wm     int64
	// wmg publishes wm and the last watermark written for the metrics.
	wmg *WatermarkGauges
	// current is the operator running now: records go down the chain as
	// nested calls, so a panic is attributed to it by the one recover in
	// protect instead of a deferred recover per operator per record.
	current Caller
	// ctl is TaskEnv.Control; ck is the checkpointing state, nil when
	// checkpointing is off (then nothing of it runs).
	ctl <-chan CheckpointControl
	ck  *checkpointer
	// in is the state of the input channels of a task with inputs.
	in *inputState
	// finishedOnRestore: every operator was restored as finished
	// (FLIP-147), so the operators see no end of input again.
	finishedOnRestore bool
	// combiners pre-aggregate outputs (OutputSpec.NewCombiner); flushed
	// once the operators finished.
	combiners []*combiningOutput
}

// RunTask runs one subtask of a chain until its input ends, it fails, or
// ctx is cancelled: open the operators (last first), process input, and at
// the end of input fire pending processing-time timers, emit the final
// MaxWatermark, finish the operators (head first), finish the writers, and
// close the operators. The returned error is an *OperatorError when an
// operator failed, ctx.Err() when cancelled.
func RunTask(ctx context.Context, spec *TaskSpec, env TaskEnv) (err error) {
	if env.Batch.Memory == nil {
		mem := NewMemoryManager(DefaultManagedMemory)
		env.Batch.Memory = mem
		defer func() { _ = mem.Close() }() // after the operators closed
	}
	if env.Batch.IO == nil {
		io := NewIOManager(nil)
		env.Batch.IO = io
		defer func() {
			if cerr := io.Close(); err == nil {
				err = cerr
			}
		}()
	}
	t, err := newTask(ctx, spec, env)
	if err != nil {
		return err
	}
	defer func() {
		for _, c := range t.combiners {
			if mc, ok := c.c.(ManagedCombiner); ok {
				mc.Close()
			}
		}
		for i := len(t.nodes) - 1; i >= 0; i-- {
			n := t.nodes[i]
			if !n.opened {
				continue
			}
			cerr := t.protect(func() error {
				n.call(func() error {
					if n.src != nil {
						return n.src.Close()
					}
					return n.op.Close()
				})
				return nil
			})
			if err == nil {
				err = cerr
			}
		}
	}()
	return t.protect(t.run)
}

func newTask(ctx context.Context, spec *TaskSpec, env TaskEnv) (*task, error) {
	if len(spec.Operators) == 0 {
		return nil, fmt.Errorf("task %q has no operators", spec.Name)
	}
	if spec.NumInputs > 2 || len(env.Gates) != spec.NumInputs {
		return nil, fmt.Errorf("task %q has %d logical inputs and %d gates (at most 2)", spec.Name, spec.NumInputs, len(env.Gates))
	}
	if len(env.Writers) != len(spec.Outputs) {
		return nil, fmt.Errorf("task %q has %d outputs and %d writers", spec.Name, len(spec.Outputs), len(env.Writers))
	}
	t := &task{ctx: ctx, spec: spec, env: env, writers: env.Writers, now: env.Now, wm: MinWatermark, ctl: env.Control, wmg: env.Watermarks}
	if t.wmg == nil {
		t.wmg = NewWatermarkGauges()
	}
	if t.now == nil {
		t.now = time.Now
	}
	if env.Control != nil {
		if env.Responder == nil {
			return nil, fmt.Errorf("task %q has a checkpoint control channel and no responder", spec.Name)
		}
		t.ck = newCheckpointer(env.Responder, env.Checkpointing)
	}
	metrics := env.Metrics
	if metrics == nil {
		metrics = NewLocalMetrics()
	}
	for i := range spec.Operators {
		os := &spec.Operators[i]
		n := &opNode{t: t, index: i, spec: os}
		if i == 0 && spec.NumInputs == 0 {
			if os.NewSource == nil {
				return nil, fmt.Errorf("task %q has no inputs and its head %q is no source", spec.Name, os.Name)
			}
			n.src = os.NewSource()
		} else {
			if os.NewOperator == nil {
				return nil, fmt.Errorf("task %q: operator %q has no factory", spec.Name, os.Name)
			}
			n.op = os.NewOperator()
		}
		if i > 0 {
			if os.Input < 0 || os.Input >= i {
				return nil, fmt.Errorf("task %q: operator %q has chain input %d", spec.Name, os.Name, os.Input)
			}
			up := t.nodes[os.Input]
			up.addOutput(os.InputTag, n)
		}
		n.ctx = &Context{
			TaskName: spec.Name, OperatorID: os.ID, OperatorName: os.Name,
			SubtaskIndex: env.SubtaskIndex, Parallelism: env.Parallelism, MaxParallelism: env.MaxParallelism,
			Accumulate: env.Accumulate, task: t, index: i,
			Checkpointing: env.Checkpointing, side: map[string]Output{},
			Metrics: metrics.AddGroup(os.Name), Batch: env.Batch,
		}
		if env.OperatorEvents != nil {
			n.ctx.OperatorEvents = env.OperatorEvents(os.ID)
		}
		if env.Restore != nil {
			n.ctx.Restore = env.Restore.Operators[os.ID]
		}
		var impl any = n.op
		if n.src != nil {
			impl = n.src
		}
		n.ckOp, _ = impl.(CheckpointedOperator)
		n.listener, _ = impl.(CheckpointListener)
		t.nodes = append(t.nodes, n)
	}
	if env.Restore != nil {
		t.finishedOnRestore = true
		for _, n := range t.nodes {
			if n.ctx.Restore == nil || !n.ctx.Restore.Finished {
				t.finishedOnRestore = false
			}
		}
	}
	for i, o := range spec.Outputs {
		if o.From < 0 || o.From >= len(t.nodes) {
			return nil, fmt.Errorf("task %q: output %d comes from operator %d", spec.Name, i, o.From)
		}
		w := env.Writers[i]
		var out Output = &writerOutput{w: w, p: o.NewPartitioner(env.SubtaskIndex), n: w.NumSubpartitions(), wm: t.wmg}
		if o.NewCombiner != nil && env.Control == nil {
			name := o.CombinerName
			if name == "" {
				name = "Combine"
			}
			comb := o.NewCombiner()
			if mc, ok := comb.(ManagedCombiner); ok {
				mc.SetBatchMemory(env.Batch)
			}
			c := newCombiningOutput(comb, out, &opNode{t: t, index: o.From, spec: &OperatorSpec{ID: t.nodes[o.From].spec.ID, Name: name}})
			t.combiners = append(t.combiners, c)
			out = c
		}
		t.nodes[o.From].addOutput(o.Tag, out)
	}
	for _, n := range t.nodes {
		outs := n.outs
		for _, tag := range n.sideTags {
			// The main output carries the watermarks to the side outputs.
			for _, o := range n.side[tag] {
				outs = append(outs, watermarkOnly{o})
			}
		}
		n.ctx.Output = outputOf(outs)
		for tag, os := range n.side {
			n.ctx.side[tag] = sideOutput{outputOf(os)}
		}
	}
	return t, nil
}

func (t *task) protect(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			switch e := p.(type) {
			case *OperatorError:
				err = e
			case abort:
				err = e.err
			default:
				if n := t.current.n; n != nil {
					err = &OperatorError{Task: t.spec.Name, Subtask: t.env.SubtaskIndex, Operator: n.spec.Name, OperatorID: n.spec.ID,
						Err: fmt.Errorf("panic: %v", p), Stack: string(debug.Stack())}
				} else {
					err = fmt.Errorf("task %q (subtask %d): panic: %v\n%s", t.spec.Name, t.env.SubtaskIndex, p, debug.Stack())
				}
			}
		}
	}()
	return f()
}

func (t *task) run() error {
	for i := len(t.nodes) - 1; i >= 0; i-- {
		n := t.nodes[i]
		n.opened = true
		n.call(func() error {
			if n.src != nil {
				return n.src.Open(n.ctx)
			}
			return n.op.Open(n.ctx)
		})
	}
	if err := t.checkInFlight(); err != nil {
		return err
	}
	if err := t.emitRestoredOutput(); err != nil {
		return err
	}
	var err error
	if t.spec.NumInputs == 0 {
		err = t.runSource()
	} else {
		err = t.runInputs()
	}
	if err != nil {
		return err
	}
	if t.ck == nil {
		t.endInput()
	}
	// With checkpointing the input ended in the loops (endData), which
	// returned once the final checkpoint completed.
	for _, w := range t.writers {
		if err := w.Finish(); err != nil {
			return err
		}
	}
	return nil
}

// endInput fires the pending processing-time timers, emits the final
// MaxWatermark and finishes the operators, head first. Operators restored
// as finished already did all that: only the watermark goes on.
func (t *task) endInput() {
	if t.finishedOnRestore {
		t.broadcast(Event{Kind: EventWatermark, Watermark: MaxWatermark})
		return
	}
	for i := range t.nodes {
		t.drainTimers(i)
	}
	t.advance(MaxWatermark)
	for _, n := range t.nodes {
		if n.op != nil {
			n.call(n.op.Finish)
		}
	}
	for _, c := range t.combiners {
		c.flush()
	}
}

// broadcast emits ev on every subpartition of every writer.
func (t *task) broadcast(ev Event) {
	for _, w := range t.writers {
		for s, n := 0, w.NumSubpartitions(); s < n; s++ {
			if err := w.Emit(s, ev); err != nil {
				panic(abort{err})
			}
		}
	}
}

func (t *task) advance(wm int64) {
	if wm <= t.wm {
		return
	}
	t.wm = wm
	t.wmg.input.Store(wm)
	head := t.nodes[0]
	if head.src != nil {
		head.ctx.Output.EmitWatermark(wm)
	} else {
		head.EmitWatermark(wm)
	}
}

func (t *task) flush() error {
	for _, w := range t.writers {
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// wait blocks until until (or the next processing timer) or ctx is done,
// after flushing the writers.
func (t *task) wait(until time.Time, c0, c1 <-chan ChannelBatch) (ChannelBatch, int, error) {
	if err := t.flush(); err != nil {
		return ChannelBatch{}, -1, err
	}
	if len(t.timers.items) > 0 {
		if nt := time.UnixMilli(t.timers.items[0].ts); until.IsZero() || nt.Before(until) {
			until = nt
		}
	}
	var timerC <-chan time.Time
	if !until.IsZero() {
		d := until.Sub(t.now())
		if d <= 0 {
			return ChannelBatch{}, -1, nil
		}
		tm := time.NewTimer(d)
		defer tm.Stop()
		timerC = tm.C
	}
	select {
	case b := <-c0:
		return b, 0, nil
	case b := <-c1:
		return b, 1, nil
	case <-timerC:
		return ChannelBatch{}, -1, nil
	case <-t.wakeup:
		return ChannelBatch{}, -1, nil
	case m := <-t.ctl:
		t.onControl(m)
		return ChannelBatch{}, -1, nil
	case pb := <-t.prioChan(0):
		t.onPriority(0, pb)
		return ChannelBatch{}, -1, nil
	case pb := <-t.prioChan(1):
		t.onPriority(1, pb)
		return ChannelBatch{}, -1, nil
	case <-t.ctx.Done():
		return ChannelBatch{}, -1, t.ctx.Err()
	}
}

// prioChan is input i's priority channel, nil without one.
func (t *task) prioChan(i int) <-chan ChannelBatch {
	if t.in == nil {
		return nil
	}
	return t.in.prio[i]
}

// onPriority handles a batch of priority events of input gi.
func (t *task) onPriority(gi int, b ChannelBatch) {
	g := &t.in.gates[gi]
	if b.Channel < 0 || b.Channel >= len(g.ch) {
		panic(abort{fmt.Errorf("task %q: input %d has no channel %d", t.spec.Name, gi, b.Channel)})
	}
	for _, ev := range b.Events {
		if ev.Kind == EventBarrier && t.ck != nil {
			t.onBarrier(&g.ch[b.Channel], ev.Barrier, true)
		}
	}
}

// pollPriority handles the priority batches waiting, if any.
func (t *task) pollPriority() bool {
	for i := range 2 {
		select {
		case pb := <-t.in.prio[i]:
			t.onPriority(i, pb)
			return true
		default:
		}
	}
	return false
}

// interrupt reports whether processing a batch should stop for a priority
// barrier, or to capture arriving batches quickly.
func (in *inputState) interrupt(capturing bool) bool {
	for i := range 2 {
		if len(in.prio[i]) > 0 || capturing && len(in.batches[i]) > 0 {
			return true
		}
	}
	return false
}

func (t *task) fireDueTimers() {
	if len(t.timers.items) == 0 {
		return
	}
	now := t.now().UnixMilli()
	for len(t.timers.items) > 0 && t.timers.items[0].ts <= now {
		pt := heap.Pop(&t.timers).(procTimer)
		n := t.nodes[pt.op]
		n.call(func() error { return pt.fn(pt.ts) })
	}
}

// drainTimers fires the pending processing-time timers of operator i in
// timestamp order; timers it registers meanwhile are dropped.
func (t *task) drainTimers(i int) {
	var mine, rest []procTimer
	for _, pt := range t.timers.items {
		if pt.op == i {
			mine = append(mine, pt)
		} else {
			rest = append(rest, pt)
		}
	}
	if len(mine) == 0 {
		return
	}
	t.timers.items = rest
	heap.Init(&t.timers)
	sort.Slice(mine, func(a, b int) bool {
		if mine[a].ts != mine[b].ts {
			return mine[a].ts < mine[b].ts
		}
		return mine[a].seq < mine[b].seq
	})
	n := t.nodes[i]
	for _, pt := range mine {
		n.call(func() error { return pt.fn(pt.ts) })
	}
	rest = t.timers.items[:0]
	for _, pt := range t.timers.items {
		if pt.op != i {
			rest = append(rest, pt)
		}
	}
	t.timers.items = rest
	heap.Init(&t.timers)
}

// runSource polls the source until its input ends. With checkpointing on,
// control messages are handled between polls, the end of input is
// announced with EventEndOfData, and it returns only once a checkpoint
// taken after that completed (FLIP-147).
func (t *task) runSource() error {
	src := t.nodes[0]
	var wakeup <-chan struct{}
	if ws, ok := src.src.(WakingSource); ok {
		wakeup = ws.Wakeup()
	}
	if t.finishedOnRestore {
		if t.ck == nil {
			return nil
		}
		t.endData(true)
	}
	for t.ck == nil || !t.ck.dataEnded {
		if err := t.ctx.Err(); err != nil {
			return err
		}
		if handled, err := t.waitOutput(); err != nil {
			return err
		} else if handled {
			continue // a trigger (maybe a stop-with-savepoint) came first
		}
		t.fireDueTimers()
		var st PollStatus
		var at time.Time
		src.call(func() error {
			var err error
			st, at, err = src.src.Poll(src.ctx.Output)
			return err
		})
		switch st {
		case MoreAvailable:
		case NothingAvailable:
			if at.IsZero() {
				at = t.now().Add(time.Millisecond)
			}
			t.wakeup = wakeup
			_, _, err := t.wait(at, nil, nil)
			t.wakeup = nil
			if err != nil {
				return err
			}
		case EndOfInput:
			if t.ck == nil {
				return nil
			}
			t.endData(true)
		default:
			return fmt.Errorf("source %q returned poll status %d", src.spec.Name, st)
		}
		if t.ctl != nil {
			select {
			case m := <-t.ctl:
				t.onControl(m)
			default:
			}
		}
	}
	for !t.ck.finalDone {
		if _, _, err := t.wait(time.Time{}, nil, nil); err != nil {
			return err
		}
	}
	return nil
}

// chanState is one input channel.
type chanState struct {
	wm    int64
	ended bool // EventEndOfPartition arrived
	// The rest is used with checkpointing only.
	dataEnded bool  // EventEndOfData (or EventEndOfPartition) arrived
	barrier   int64 // the ID of the last barrier it delivered
	blocked   bool  // aligning (exactly once): its events are held
	held      [][]Event
	// capturing: an unaligned checkpoint records its input until its
	// barrier, into captured.
	capturing bool
	captured  []byte
}

type gateState struct {
	ch        []chanState
	remaining int // channels not ended
}

// inputState is the input channels of a task with inputs.
type inputState struct {
	gates     []gateState
	remaining int // channels not ended
	dataOpen  int // channels that did not end their data
	drain     bool
	// holding: some channel is blocked or has held events, so a new batch
	// may have to queue behind them; replay: some unblocked channel has
	// held events to process before reading on.
	holding bool
	replay  bool
	// batches and prio are the gates' channels (prio nil when a gate has
	// none); hasPrio: some gate has.
	batches [2]<-chan ChannelBatch
	prio    [2]<-chan ChannelBatch
	hasPrio bool
}

func (t *task) runInputs() error {
	in := &inputState{gates: make([]gateState, len(t.env.Gates)), drain: true}
	t.in = in
	for i, g := range t.env.Gates {
		n := g.NumChannels()
		in.gates[i].ch = make([]chanState, n)
		for c := range in.gates[i].ch {
			in.gates[i].ch[c].wm = MinWatermark
		}
		in.remaining += n
		in.gates[i].remaining = n
	}
	in.dataOpen = in.remaining
	var c0, c1 <-chan ChannelBatch
	c0 = t.env.Gates[0].Batches()
	if len(t.env.Gates) > 1 {
		c1 = t.env.Gates[1].Batches()
	}
	in.batches = [2]<-chan ChannelBatch{c0, c1}
	if t.ck != nil {
		for i, g := range t.env.Gates {
			if pg, ok := g.(PriorityInputGate); ok {
				in.prio[i], in.hasPrio = pg.Priority(), true
			}
		}
	}
	if err := t.replayRestoredInput(); err != nil {
		return err
	}
	for in.remaining > 0 || (t.ck != nil && !t.ck.finalDone) {
		capturing := false
		if t.ck != nil {
			t.checkAlignTimeout()
			if in.hasPrio && t.pollPriority() {
				continue
			}
			capturing = t.ck.capturing > 0
			if !capturing {
				// Take priority barriers and triggers while the output
				// is back-pressured, not inside an Emit.
				if handled, err := t.waitOutput(); err != nil {
					return err
				} else if handled {
					continue
				}
			}
		}
		var b ChannelBatch
		gi := -1
		if capturing {
			// Capture what arrives first, so the checkpoint completes.
			select {
			case b = <-c0:
				gi = 0
			case b = <-c1:
				gi = 1
			default:
			}
		}
		if gi < 0 && in.replay && t.replayHeld() {
			continue
		}
		if gi < 0 {
			t.fireDueTimers()
			c0, c1 := t.selected(in.batches)
			select {
			case b = <-c0:
				gi = 0
			case b = <-c1:
				gi = 1
			case m := <-t.ctl:
				t.onControl(m)
				continue
			default:
				var err error
				if b, gi, err = t.wait(t.alignDeadline(), c0, c1); err != nil {
					return err
				}
				if gi < 0 {
					continue
				}
			}
		}
		g := &in.gates[gi]
		if b.Channel < 0 || b.Channel >= len(g.ch) {
			return fmt.Errorf("task %q: input %d has no channel %d", t.spec.Name, gi, b.Channel)
		}
		ch := &g.ch[b.Channel]
		captured := ch.capturing
		if captured {
			t.capturedBatch(gi, b.Channel, b.Events)
		}
		if capturing || in.holding && (ch.blocked || len(ch.held) > 0) {
			ch.held = append(ch.held, b.Events)
			in.holding = true
			if !ch.blocked {
				in.replay = true
			}
			continue
		}
		kept, err := t.processBatch(gi, b.Channel, b.Events)
		if err != nil {
			return err
		}
		if !kept && !captured {
			if r, ok := t.env.Gates[gi].(RecyclingInputGate); ok {
				r.Recycle(b.Events)
			}
		}
	}
	return nil
}

// BoundedMultiInput is implemented by a head operator that wants to know
// when one of its inputs ended (Flink's BoundedMultiInput): EndInput is
// called on the task's goroutine once every channel of the input ended,
// before the other input's later records and before Finish.
type BoundedMultiInput interface {
	EndInput(input int) error
}

// InputSelectable is implemented by a head operator that reads one input
// before the other (Flink's InputSelectable), as a hash join reads its
// build side first. SelectedInput, called on the task's goroutine before
// each read, returns the input to read exclusively while it has channels
// open, or -1 for any. The task honours it only without checkpointing
// (Batch mode), where exchanges are blocking, so the other input's
// producers never wait for this task.
type InputSelectable interface {
	SelectedInput() int
}

// selected is the task's input channels, the one of an input the head
// operator selected alone.
func (t *task) selected(c [2]<-chan ChannelBatch) (<-chan ChannelBatch, <-chan ChannelBatch) {
	if t.ck != nil {
		return c[0], c[1]
	}
	sel, ok := t.nodes[0].op.(InputSelectable)
	if !ok {
		return c[0], c[1]
	}
	if i := sel.SelectedInput(); i >= 0 && i < len(t.in.gates) && t.in.gates[i].remaining > 0 {
		c[1-i] = nil
	}
	return c[0], c[1]
}

// combined is the minimum watermark of the channels not ended.
func (in *inputState) combined() int64 {
	m := MaxWatermark
	for _, g := range in.gates {
		for c := range g.ch {
			if ch := &g.ch[c]; !ch.ended && ch.wm < m {
				m = ch.wm
			}
		}
	}
	return m
}

// processBatch handles the events of channel c of input gi in order. An
// exactly-once barrier that blocks the channel stops it: the events after
// the barrier are held for later, and kept reports that part of evs is.
func (t *task) processBatch(gi, c int, evs []Event) (kept bool, err error) {
	in := t.in
	head := t.nodes[0]
	ch := &in.gates[gi].ch[c]
	for i := range evs {
		ev := &evs[i]
		if in.hasPrio && in.interrupt(t.ck.capturing > 0) {
			// The rest waits, first in line, for a priority barrier or
			// the capture of arriving batches.
			ch.held = append([][]Event{evs[i:]}, ch.held...)
			in.holding, in.replay = true, true
			return true, nil
		}
		switch ev.Kind {
		case EventRecord:
			head.processInput(gi, ev.Record)
		case EventWatermark:
			if ev.Watermark > ch.wm {
				ch.wm = ev.Watermark
				t.advance(in.combined())
			}
		case EventEndOfPartition:
			if ch.ended {
				return false, fmt.Errorf("task %q: input %d channel %d ended twice", t.spec.Name, gi, c)
			}
			if t.ck != nil && !ch.dataEnded {
				t.endChannelData(ch, true)
			}
			ch.ended = true
			in.remaining--
			g := &in.gates[gi]
			g.remaining--
			if g.remaining == 0 {
				if bi, ok := head.op.(BoundedMultiInput); ok {
					head.call(func() error { return bi.EndInput(gi) })
				}
			}
			if in.remaining > 0 {
				t.advance(in.combined())
			}
			if t.ck != nil {
				t.channelEnded()
			}
		case EventBarrier:
			if t.ck != nil && t.onBarrier(ch, ev.Barrier, false) {
				// Blocked: the rest goes before what is already held (this
				// batch is either new, so nothing is held, or the head of
				// the held queue).
				if i+1 < len(evs) {
					ch.held = append([][]Event{evs[i+1:]}, ch.held...)
					return true, nil
				}
				return false, nil
			}
		case EventCancelBarrier:
			if t.ck != nil {
				t.onCancelBarrier(ev.Barrier.ID)
			}
		case EventEndOfData:
			if t.ck != nil && !ch.dataEnded {
				t.ck.waitFinal = true // the upstream task waits for a final checkpoint
				t.endChannelData(ch, ev.Drain)
			}
		}
	}
	return false, nil
}

// call runs f as operator n, turning an error or panic into an
// *OperatorError that unwinds the task.
func (n *opNode) call(f func() error) {
	prev := n.enter()
	if err := f(); err != nil {
		panic(n.fail(err))
	}
	n.t.current.n = prev
}

// enter makes n the current operator and returns the one to restore. On a
// panic nothing is restored, so protect sees the operator that failed.
func (n *opNode) enter() *opNode {
	prev := n.t.current.n
	n.t.current.n = n
	return prev
}

func (n *opNode) processInput(input int, r Record) {
	prev := n.enter()
	if err := n.op.ProcessElement(input, r); err != nil {
		panic(n.fail(err))
	}
	n.t.current.n = prev
}

// Collect feeds a record from the upstream operator of the chain.
func (n *opNode) Collect(r Record) {
	prev := n.enter()
	if err := n.op.ProcessElement(0, r); err != nil {
		panic(n.fail(err))
	}
	n.t.current.n = prev
}

// ChainedOperator is the next operator of a chain that an output is, for
// producers that know its input type (a source reader emitting every
// record of a job): they call a typed method of Operator with the value
// itself, skipping the Record and the value's boxing, with *Running set to
// Self for the call and put back after, and hand an error it returns to
// Fail, as Collect does around ProcessElement. Fields, not methods, for
// the reason DirectCombiner gives.
type ChainedOperator struct {
	// Operator is the operator; it runs as Self.
	Operator Operator
	Running  *Caller
	Self     Caller
}

// Fail panics with err as the operator's failure, as Collect does when
// ProcessElement returns it; the task ends with it. It never returns.
func (c *ChainedOperator) Fail(err error) { panic(c.Self.n.fail(err)) }

// ChainedOperatorOf returns the operator o feeds when o is the input of
// the next operator of a chain and nothing else (no fan-out, no writer),
// else nil. Producers resolve it once, when they open.
func ChainedOperatorOf(o Output) *ChainedOperator {
	if n, ok := o.(*opNode); ok && n.op != nil {
		return &ChainedOperator{Operator: n.op, Running: &n.t.current, Self: Caller{n}}
	}
	return nil
}

// EmitWatermark feeds a watermark from the upstream operator of the chain.
func (n *opNode) EmitWatermark(wm int64) {
	prev := n.enter()
	if err := n.op.ProcessWatermark(wm); err != nil {
		panic(n.fail(err))
	}
	n.t.current.n = prev
}

func (n *opNode) fail(err error) any {
	var oe *OperatorError
	if errors.As(err, &oe) {
		return oe
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return abort{err}
	}
	return &OperatorError{Task: n.t.spec.Name, Subtask: n.t.env.SubtaskIndex, Operator: n.spec.Name, OperatorID: n.spec.ID, Err: err}
}

// addOutput adds o to the main output (tag "") or to side output tag.
func (n *opNode) addOutput(tag string, o Output) {
	if tag == "" {
		n.outs = append(n.outs, o)
		return
	}
	if n.side == nil {
		n.side = map[string][]Output{}
	}
	if _, ok := n.side[tag]; !ok {
		n.sideTags = append(n.sideTags, tag)
	}
	n.side[tag] = append(n.side[tag], o)
}

func outputOf(outs []Output) Output {
	switch len(outs) {
	case 0:
		return discard{}
	case 1:
		return outs[0]
	}
	return fanout(outs)
}

// watermarkOnly passes only the watermarks of a main output to a side
// output's consumer.
type watermarkOnly struct{ o Output }

func (watermarkOnly) Collect(Record)           {}
func (w watermarkOnly) EmitWatermark(wm int64) { w.o.EmitWatermark(wm) }

// sideOutput passes only the records to a side output's consumer: its
// watermarks come through the main output.
type sideOutput struct{ o Output }

func (s sideOutput) Collect(r Record)  { s.o.Collect(r) }
func (sideOutput) EmitWatermark(int64) {}

type discard struct{}

func (discard) Collect(Record)      {}
func (discard) EmitWatermark(int64) {}

type fanout []Output

func (f fanout) Collect(r Record) {
	for _, o := range f {
		o.Collect(r)
	}
}

func (f fanout) EmitWatermark(wm int64) {
	for _, o := range f {
		o.EmitWatermark(wm)
	}
}

type writerOutput struct {
	w  ResultWriter
	p  Partitioner
	n  int
	wm *WatermarkGauges
}

func (o *writerOutput) emit(s int, ev Event) {
	if err := o.w.Emit(s, ev); err != nil {
		panic(abort{err})
	}
}

func (o *writerOutput) Collect(r Record) {
	s := o.p.Select(r, o.n)
	if s >= 0 {
		o.emit(s, Event{Kind: EventRecord, Record: r})
		return
	}
	for i := 0; i < o.n; i++ {
		o.emit(i, Event{Kind: EventRecord, Record: r})
	}
}

func (o *writerOutput) EmitWatermark(wm int64) {
	o.wm.output.Store(wm)
	for i := 0; i < o.n; i++ {
		o.emit(i, Event{Kind: EventWatermark, Watermark: wm})
	}
}
