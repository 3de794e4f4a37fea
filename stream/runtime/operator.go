package runtime

import "time"

// Output receives an operator's results: the next operator of the chain (a
// direct call) or the task's result writers. Collect and EmitWatermark do
// not return errors: a failure downstream unwinds the task with a panic that
// RunTask recovers and reports as an *OperatorError, so user code between
// operators never has to check anything.
type Output interface {
	Collect(r Record)
	EmitWatermark(wm int64)
}

// Operator is one stream operator of a chain. All methods are called from
// the task's goroutine, never concurrently.
//
// Lifecycle: Open once; then ProcessElement and ProcessWatermark in input
// order (and processing-time callbacks the operator registered); Finish once
// when all input has ended (after the final MaxWatermark); Close always, also
// after a failure, to release resources.
type Operator interface {
	Open(ctx *Context) error
	// ProcessElement handles one record of the given logical input (0 or 1;
	// chained operators always see input 0).
	ProcessElement(input int, r Record) error
	// ProcessWatermark handles the combined watermark of all inputs, which
	// only increases. The operator must forward it (ctx.Output) after firing
	// what it makes due.
	ProcessWatermark(wm int64) error
	// Finish flushes buffered results at the end of input.
	Finish() error
	Close() error
}

// PollStatus is a Source's answer to Poll.
type PollStatus int

const (
	// MoreAvailable asks for another Poll right away.
	MoreAvailable PollStatus = iota
	// NothingAvailable asks to poll again no earlier than the returned time.
	NothingAvailable
	// EndOfInput ends a bounded source.
	EndOfInput
)

// Source is the head of a source task: a split reader polled by the task's
// goroutine (like Flink's FLIP-27 SourceReader), so processing-time timers
// of chained operators run on the same goroutine without locks.
type Source interface {
	Open(ctx *Context) error
	// Poll emits zero or more records to out. With NothingAvailable, the
	// returned time is when to poll next.
	Poll(out Output) (PollStatus, time.Time, error)
	Close() error
}

// WakingSource is a Source whose NothingAvailable wait can end early
// (Flink's SourceReader.isAvailable): the task also waits on Wakeup's
// channel, which receives when a Poll may find something new, such as
// an event from the operator's coordinator (the first split of a file
// source). Wakeup is called once, after Open, on the task's goroutine.
type WakingSource interface {
	Source
	Wakeup() <-chan struct{}
}

// Base is an Operator with no behaviour of its own: it keeps the Context and
// forwards watermarks. Embed it and override what you need.
type Base struct {
	Ctx *Context
}

// Open keeps the context.
func (b *Base) Open(ctx *Context) error { b.Ctx = ctx; return nil }

// ProcessWatermark forwards the watermark.
func (b *Base) ProcessWatermark(wm int64) error { b.Ctx.Output.EmitWatermark(wm); return nil }

// Finish does nothing.
func (b *Base) Finish() error { return nil }

// Close does nothing.
func (b *Base) Close() error { return nil }

// Context is an operator's view of its task.
type Context struct {
	TaskName       string
	OperatorID     string
	OperatorName   string
	SubtaskIndex   int
	Parallelism    int
	MaxParallelism int
	// Output receives the operator's results.
	Output Output
	// Accumulate, nil when the task runs in the local executor, hands a
	// serialized list to the task's accumulator results under name (Flink's
	// RuntimeContext accumulators): on a cluster they reach the JobMaster
	// with the FINISHED state, which concatenates each name's lists in
	// subtask order into the job's execution result. Call it from Finish;
	// what a failed or cancelled attempt accumulated is discarded.
	Accumulate func(name string, value []byte)
	// Restore is this operator's restored state, nil on a fresh start; set
	// before Open.
	Restore *OperatorRestore
	// Checkpointing is true when the job takes checkpoints: sinks then
	// stage their output and publish it on NotifyCheckpointComplete.
	Checkpointing bool
	// OperatorEvents links the operator with its coordinator (in the
	// JobMaster, or the local executor's); nil when the executor has none.
	OperatorEvents OperatorEventGateway
	// Metrics is the operator's user metric group (see TaskEnv.Metrics).
	Metrics MetricGroup
	// Batch is the slot's managed memory and I/O manager (see
	// TaskEnv.Batch); batch operators that buffer reserve and spill with it
	// and release all of it in Close.
	Batch BatchMemory

	task  *task
	index int
	side  map[string]Output
}

// SideOutput is the output of side output tag (Flink's OutputTag): the
// records collected there reach the operators that read that tag, and
// nothing when none does. Its EmitWatermark does nothing: Output's
// watermarks reach side outputs too. Call it from the operator's methods.
func (c *Context) SideOutput(tag string) Output {
	if o, ok := c.side[tag]; ok {
		return o
	}
	return discard{}
}

// OperatorEventGateway carries an operator's events to and from its
// operator coordinator (Flink's OperatorEventGateway). Both methods are
// called on the task's goroutine and never block.
type OperatorEventGateway interface {
	// SendEventToCoordinator sends an event; events arrive in order and
	// are retried until the coordinator has them (or the attempt is gone).
	SendEventToCoordinator(payload []byte)
	// ReceiveEvents returns the coordinator's events that arrived since
	// the last call, in order. An error means events were lost: the
	// operator must fail.
	ReceiveEvents() ([][]byte, error)
}

// ProcessingTime is the task's clock in milliseconds since the epoch.
func (c *Context) ProcessingTime() int64 { return c.task.now().UnixMilli() }

// RegisterProcessingTimer calls fn on the task's goroutine once the clock
// reaches ts (milliseconds). Timers still pending when the input ends fire
// then, in timestamp order (as Flink does in BATCH mode and on a drain);
// timers registered while that happens are dropped.
func (c *Context) RegisterProcessingTimer(ts int64, fn func(ts int64) error) {
	c.task.timers.push(procTimer{ts: ts, op: c.index, fn: fn})
}
