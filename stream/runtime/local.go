package runtime

import (
	"context"
	"sync"
)

// LocalGate is an InputGate fed in-process through a bounded Go channel:
// the local stand-in for the network's input gate.
type LocalGate struct {
	n int
	c chan ChannelBatch
}

// NewLocalGate returns a gate of numChannels channels that buffers up to
// capacity batches before senders block (backpressure).
func NewLocalGate(numChannels, capacity int) *LocalGate {
	return &LocalGate{n: numChannels, c: make(chan ChannelBatch, capacity)}
}

// NumChannels implements InputGate.
func (g *LocalGate) NumChannels() int { return g.n }

// Batches implements InputGate.
func (g *LocalGate) Batches() <-chan ChannelBatch { return g.c }

func (g *LocalGate) send(ctx context.Context, b ChannelBatch) error {
	select {
	case g.c <- b:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// LocalTarget is where one subpartition of a local result goes: a gate and
// the channel index the producer has there.
type LocalTarget struct {
	Gate    *LocalGate
	Channel int
}

// LocalWriter is a pipelined ResultWriter into local gates. Events are
// batched per subpartition and handed on when a batch is full, on Flush
// (the task flushes whenever it would otherwise wait) and on Finish.
type LocalWriter struct {
	ctx       context.Context
	targets   []LocalTarget
	buf       [][]Event
	batchSize int
}

// NewLocalWriter returns a writer whose subpartition i goes to targets[i].
func NewLocalWriter(ctx context.Context, targets []LocalTarget, batchSize int) *LocalWriter {
	if batchSize < 1 {
		batchSize = 1
	}
	return &LocalWriter{ctx: ctx, targets: targets, buf: make([][]Event, len(targets)), batchSize: batchSize}
}

// NumSubpartitions implements ResultWriter.
func (w *LocalWriter) NumSubpartitions() int { return len(w.targets) }

// Emit implements ResultWriter.
func (w *LocalWriter) Emit(s int, ev Event) error {
	if w.buf[s] == nil {
		w.buf[s] = make([]Event, 0, w.batchSize)
	}
	w.buf[s] = append(w.buf[s], ev)
	if len(w.buf[s]) >= w.batchSize {
		return w.send(s)
	}
	return nil
}

func (w *LocalWriter) send(s int) error {
	b := w.buf[s]
	w.buf[s] = nil
	t := w.targets[s]
	return t.Gate.send(w.ctx, ChannelBatch{Channel: t.Channel, Events: b})
}

// Flush implements ResultWriter.
func (w *LocalWriter) Flush() error {
	for s := range w.buf {
		if len(w.buf[s]) > 0 {
			if err := w.send(s); err != nil {
				return err
			}
		}
	}
	return nil
}

// Finish implements ResultWriter.
func (w *LocalWriter) Finish() error {
	for s := range w.buf {
		w.buf[s] = append(w.buf[s], Event{Kind: EventEndOfPartition})
		if err := w.send(s); err != nil {
			return err
		}
	}
	return nil
}

// BlockingResult is a local BLOCKING result: producers write everything
// into memory, and consumers see nothing until every producer finished, as
// with Flink's blocking partitions (which spill to disk instead).
type BlockingResult struct {
	mu        sync.Mutex
	data      [][][][]Event // [producer][subpartition] chunks of blockingChunk events
	remaining int
	done      chan struct{}
}

// blockingChunk is how many events one chunk of a subpartition holds:
// appending to fixed chunks never copies what is written, so a result
// takes its size, not up to twice that while a slice grows.
const blockingChunk = 4096

// NewBlockingResult returns a result of producers × subpartitions.
func NewBlockingResult(producers, subpartitions int) *BlockingResult {
	r := &BlockingResult{data: make([][][][]Event, producers), remaining: producers, done: make(chan struct{})}
	for p := range r.data {
		r.data[p] = make([][][]Event, subpartitions)
	}
	return r
}

// Writer is the ResultWriter of one producer subtask.
func (r *BlockingResult) Writer(producer int) ResultWriter {
	return &blockingWriter{r: r, p: producer}
}

// Serve feeds subpartition sub to gate once all producers finished, the
// producer p's events on channel base+p, then returns. It returns early
// with ctx's error. What it handed on is released.
func (r *BlockingResult) Serve(ctx context.Context, sub int, gate *LocalGate, base, batchSize int) error {
	select {
	case <-r.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	for p := range r.data {
		r.mu.Lock()
		chunks := r.data[p][sub]
		r.data[p][sub] = nil
		r.mu.Unlock()
		for i, evs := range chunks {
			chunks[i] = nil
			for len(evs) > 0 {
				n := min(batchSize, len(evs))
				if err := gate.send(ctx, ChannelBatch{Channel: base + p, Events: evs[:n:n]}); err != nil {
					return err
				}
				evs = evs[n:]
			}
		}
	}
	return nil
}

type blockingWriter struct {
	r *BlockingResult
	p int
}

func (w *blockingWriter) NumSubpartitions() int { return len(w.r.data[w.p]) }

func (w *blockingWriter) Emit(s int, ev Event) error {
	chunks := w.r.data[w.p][s]
	if n := len(chunks); n == 0 || len(chunks[n-1]) == blockingChunk {
		chunks = append(chunks, make([]Event, 0, blockingChunk))
		w.r.data[w.p][s] = chunks
	}
	last := &chunks[len(chunks)-1]
	*last = append(*last, ev)
	return nil
}

func (w *blockingWriter) Flush() error { return nil }

func (w *blockingWriter) Finish() error {
	w.r.mu.Lock()
	defer w.r.mu.Unlock()
	for s := range w.r.data[w.p] {
		w.r.data[w.p][s] = append(w.r.data[w.p][s], []Event{{Kind: EventEndOfPartition}})
	}
	w.r.remaining--
	if w.r.remaining == 0 {
		close(w.r.done)
	}
	return nil
}
