package stream

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/gofl/gofl/stream/codec"
	"github.com/gofl/gofl/stream/runtime"
)

// Batch joins and CoGroup (Flink's DataSet join/coGroup on bounded
// inputs): both inputs are partitioned by key, each side is sorted by its
// encoded key in the slot's managed memory (external sort, spilling sorted
// runs to io.tmp.dirs past the budget), and the sorted sides are merged
// once all input ended (a sort-merge join). The records of one key's
// group of the second input are held in memory while that key is joined;
// the first input streams.
//
// Keys compare by their codec encoding: keys must have a derivable codec
// whose encoding is unique per value (not maps; for floats, -0 and +0 and
// NaNs are keys of their own).

// joinKind tells the batch two-input operators apart.
type joinKind int

const (
	innerJoin joinKind = iota
	leftOuterJoin
	coGroup
)

// InnerJoin is a batch inner join of a and b on equal keys (Flink's
// a.join(b).where(keyA).equalTo(keyB).with(fn); the keys are a's and b's
// KeyBy): fn is called for every pair of an a and a b with the same key.
// Its results come once both inputs ended; it needs Batch mode. (Join is
// the windowed join.)
//
// An optional hint picks the strategy (Flink's JoinHint): sort-merge by
// default, or a hybrid hash join building its table on one input.
func InnerJoin[A, B any, K comparable, O any](a KeyedStream[A, K], b KeyedStream[B, K], fn func(A, B) O, hint ...JoinHint) DataStream[O] {
	return batchJoin(a, b, "inner-join", "InnerJoin", innerJoin, &joinFns[A, B, K, O]{inner: fn}, hint)
}

// LeftOuterJoin is a batch left outer join of a and b on equal keys: fn is
// called for every pair of an a and a b with the same key (matched true),
// and once with b's zero value and matched false for an a no b has the key
// of. It needs Batch mode.
// An optional hint picks the strategy, as for InnerJoin.
func LeftOuterJoin[A, B any, K comparable, O any](a KeyedStream[A, K], b KeyedStream[B, K], fn func(a A, b B, matched bool) O, hint ...JoinHint) DataStream[O] {
	return batchJoin(a, b, "left-outer-join", "LeftOuterJoin", leftOuterJoin, &joinFns[A, B, K, O]{left: fn}, hint)
}

// CoGroupFunction gets, per key present in either input, the key and the
// records of each input with that key (one of the slices may be empty),
// and emits any number of results.
type CoGroupFunction[A, B any, K comparable, O any] func(key K, as []A, bs []B, out Collector[O]) error

// CoGroup groups a and b by key (Flink's coGroup): fn is called once per
// key present in either input. Both groups of a key are held in memory
// while fn runs. It needs Batch mode.
func CoGroup[A, B any, K comparable, O any](a KeyedStream[A, K], b KeyedStream[B, K], fn CoGroupFunction[A, B, K, O]) DataStream[O] {
	return batchJoin(a, b, "co-group", "CoGroup", coGroup, &joinFns[A, B, K, O]{group: fn}, nil)
}

type joinFns[A, B any, K comparable, O any] struct {
	inner func(A, B) O
	left  func(A, B, bool) O
	group CoGroupFunction[A, B, K, O]
}

func batchJoin[A, B any, K comparable, O any](a KeyedStream[A, K], b KeyedStream[B, K], kind, name string, jk joinKind, fns *joinFns[A, B, K, O], hints []JoinHint) DataStream[O] {
	env := a.env
	if b.env != env {
		env.fail(fmt.Errorf("%s of streams from different environments", name))
	}
	if env.mode != Batch {
		env.fail(fmt.Errorf("%s needs Batch mode (bounded inputs): its results come when both inputs ended", name))
	}
	if (jk == innerJoin && fns.inner == nil) || (jk == leftOuterJoin && fns.left == nil) || (jk == coGroup && fns.group == nil) {
		env.fail(fmt.Errorf("%s needs a function", name))
	}
	kc, kerr := codec.For[K]()
	ac, aerr := codec.For[A]()
	bc, berr := codec.For[B]()
	if err := errors.Join(kerr, aerr, berr); err != nil {
		env.fail(fmt.Errorf("%s: keys and records are sorted in serialized form, but they have no codec: %w", name, err))
	}
	hint := OptimizerChooses
	if len(hints) > 1 {
		env.fail(fmt.Errorf("%s takes at most one JoinHint, got %d", name, len(hints)))
	} else if len(hints) == 1 {
		hint = hints[0]
	}
	codecs := joinCodecs[A, B, K]{ka: a.key, kb: b.key, kc: kc, ac: ac, bc: bc}
	switch hint {
	case RepartitionHashFirst, RepartitionHashSecond:
		build := 0
		if hint == RepartitionHashSecond {
			build = 1
		}
		return twoInput[A, B, K, O](Connect(a, b), kind, name, func() runtime.Operator {
			return &hashJoinOp[A, B, K, O]{kind: jk, build: build, joinCodecs: codecs, fns: fns}
		})
	case OptimizerChooses, RepartitionSortMerge:
	default:
		env.fail(fmt.Errorf("%s: unknown JoinHint %d", name, hint))
	}
	return twoInput[A, B, K, O](Connect(a, b), kind, name, func() runtime.Operator {
		return &sortMergeJoinOp[A, B, K, O]{kind: jk, joinCodecs: codecs, fns: fns}
	})
}

