package stream

import (
	"errors"
	"fmt"

	"github.com/gofl/gofl/stream/runtime"
)

// JoinHint picks the strategy of a batch InnerJoin or LeftOuterJoin
// (Flink's JoinHint). Both inputs are partitioned by key either way.
type JoinHint int

const (
	// OptimizerChooses leaves the choice to gofl: sort-merge.
	OptimizerChooses JoinHint = iota
	// RepartitionSortMerge sorts both inputs and merges them.
	RepartitionSortMerge
	// RepartitionHashFirst builds a hybrid hash table of the first input
	// (read entirely first) and probes it with the second: for a first
	// input smaller than the second.
	RepartitionHashFirst
	// RepartitionHashSecond builds the hash table of the second input.
	RepartitionHashSecond
)

// String is the hint's Flink name.
func (h JoinHint) String() string {
	switch h {
	case OptimizerChooses:
		return "OPTIMIZER_CHOOSES"
	case RepartitionSortMerge:
		return "REPARTITION_SORT_MERGE"
	case RepartitionHashFirst:
		return "REPARTITION_HASH_FIRST"
	case RepartitionHashSecond:
		return "REPARTITION_HASH_SECOND"
	}
	return fmt.Sprintf("JoinHint(%d)", int(h))
}

// hashJoinOp is a hybrid hash join (runtime.HybridHashJoin): the task
// reads the build input first (runtime.InputSelectable), so the probe
// input streams through the table once the build side ended. Probe
// records that arrive earlier all the same (an executor that does not
// select inputs) wait in an external sorter, spilled past the budget.
// A left outer join building on its first input reports the build
// entries no probe matched; building on its second, the probe entries.
type hashJoinOp[A, B any, K comparable, O any] struct {
	runtime.Base
	joinCodecs[A, B, K]
	kind       joinKind
	build      int // the input the table is built of
	fns        *joinFns[A, B, K, O]
	join       *runtime.HybridHashJoin
	early      *runtime.ExternalSorter // probe records before the build side ended
	earlyCount runtime.Counter         // numEarlyProbeRecords: how many
	buildEnded bool
	box        boxer[O]
}

func (o *hashJoinOp[A, B, K, O]) Open(ctx *runtime.Context) error {
	o.Ctx = ctx
	if o.kind == coGroup {
		return fmt.Errorf("operator %q: CoGroup has no hash strategy", ctx.OperatorName)
	}
	fns := runtime.HashJoinFuncs{Match: o.match}
	if o.kind == leftOuterJoin {
		if o.build == 1 {
			fns.ProbeUnmatched = o.unmatchedLeft
		} else {
			fns.BuildUnmatched = o.unmatchedLeft
		}
	}
	o.join = runtime.NewHybridHashJoin(ctx.Batch, fmt.Sprintf("hashjoin-%d", ctx.SubtaskIndex), fns)
	return nil
}

// SelectedInput implements runtime.InputSelectable: the build input until
// it ended.
func (o *hashJoinOp[A, B, K, O]) SelectedInput() int {
	if o.buildEnded {
		return -1
	}
	return o.build
}

func (o *hashJoinOp[A, B, K, O]) ProcessElement(input int, r runtime.Record) error {
	k, v := o.encode(input, r)
	switch {
	case input == o.build:
		return o.join.AddBuild(k, v)
	case o.buildEnded:
		return o.join.Probe(k, v)
	default:
		if o.early == nil {
			o.early = runtime.NewExternalSorter(o.Ctx.Batch, fmt.Sprintf("hashjoin-%d-probe", o.Ctx.SubtaskIndex))
			o.earlyCount = o.Ctx.Metrics.Counter("numEarlyProbeRecords")
		}
		o.earlyCount.Inc()
		return o.early.Add(k, v)
	}
}

// EndInput implements runtime.BoundedMultiInput: once the build input
// ended, the table is indexed and the early probe records join it.
func (o *hashJoinOp[A, B, K, O]) EndInput(input int) error {
	if input != o.build || o.buildEnded {
		return nil
	}
	o.buildEnded = true
	o.join.EndBuild()
	if o.early == nil {
		return nil
	}
	it, err := o.early.Sorted()
	if err != nil {
		return fmt.Errorf("operator %q: %w", o.Ctx.OperatorName, err)
	}
	for {
		k, v, ok, err := it.Next()
		if err != nil {
			return fmt.Errorf("operator %q: %w", o.Ctx.OperatorName, err)
		}
		if !ok {
			break
		}
		if err := o.join.Probe(k, v); err != nil {
			return err
		}
	}
	o.Ctx.Metrics.Counter("numSpilledBytes").Add(o.early.Spilled)
	err = o.early.Close()
	o.early = nil
	return err
}

// ProcessWatermark holds watermarks back: results come at the end.
func (o *hashJoinOp[A, B, K, O]) ProcessWatermark(int64) error { return nil }

func (o *hashJoinOp[A, B, K, O]) Finish() error {
	if err := o.EndInput(o.build); err != nil {
		return err
	}
	if err := o.join.Finish(); err != nil {
		return err
	}
	o.Ctx.Metrics.Counter("numSpilledBytes").Add(o.join.Spilled)
	return nil
}

// decode returns the pair's left and right values.
func (o *hashJoinOp[A, B, K, O]) decode(probe, build []byte) (A, B, error) {
	ab, bb := build, probe
	if o.build == 1 {
		ab, bb = probe, build
	}
	a, err := decodeAll(o.ac, ab)
	if err != nil {
		var b B
		return a, b, fmt.Errorf("operator %q: %w", o.Ctx.OperatorName, err)
	}
	b, err := decodeAll(o.bc, bb)
	if err != nil {
		return a, b, fmt.Errorf("operator %q: %w", o.Ctx.OperatorName, err)
	}
	return a, b, nil
}

func (o *hashJoinOp[A, B, K, O]) match(probe, build []byte) error {
	a, b, err := o.decode(probe, build)
	if err != nil {
		return err
	}
	if o.kind == innerJoin {
		o.emit(o.fns.inner(a, b))
	} else {
		o.emit(o.fns.left(a, b, true))
	}
	return nil
}

// unmatchedLeft emits a left record no right record has the key of.
func (o *hashJoinOp[A, B, K, O]) unmatchedLeft(left []byte) error {
	a, err := decodeAll(o.ac, left)
	if err != nil {
		return fmt.Errorf("operator %q: %w", o.Ctx.OperatorName, err)
	}
	var zero B
	o.emit(o.fns.left(a, zero, false))
	return nil
}

func (o *hashJoinOp[A, B, K, O]) emit(v O) {
	o.Ctx.Output.Collect(runtime.Record{Value: o.box.of(v)})
}

// Close frees the managed memory and deletes the spill files.
func (o *hashJoinOp[A, B, K, O]) Close() error {
	var errs []error
	if o.join != nil {
		errs = append(errs, o.join.Close())
	}
	if o.early != nil {
		errs = append(errs, o.early.Close())
	}
	return errors.Join(errs...)
}
