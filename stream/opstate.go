package stream

import (
	"fmt"
	"reflect"

	"github.com/gofl/gofl/stream/codec"
	"github.com/gofl/gofl/stream/runtime"
)

// OperatorStateStore holds a function's operator (non-keyed) state: named
// lists snapshotted with the checkpoint and, on restore, dealt out to the
// new subtasks (Flink's OperatorStateStore). Get the lists in Open.
type OperatorStateStore struct {
	ctx   *runtime.Context
	lists map[string]operatorList
}

type operatorList interface {
	snapshot(snap *runtime.OperatorSnapshot)
}

// ListStateOf returns the operator list state name of s: after a restore at
// another parallelism its elements are split evenly over the subtasks
// (Flink's getListState).
func ListStateOf[T any](s *OperatorStateStore, name string) (*OperatorListState[T], error) {
	return operatorListOf[T](s, name, runtime.SplitList)
}

// UnionListStateOf returns the operator union list state name of s: after a
// restore every subtask gets every element (Flink's getUnionListState).
func UnionListStateOf[T any](s *OperatorStateStore, name string) (*OperatorListState[T], error) {
	return operatorListOf[T](s, name, runtime.UnionList)
}

func operatorListOf[T any](s *OperatorStateStore, name string, mode runtime.ListStateMode) (*OperatorListState[T], error) {
	if l, ok := s.lists[name]; ok {
		if ol, ok := l.(*OperatorListState[T]); ok && ol.mode == mode {
			return ol, nil
		}
		return nil, fmt.Errorf("operator state %q is already declared with another type or mode", name)
	}
	c, err := codec.For[T]()
	if err != nil {
		return nil, fmt.Errorf("operator state %q: %w: %w", name, ErrNoStateCodec, err)
	}
	kind := "ListState"
	if mode == runtime.UnionList {
		kind = "UnionListState"
	}
	l := &OperatorListState[T]{name: "user:" + name, mode: mode, codec: c, typeName: kind + "<" + reflect.TypeFor[T]().String() + ">"}
	if r := s.ctx.Restore; r != nil {
		if err := r.CheckType(l.name, l.typeName); err != nil {
			return nil, err
		}
		for _, b := range r.Lists[l.name] {
			v, n, err := c.Decode(b)
			if err == nil && n != len(b) {
				err = fmt.Errorf("%w: trailing bytes", codec.ErrCorrupt)
			}
			if err != nil {
				return nil, fmt.Errorf("operator state %q: %w", name, err)
			}
			l.items = append(l.items, v)
		}
	}
	if s.lists == nil {
		s.lists = map[string]operatorList{}
	}
	s.lists[name] = l
	return l, nil
}

func (s *OperatorStateStore) snapshot(snap *runtime.OperatorSnapshot) {
	for _, l := range s.lists {
		l.snapshot(snap)
	}
}

// OperatorListState is a list of a subtask's operator state.
type OperatorListState[T any] struct {
	name     string
	mode     runtime.ListStateMode
	codec    codec.Codec[T]
	typeName string
	items    []T
}

// Get returns the elements (the list itself: do not keep it across Update).
func (l *OperatorListState[T]) Get() []T { return l.items }

// Add appends v.
func (l *OperatorListState[T]) Add(v T) { l.items = append(l.items, v) }

// AddAll appends vs.
func (l *OperatorListState[T]) AddAll(vs []T) { l.items = append(l.items, vs...) }

// Update replaces the elements with vs.
func (l *OperatorListState[T]) Update(vs []T) { l.items = append(l.items[:0:0], vs...) }

// Clear removes every element.
func (l *OperatorListState[T]) Clear() { l.items = nil }

func (l *OperatorListState[T]) snapshot(snap *runtime.OperatorSnapshot) {
	els := make([][]byte, len(l.items))
	for i, v := range l.items {
		els[i] = l.codec.Append(nil, v)
	}
	snap.PutList(l.name, l.mode, l.typeName, els)
}

// FunctionContext is what a stateful function sees in Open.
type FunctionContext struct {
	rctx  *runtime.Context
	store *OperatorStateStore
}

// OperatorStateStore is the subtask's operator state.
func (c *FunctionContext) OperatorStateStore() *OperatorStateStore { return c.store }

// IsRestored is true when the subtask starts from a checkpoint.
func (c *FunctionContext) IsRestored() bool { return c.rctx.Restore != nil }

// SubtaskIndex is the index of the running subtask.
func (c *FunctionContext) SubtaskIndex() int { return c.rctx.SubtaskIndex }

// Parallelism is the operator's parallelism.
func (c *FunctionContext) Parallelism() int { return c.rctx.Parallelism }

// CheckpointedProcessFunction is a Process function with operator state
// (Flink's ProcessFunction implementing CheckpointedFunction). One value is
// created per subtask, so it may keep state in fields. All methods run on
// the subtask's goroutine.
type CheckpointedProcessFunction[T, U any] interface {
	// Open declares the operator state (ListStateOf, UnionListStateOf),
	// restored when ctx.IsRestored(), before the first record.
	Open(ctx *FunctionContext) error
	ProcessElement(ctx *ProcessContext, v T, out Collector[U]) error
	// SnapshotState writes what the function keeps in fields into its
	// list states; they are serialized right after it returns.
	SnapshotState(checkpointID int64) error
}

// ProcessWithState runs a function with operator state on every record;
// newFn creates the function of each subtask.
func ProcessWithState[T, U any](s DataStream[T], newFn func() CheckpointedProcessFunction[T, U]) DataStream[U] {
	return oneInput[T, U](s, "process-stateful", "Process", func() runtime.Operator {
		return &statefulProcessOp[T, U]{fn: newFn()}
	})
}

type statefulProcessOp[T, U any] struct {
	runtime.Base
	fn    CheckpointedProcessFunction[T, U]
	store OperatorStateStore
	pctx  ProcessContext
	out   collector[U]
}

func (o *statefulProcessOp[T, U]) Open(ctx *runtime.Context) error {
	o.Ctx = ctx
	o.store = OperatorStateStore{ctx: ctx}
	return o.fn.Open(&FunctionContext{rctx: ctx, store: &o.store})
}

func (o *statefulProcessOp[T, U]) ProcessElement(_ int, r runtime.Record) error {
	out := o.out.reset(o.Ctx.Output, r.Timestamp, r.HasTimestamp)
	o.pctx = ProcessContext{ts: r.Timestamp, hasTs: r.HasTimestamp, rctx: o.Ctx}
	return o.fn.ProcessElement(&o.pctx, as[T](r.Value), out)
}

// SnapshotState lets the function fill its lists, then serializes them.
func (o *statefulProcessOp[T, U]) SnapshotState(id int64, snap *runtime.OperatorSnapshot) error {
	if err := o.fn.SnapshotState(id); err != nil {
		return err
	}
	o.store.snapshot(snap)
	return nil
}