// sortMergeJoinOp sorts both inputs by encoded key in managed memory and
// merges them in Finish.
type sortMergeJoinOp[A, B any, K comparable, O any] struct {
	runtime.Base
	joinCodecs[A, B, K]
	kind    joinKind
	fns     *joinFns[A, B, K, O]
	sorters [2]*runtime.ExternalSorter
	out     collector[O]
	box     boxer[O]
}

// joinCodecs encodes the keys and records of a batch join's inputs.
type joinCodecs[A, B any, K comparable] struct {
	ka         func(A) K
	kb         func(B) K
	kc         codec.Codec[K]
	ac         codec.Codec[A]
	bc         codec.Codec[B]
	kbuf, vbuf []byte
}

// encode returns the encoded key and record of r from input; the slices
// are valid until the next call.
func (c *joinCodecs[A, B, K]) encode(input int, r runtime.Record) (k, v []byte) {
	if input == 0 {
		a := as[A](r.Value)
		c.kbuf = c.kc.Append(c.kbuf[:0], c.ka(a))
		c.vbuf = c.ac.Append(c.vbuf[:0], a)
	} else {
		b := as[B](r.Value)
		c.kbuf = c.kc.Append(c.kbuf[:0], c.kb(b))
		c.vbuf = c.bc.Append(c.vbuf[:0], b)
	}
	return c.kbuf, c.vbuf
}

func (o *sortMergeJoinOp[A, B, K, O]) Open(ctx *runtime.Context) error {
	o.Ctx = ctx
	for i := range o.sorters {
		o.sorters[i] = runtime.NewExternalSorter(ctx.Batch, fmt.Sprintf("join-%d-%d", ctx.SubtaskIndex, i))
	}
	return nil
}

func (o *sortMergeJoinOp[A, B, K, O]) ProcessElement(input int, r runtime.Record) error {
	return o.sorters[input].Add(o.encode(input, r))
}

// ProcessWatermark holds watermarks back: results come in Finish.
func (o *sortMergeJoinOp[A, B, K, O]) ProcessWatermark(int64) error { return nil }

// cursor is the current pair of a sorted side.
type cursor struct {
	it   runtime.SortedIterator
	k, v []byte
	ok   bool
}

func (c *cursor) next() error {
	k, v, ok, err := c.it.Next()
	c.k, c.v, c.ok = k, v, ok
	return err
}

func (o *sortMergeJoinOp[A, B, K, O]) Finish() error {
	var curs [2]cursor
	for i, s := range o.sorters {
		it, err := s.Sorted()
		if err != nil {
			return fmt.Errorf("operator %q: sorting input %d: %w", o.Ctx.OperatorName, i+1, err)
		}
		spilled := o.Ctx.Metrics.Counter("numSpilledBytes")
		spilled.Add(s.Spilled)
		curs[i] = cursor{it: it}
		if err := curs[i].next(); err != nil {
			return err
		}
	}
	a, b := &curs[0], &curs[1]
	out := o.out.reset(o.Ctx.Output, 0, false)
	var (
		key  []byte
		as_  []A
		bs   []B
		zero B
	)
	for a.ok || b.ok {
		c := 0
		switch {
		case !a.ok:
			c = 1
		case !b.ok:
			c = -1
		default:
			c = bytes.Compare(a.k, b.k)
		}
		if c <= 0 {
			key = append(key[:0], a.k...)
		} else {
			key = append(key[:0], b.k...)
		}
		bs, as_ = bs[:0], as_[:0]
		for c >= 0 && b.ok && bytes.Equal(b.k, key) {
			v, err := decodeAll(o.bc, b.v)
			if err != nil {
				return fmt.Errorf("operator %q: %w", o.Ctx.OperatorName, err)
			}
			bs = append(bs, v)
			if err := b.next(); err != nil {
				return err
			}
		}
		for c <= 0 && a.ok && bytes.Equal(a.k, key) {
			skip := o.kind == innerJoin && len(bs) == 0
			if !skip {
				v, err := decodeAll(o.ac, a.v)
				if err != nil {
					return fmt.Errorf("operator %q: %w", o.Ctx.OperatorName, err)
				}
				switch o.kind {
				case innerJoin:
					for _, w := range bs {
						o.emit(o.fns.inner(v, w))
					}
				case leftOuterJoin:
					if len(bs) == 0 {
						o.emit(o.fns.left(v, zero, false))
					}
					for _, w := range bs {
						o.emit(o.fns.left(v, w, true))
					}
				case coGroup:
					as_ = append(as_, v)
				}
			}
			if err := a.next(); err != nil {
				return err
			}
		}
		if o.kind == coGroup {
			k, err := decodeAll(o.kc, key)
			if err != nil {
				return fmt.Errorf("operator %q: key: %w", o.Ctx.OperatorName, err)
			}
			if err := o.fns.group(k, as_, bs, out); err != nil {
				return err
			}
		}
		clear(bs)
		clear(as_)
	}
	return nil
}

func (o *sortMergeJoinOp[A, B, K, O]) emit(v O) {
	o.Ctx.Output.Collect(runtime.Record{Value: o.box.of(v)})
}

// Close frees the managed memory and deletes the spill files.
func (o *sortMergeJoinOp[A, B, K, O]) Close() error {
	var errs []error
	for _, s := range o.sorters {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}

func decodeAll[T any](c codec.Codec[T], b []byte) (T, error) {
	v, n, err := c.Decode(b)
	if err == nil && n != len(b) {
		err = fmt.Errorf("%w: %d trailing bytes", codec.ErrCorrupt, len(b)-n)
	}
	return v, err
}
