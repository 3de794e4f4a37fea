package stream

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"sync"

	"github.com/gofl/gofl/stream/codec"
	"github.com/gofl/gofl/stream/runtime"
)

// Collected holds the records a Collect sink received in the last
// execution: a local Execute, or ExecuteOn a cluster, where they travel
// back with the job's execution result.
type Collected[T any] struct {
	Sink
	codec    codec.Codec[T]
	codecErr error

	mu     sync.Mutex
	values []T
}

// Values returns the collected records, subtask results in arbitrary
// interleaving locally and in subtask order from a cluster (one subtask's
// records in order).
func (c *Collected[T]) Values() []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]T(nil), c.values...)
}

func (c *Collected[T]) reset() {
	c.mu.Lock()
	c.values = nil
	c.mu.Unlock()
}

func (c *Collected[T]) sink() Sink { return c.Sink }

// canSerialize fails when the records cannot travel back from a cluster.
func (c *Collected[T]) canSerialize() error {
	if c.codecErr != nil {
		return fmt.Errorf("collect sink %q: records of type %s cannot be serialized to return to the client: %w",
			c.n.name, reflect.TypeFor[T](), c.codecErr)
	}
	return nil
}

// fromAccumulator replaces the values with the records of a cluster
// accumulator result (see appendCollected).
func (c *Collected[T]) fromAccumulator(b []byte) error {
	var vs []T
	err := splitCollected(b, func(rec []byte) error {
		v, n, err := c.codec.Decode(rec)
		if err == nil && n != len(rec) {
			err = fmt.Errorf("%w: %d trailing bytes", codec.ErrCorrupt, len(rec)-n)
		}
		vs = append(vs, v)
		return err
	})
	if err != nil {
		return fmt.Errorf("collect sink %q: decoding the records returned by the cluster: %w", c.n.name, err)
	}
	c.mu.Lock()
	c.values = vs
	c.mu.Unlock()
	return nil
}

// collectedSink is what the environment keeps of each Collect sink.
type collectedSink interface {
	reset()
	sink() Sink
	canSerialize() error
	fromAccumulator(b []byte) error
}

// Collect gathers the stream's records in the client process, like Flink's
// executeAndCollect: read them with Values after Execute or ExecuteOn
// returns. For tests and small results: on a cluster every subtask returns
// its records in one message, at most runner.MaxAccumulatorBytes.
func (s DataStream[T]) Collect() *Collected[T] {
	c := &Collected[T]{}
	c.codec, c.codecErr = codec.For[T]()
	c.Sink = addSink(s, "sink-collect", "Collect Sink", func() runtime.Operator {
		return &collectOp[T]{c: c}
	})
	s.env.collects = append(s.env.collects, c)
	return c
}

// collectOp buffers its subtask's records. At the end of input it hands
// them to the Collected directly (local executor), or encoded as an
// accumulator named by its operator ID (cluster).
type collectOp[T any] struct {
	runtime.Base
	c   *Collected[T]
	buf []T
}

func (o *collectOp[T]) ProcessElement(_ int, r runtime.Record) error {
	o.buf = append(o.buf, as[T](r.Value))
	return nil
}

func (o *collectOp[T]) ProcessWatermark(int64) error { return nil }

func (o *collectOp[T]) Finish() error {
	if o.Ctx.Accumulate == nil {
		o.c.mu.Lock()
		o.c.values = append(o.c.values, o.buf...)
		o.c.mu.Unlock()
		return nil
	}
	if err := o.c.canSerialize(); err != nil {
		return err
	}
	var b, rec []byte
	for _, v := range o.buf {
		rec = o.c.codec.Append(rec[:0], v)
		b = append(binary.AppendUvarint(b, uint64(len(rec))), rec...)
	}
	o.Ctx.Accumulate(o.Ctx.OperatorID, b)
	return nil
}

func (o *collectOp[T]) Close() error {
	o.buf = nil
	return nil
}

// A collect accumulator is a list of records, each a uvarint length and
// its codec bytes, so lists of several subtasks concatenate into one.

// splitCollected calls fn with every record of a collect accumulator.
func splitCollected(b []byte, fn func(rec []byte) error) error {
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return fmt.Errorf("%w: bad record length in a collected list", codec.ErrCorrupt)
		}
		if err := fn(b[k : k+int(n)]); err != nil {
			return err
		}
		b = b[k+int(n):]
	}
	return nil
}

// CountCollected returns how many records a collect accumulator result
// holds, or an error when it is not one.
func CountCollected(b []byte) (int, error) {
	n := 0
	err := splitCollected(b, func([]byte) error { n++; return nil })
	return n, err
}

// CollectedValues returns the records that the Collect sink with the uid
// (or else the name) received in env's last execution: how a caller reads
// the results of a job its registered builder built (BuildJob, then
// Execute or ExecuteOn). It fails when no sink or several match, or the
// sink's records are not of type T.
func CollectedValues[T any](env *Environment, uidOrName string) ([]T, error) {
	var match []collectedSink
	for _, by := range []func(*node) string{func(n *node) string { return n.uid }, func(n *node) string { return n.name }} {
		for _, c := range env.collects {
			if by(c.sink().n) == uidOrName {
				match = append(match, c)
			}
		}
		if len(match) > 0 {
			break
		}
	}
	switch len(match) {
	case 0:
		return nil, fmt.Errorf("stream: job %q has no Collect sink with uid or name %q", env.name, uidOrName)
	case 1:
	default:
		return nil, fmt.Errorf("stream: job %q has %d Collect sinks named %q; give them uids", env.name, len(match), uidOrName)
	}
	c, ok := match[0].(*Collected[T])
	if !ok {
		return nil, fmt.Errorf("stream: Collect sink %q is a %T, not a *Collected[%s]", uidOrName, match[0], reflect.TypeFor[T]())
	}
	return c.Values(), nil
}
