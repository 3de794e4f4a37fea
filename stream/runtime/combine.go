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

// combiningOutput feeds an output's records through a combiner. Records
// are flushed ahead of every watermark, so none is held past one, and at
// the end of input, after the operators finished.
type combiningOutput struct {
	c    Combiner
	next Output
	// node is the combiner as an operator, for the errors of the user's
	// function it runs.
	node *opNode
}

func (o *combiningOutput) Collect(r Record) {
	prev := o.node.enter()
	o.c.Add(r, o.next)
	o.node.t.current = prev
}

func (o *combiningOutput) EmitWatermark(wm int64) {
	o.flush()
	o.next.EmitWatermark(wm)
}

func (o *combiningOutput) flush() {
	prev := o.node.enter()
	o.c.Flush(o.next)
	o.node.t.current = prev
}
