package stream

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"sync"

	"github.com/gofl/gofl/failure"
	"github.com/gofl/gofl/stream/codec"
	"github.com/gofl/gofl/stream/runtime"
	"github.com/gofl/gofl/taskmanager/runner"
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
// accumulator result (see splitCollected).
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

// collectOp gathers its subtask's records. In the local executor it hands
// them to the Collected at the end of input. On a cluster it encodes each
// record as it comes (failing as soon as the subtask's list would exceed
// what a task may return, rather than holding records it cannot send) and
// hands the list over as the accumulator named by its operator ID.
type collectOp[T any] struct {
	runtime.Base
	c        *Collected[T]
	buf      []T    // local
	enc, rec []byte // cluster
}

func (o *collectOp[T]) Open(ctx *runtime.Context) error {
	o.Ctx = ctx
	if ctx.Accumulate != nil || ctx.Checkpointing || ctx.Restore != nil {
		if err := o.c.canSerialize(); err != nil {
			return failure.NonRecoverable(err)
		}
	}
	if ctx.Restore == nil {
		return nil
	}
	if err := ctx.Restore.CheckType(collectState, collectType); err != nil {
		return err
	}
	for _, el := range ctx.Restore.Lists[collectState] {
		if ctx.Accumulate != nil {
			o.enc = append(o.enc, el...)
			continue
		}
		err := splitCollected(el, func(rec []byte) error {
			v, _, err := o.c.codec.Decode(rec)
			o.buf = append(o.buf, v)
			return err
		})
		if err != nil {
			return fmt.Errorf("collect sink %q: restoring its records: %w", o.c.n.name, err)
		}
	}
	return nil
}

const (
	collectState = "collected"
	collectType  = "CollectedRecords"
)

// SnapshotState stores the records gathered so far (one element: a
// collect accumulator list, so restored lists concatenate), so a restored
// subtask returns them too.
func (o *collectOp[T]) SnapshotState(_ int64, snap *runtime.OperatorSnapshot) error {
	if err := o.c.canSerialize(); err != nil {
		return err
	}
	el := o.enc
	if o.Ctx.Accumulate == nil {
		el = nil
		for _, v := range o.buf {
			o.rec = o.c.codec.Append(o.rec[:0], v)
			el = append(binary.AppendUvarint(el, uint64(len(o.rec))), o.rec...)
		}
	}
	snap.PutList(collectState, runtime.SplitList, collectType, [][]byte{append([]byte(nil), el...)})
	return nil
}

func (o *collectOp[T]) ProcessElement(_ int, r runtime.Record) error {
	v := as[T](r.Value)
	if o.Ctx.Accumulate == nil {
		o.buf = append(o.buf, v)
		return nil
	}
	o.rec = o.c.codec.Append(o.rec[:0], v)
	o.enc = append(binary.AppendUvarint(o.enc, uint64(len(o.rec))), o.rec...)
	if len(o.enc) > runner.MaxAccumulatorBytes {
		return failure.NonRecoverable(fmt.Errorf("%w: collect sink %q holds more than the %d bytes a task may return to the client; write large results with a file sink instead of Collect",
			runner.ErrAccumulatorsTooLarge, o.c.n.name, runner.MaxAccumulatorBytes))
	}
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
	o.Ctx.Accumulate(o.Ctx.OperatorID, o.enc)
	return nil
}

func (o *collectOp[T]) Close() error {
	o.buf, o.enc = nil, nil
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
