package runtime

import (
	"context"
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
