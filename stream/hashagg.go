package stream

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/gofl/gofl/stream/codec"
	"github.com/gofl/gofl/stream/runtime"
)

// aggFuncs is how a batch hash aggregation folds the values of a key.
type aggFuncs[T, ACC, OUT any] struct {
	create func(v T) ACC // the accumulator of a key's first value
	add    func(acc ACC, v T) ACC
	merge  func(a, b ACC) ACC // nil: accumulators do not merge
	result func(acc ACC) OUT
}

func reduceFuncs[T any](fn func(a, b T) T) aggFuncs[T, T, T] {
	return aggFuncs[T, T, T]{create: func(v T) T { return v }, add: fn, merge: fn, result: func(v T) T { return v }}
}

func aggregateFuncs[T, ACC, OUT any](agg AggregateFunction[T, ACC, OUT]) aggFuncs[T, ACC, OUT] {
	f := aggFuncs[T, ACC, OUT]{
		create: func(v T) ACC { return agg.Add(v, agg.CreateAccumulator()) },
		add:    func(acc ACC, v T) ACC { return agg.Add(v, acc) },
		result: agg.GetResult,
	}
	if m, ok := agg.(MergingAggregateFunction[T, ACC, OUT]); ok {
		if a, isAgg := agg.(Aggregator[T, ACC, OUT]); !isAgg || a.MergeFn != nil {
			f.merge = m.Merge
		}
	}
	return f
}

// hashAggEntryOverhead estimates what a key of the table takes besides
// its encoded key and accumulator (map entry, slices).
const hashAggEntryOverhead = 64

// hashAggOp is the final aggregation of a keyed Reduce or Aggregate in
// Batch mode: a hash table of accumulators per key whose size (encoded key
// and accumulator per key, estimated when the key arrives) is reserved in
// the slot's managed memory. When the budget has no room:
//   - accumulators that merge (Reduce; Aggregate with a merge function):
//     the table is written as a sorted run of (key, accumulator) and
//     emptied (Flink's hash aggregation falling back to sort), and Finish
//     merges the runs key by key;
//   - otherwise the table is frozen: keys in it keep aggregating there,
//     records of other keys are sorted externally and aggregated key by
//     key in Finish, after the table's results.
//
// Either way each key's result is exact. Without codecs for the key and
// the accumulator (or the records) it cannot spill and keeps every key in
// memory, unaccounted.
type hashAggOp[T any, K comparable, ACC, OUT any] struct {
	runtime.Base
	key  func(T) K
	f    aggFuncs[T, ACC, OUT]
	kc   codec.Codec[K]
	tc   codec.Codec[T]
	ac   codec.Codec[ACC]
	mode aggSpillMode

	idx    map[K]int
	keys   []K
	accs   []ACC
	held   int64 // reserved from the managed memory
	used   int64 // of held, estimated for the table
	frozen bool
	sorter *runtime.ExternalSorter
	kbuf   []byte
	vbuf   []byte
	box    boxer[OUT]
}

type aggSpillMode int

const (
	aggInMemory aggSpillMode = iota // no codecs: never spills
	aggMerge                        // spills sorted (key, accumulator) runs
	aggFreeze                       // freezes the table, sorts other records
)

func newHashAggOp[T any, K comparable, ACC, OUT any](key func(T) K, f aggFuncs[T, ACC, OUT]) *hashAggOp[T, K, ACC, OUT] {
	o := &hashAggOp[T, K, ACC, OUT]{key: key, f: f}
	kc, kerr := codec.For[K]()
	o.kc = kc
	if kerr != nil {
		return o
	}
	if ac, err := codec.For[ACC](); err == nil && f.merge != nil {
		o.ac, o.mode = ac, aggMerge
	} else if tc, err := codec.For[T](); err == nil {
		o.tc, o.mode = tc, aggFreeze
	}
	return o
}

func (o *hashAggOp[T, K, ACC, OUT]) Open(ctx *runtime.Context) error {
	o.Ctx = ctx
	o.idx = map[K]int{}
	return nil
}

// reserve accounts n more bytes for the table, reserving whole pages; a
// frozen-to-be table leaves an eighth of the budget (at least two pages)
// to the sorter of the records it will not take.
func (o *hashAggOp[T, K, ACC, OUT]) reserve(n int64, force bool) bool {
	if o.used+n <= o.held {
		o.used += n
		return true
	}
	mem := o.Ctx.Batch.Memory
	grow := (o.used + n - o.held + runtime.PageSize - 1) / runtime.PageSize * runtime.PageSize
	if !force && o.mode == aggFreeze && mem.Used()+grow > mem.Size()-max(2*runtime.PageSize, mem.Size()/8) {
		return false
	}
	if !mem.TryReserve(grow) {
		if !force {
			return false
		}
		mem.ForceReserve(grow) // an overdraft for an empty table, to progress
	}
	o.held += grow
	o.used += n
	return true
}

func (o *hashAggOp[T, K, ACC, OUT]) releaseTable() {
	o.Ctx.Batch.Memory.Release(o.held)
	o.held, o.used = 0, 0
	clear(o.idx)
	clear(o.keys)
	clear(o.accs)
	o.keys, o.accs = o.keys[:0], o.accs[:0]
}

