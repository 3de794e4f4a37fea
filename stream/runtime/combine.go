package runtime

// Combiner pre-aggregates the records an operator sends over a keyed
// exchange, before they are partitioned (the combiner Flink's batch
// runtime chains in front of a grouped reduce): records with equal keys
// are folded into one partial result, so the exchange carries one record
// per key and flush instead of one per input record. The consumer must
// accept partial results as records: a keyed reduce whose function is
// associative, emitting only its final values.
//
// A task uses its combiners only without checkpointing (TaskEnv.Control
// nil: Batch mode), so no barrier or end-of-data event ever has to wait
// for them. Both methods are called on the task's goroutine.
type Combiner interface {
	// Add folds r into the partial result of its key. It may emit partial
	// results to out (to bound the keys it holds).
	Add(r Record, out Output)
	// Flush emits every partial result to out and forgets them.
	Flush(out Output)
}

// ManagedCombiner is a Combiner whose table is bounded by the slot's
// managed memory too (Flink's combiner flushes when its hash table is
// full): the task hands it the slot's memory (SetBatchMemory) before the
// first Add, and calls Close once the task ended, also after a failure,
// so it gives back what it still reserves. Both on the task's goroutine;
// Close is idempotent.
type ManagedCombiner interface {
	Combiner
	SetBatchMemory(m BatchMemory)
	Close()
}

// combiningOutput feeds an output's records through a combiner. Records
// are flushed ahead of every watermark, so none is held past one, and at
// the end of input, after the operators finished.
type combiningOutput struct {
	c    Combiner
	next Output
	// node is the combiner as an operator, for the errors of the user's
	// function it runs.
	node   *opNode
	direct *DirectCombiner
}

func newCombiningOutput(c Combiner, next Output, node *opNode) *combiningOutput {
	o := &combiningOutput{c: c, next: next, node: node}
	o.direct = &DirectCombiner{Combiner: c, Next: next, Running: &node.t.current, Self: Caller{node}}
	return o
}

func (o *combiningOutput) Collect(r Record) {
	prev := o.node.enter()
	o.c.Add(r, o.next)
	o.node.t.current.n = prev
}

func (o *combiningOutput) EmitWatermark(wm int64) {
	o.flush()
	o.next.EmitWatermark(wm)
}

func (o *combiningOutput) flush() {
	prev := o.node.enter()
	o.c.Flush(o.next)
	o.node.t.current.n = prev
}

// DirectCombiner is the combiner an output feeds, for producers that know
// its value type: they call its typed method with the value itself,
// skipping the Record and the value's boxing, with *Running set to Self
// for the call and put back after, so a failure in it is attributed to the
// combiner as Collect's would be. Fields, not methods: the producers are
// generic, and the compiler does not inline calls into their shaped code,
// while this runs once per value.
type DirectCombiner struct {
	// Combiner is the combiner; Next is the output it emits to.
	Combiner Combiner
	Next     Output
	// Running is the task's running operator; Self is the combiner as one.
	Running *Caller
	Self    Caller
}

// DirectCombinerOf returns the combiner o feeds when o is a combiner's
// input, else nil; always the same one for the same o. It is cheap enough
// to call per record.
func DirectCombinerOf(o Output) *DirectCombiner {
	if c, ok := o.(*combiningOutput); ok {
		return c.direct
	}
	return nil
}

// Caller is an operator of a task, as the running one.
type Caller struct{ n *opNode }