func (o *hashAggOp[T, K, ACC, OUT]) ProcessElement(_ int, r runtime.Record) error {
	v := as[T](r.Value)
	k := o.key(v)
	if i, ok := o.idx[k]; ok {
		o.accs[i] = o.f.add(o.accs[i], v)
		return nil
	}
	if o.frozen {
		return o.sortRecord(k, v)
	}
	acc := o.f.create(v)
	if o.mode != aggInMemory {
		o.kbuf = o.kc.Append(o.kbuf[:0], k)
		var n int
		if o.mode == aggMerge {
			o.vbuf = o.ac.Append(o.vbuf[:0], acc)
			n = len(o.vbuf)
		} else {
			o.vbuf = o.tc.Append(o.vbuf[:0], v)
			n = len(o.vbuf)
		}
		size := int64(len(o.kbuf)+n) + hashAggEntryOverhead
		if !o.reserve(size, false) {
			switch {
			case len(o.keys) == 0:
				o.reserve(size, true)
			case o.mode == aggMerge:
				if err := o.spillTable(); err != nil {
					return err
				}
				o.reserve(size, true)
			default:
				o.frozen = true
				return o.sortRecord(k, v)
			}
		}
	}
	o.idx[k] = len(o.keys)
	o.keys = append(o.keys, k)
	o.accs = append(o.accs, acc)
	return nil
}

func (o *hashAggOp[T, K, ACC, OUT]) newSorter() {
	if o.sorter == nil {
		o.sorter = runtime.NewExternalSorter(o.Ctx.Batch, fmt.Sprintf("agg-%d", o.Ctx.SubtaskIndex))
	}
}

// sortRecord hands a record of a key the frozen table does not hold to
// the sorter.
func (o *hashAggOp[T, K, ACC, OUT]) sortRecord(k K, v T) error {
	o.newSorter()
	o.kbuf = o.kc.Append(o.kbuf[:0], k)
	o.vbuf = o.tc.Append(o.vbuf[:0], v)
	return o.sorter.Add(o.kbuf, o.vbuf)
}

// drainTable moves the table's (key, accumulator) pairs to the sorter,
// giving the table's memory to it first.
func (o *hashAggOp[T, K, ACC, OUT]) drainTable() error {
	o.newSorter()
	keys, accs := o.keys, o.accs
	o.Ctx.Batch.Memory.Release(o.held)
	o.held, o.used = 0, 0
	for i := range keys {
		o.kbuf = o.kc.Append(o.kbuf[:0], keys[i])
		o.vbuf = o.ac.Append(o.vbuf[:0], accs[i])
		if err := o.sorter.Add(o.kbuf, o.vbuf); err != nil {
			return err
		}
	}
	o.releaseTable()
	return nil
}

// spillTable writes the table as a sorted run and empties it.
func (o *hashAggOp[T, K, ACC, OUT]) spillTable() error {
	if err := o.drainTable(); err != nil {
		return err
	}
	return o.sorter.Spill()
}

// ProcessWatermark holds watermarks back: results come in Finish.
func (o *hashAggOp[T, K, ACC, OUT]) ProcessWatermark(int64) error { return nil }

func (o *hashAggOp[T, K, ACC, OUT]) emit(acc ACC) {
	o.Ctx.Output.Collect(runtime.Record{Value: o.box.of(o.f.result(acc))})
}

func (o *hashAggOp[T, K, ACC, OUT]) Finish() error {
	if o.sorter == nil || o.mode == aggFreeze {
		for i := range o.accs {
			o.emit(o.accs[i])
		}
		o.releaseTable()
	}
	if o.sorter == nil {
		return nil
	}
	if o.mode == aggMerge {
		if err := o.drainTable(); err != nil {
			return err
		}
	}
	it, err := o.sorter.Sorted()
	if err != nil {
		return fmt.Errorf("operator %q: sorting: %w", o.Ctx.OperatorName, err)
	}
	var (
		cur  []byte
		acc  ACC
		have bool
	)
	for {
		k, v, ok, err := it.Next()
		if err != nil {
			return fmt.Errorf("operator %q: %w", o.Ctx.OperatorName, err)
		}
		if have && (!ok || !bytes.Equal(k, cur)) {
			o.emit(acc)
			have = false
		}
		if !ok {
			break
		}
		if o.mode == aggMerge {
			a, err := decodeAll(o.ac, v)
			if err != nil {
				return fmt.Errorf("operator %q: %w", o.Ctx.OperatorName, err)
			}
			if have {
				acc = o.f.merge(acc, a)
			} else {
				acc = a
			}
		} else {
			t, err := decodeAll(o.tc, v)
			if err != nil {
				return fmt.Errorf("operator %q: %w", o.Ctx.OperatorName, err)
			}
			if have {
				acc = o.f.add(acc, t)
			} else {
				acc = o.f.create(t)
			}
		}
		if !have {
			cur, have = append(cur[:0], k...), true
		}
	}
	o.Ctx.Metrics.Counter("numSpilledBytes").Add(o.sorter.Spilled)
	return nil
}

// Close frees the managed memory and deletes the spill files.
func (o *hashAggOp[T, K, ACC, OUT]) Close() error {
	var errs []error
	if o.Ctx != nil && o.held > 0 {
		o.Ctx.Batch.Memory.Release(o.held)
		o.held = 0
	}
	if o.sorter != nil {
		errs = append(errs, o.sorter.Close())
	}
	return errors.Join(errs...)
}
