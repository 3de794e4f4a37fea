package stream

import (
	"fmt"
	"sync"
	"testing"

	"github.com/gofl/gofl/stream/runtime"
)

// batcher emits its records in groups of four, buffering the rest in SPLIT
// operator state, and counts records over all subtasks in UNION state.
type batcher struct {
	buf     *OperatorListState[string]
	counts  *OperatorListState[int]
	pending []string
	seen    int
	before  int
	sub     int
}

func (b *batcher) Open(ctx *FunctionContext) error {
	var err error
	if b.buf, err = ListStateOf[string](ctx.OperatorStateStore(), "buffer"); err != nil {
		return err
	}
	if b.counts, err = UnionListStateOf[int](ctx.OperatorStateStore(), "counts"); err != nil {
		return err
	}
	b.pending = append(b.pending, b.buf.Get()...)
	for _, c := range b.counts.Get() {
		b.before += c
	}
	b.sub = ctx.SubtaskIndex()
	return nil
}

func (b *batcher) ProcessElement(ctx *ProcessContext, v kv, out Collector[string]) error {
	b.seen++
	b.pending = append(b.pending, fmt.Sprint(v.V))
	if len(b.pending) == 4 {
		out.Collect(fmt.Sprint(b.pending))
		b.pending = nil
	}
	return nil
}

func (b *batcher) SnapshotState(int64) error {
	b.buf.Update(b.pending)
	// Only the count: UNION state gives every subtask every subtask's.
	b.counts.Update([]int{b.before*boolInt(b.sub == 0) + b.seen})
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Operator list state: the buffered records are split over the new
// subtasks, none lost or doubled; union state reaches every subtask.
func TestCheckpointOperatorListState(t *testing.T) {
	for _, p := range [][2]int{{1, 1}, {4, 2}, {4, 6}} {
		env := NewEnvironment()
		var mu sync.Mutex
		var fns []*batcher
		op := ProcessWithState(FromElements(env, kv{}), func() CheckpointedProcessFunction[kv, string] {
			b := &batcher{}
			mu.Lock()
			fns = append(fns, b)
			mu.Unlock()
			return b
		}).n.newOperator
		// 30 records: each subtask's leftovers are buffered at the
		// checkpoint.
		out1, snaps := runSteps(t, op, 1, p[0], 128, nil, kvSteps(0, 30), 0, 1)
		mu.Lock()
		fns = nil
		mu.Unlock()
		out2, _ := runSteps(t, op, 1, p[1], 128, redistribute(snaps, p[1], 128), kvSteps(30, 30), 0, 1)
		var emitted int
		for _, r := range append(out1, out2...) {
			var a, b, c, d int
			if _, err := fmt.Sscanf(r.Value.(string), "[%d %d %d %d]", &a, &b, &c, &d); err != nil {
				t.Fatal(err)
			}
			emitted += 4
		}
		var buffered int
		mu.Lock()
		got := append([]*batcher(nil), fns...)
		mu.Unlock()
		if len(got) != p[1] {
			t.Fatalf("%d restored subtasks, want %d", len(got), p[1])
		}
		for _, f := range got {
			buffered += len(f.pending)
			if f.before != 30 {
				t.Fatalf("p%d -> p%d: union state gave subtask %d a count of %d, want 30", p[0], p[1], f.sub, f.before)
			}
		}
		if emitted+buffered != 30 {
			t.Fatalf("p%d -> p%d: %d records emitted and %d buffered, want 30", p[0], p[1], emitted, buffered)
		}
	}
}

type rule struct {
	Name string
	Mul  int
}

// Broadcast state: written by the broadcast side, read by the keyed side,
// restored to every subtask at any parallelism.
func TestCheckpointBroadcastState(t *testing.T) {
	env := NewEnvironment()
	desc := NewMapStateDescriptor[string, int]("rules")
	rules := BroadcastWithState(FromElements(env, rule{}), desc)
	total := NewValueState[int]("total")
	keyedOp := opOf(ConnectKeyedBroadcast(KeyBy(FromElements(env, kv{}), func(x kv) string { return x.K }), rules,
		KeyedBroadcastProcessFunction[string, kv, rule, string, int, string]{
			ProcessElement: func(ctx *KeyedContext[string], st ReadOnlyBroadcastState[string, int], v kv, out Collector[string]) error {
				n, _ := total.Value(ctx)
				for name, mul := range st.Entries() {
					n += mul * v.V
					_ = name
				}
				total.Update(ctx, n)
				out.Collect(fmt.Sprintf("%s=%d", v.K, n))
				return nil
			},
			ProcessBroadcastElement: func(ctx *ProcessContext, st *BroadcastState[string, int], r rule, out Collector[string]) error {
				if r.Mul == 0 {
					st.Remove(r.Name)
				} else {
					st.Put(r.Name, r.Mul)
				}
				return nil
			},
		}))
	plainOp := opOf(ConnectBroadcast(FromElements(env, kv{}), rules,
		BroadcastProcessFunction[kv, rule, string, int, string]{
			ProcessElement: func(ctx *ProcessContext, st ReadOnlyBroadcastState[string, int], v kv, out Collector[string]) error {
				m, _ := st.Get("double")
				out.Collect(fmt.Sprintf("%s:%d", v.K, v.V*m))
				return nil
			},
			ProcessBroadcastElement: func(ctx *ProcessContext, st *BroadcastState[string, int], r rule, out Collector[string]) error {
				st.Put(r.Name, r.Mul)
				return nil
			},
		}))
	bc := func(r rule) step { return step{input: 1, v: r, all: true} }
	first := []step{bc(rule{"double", 2}), bc(rule{"triple", 3})}
	first = append(first, kvSteps(0, 20)...)
	first = append(first, bc(rule{"triple", 0}))
	second := kvSteps(20, 40)
	for name, op := range map[string]func() runtime.Operator{"keyed": keyedOp, "plain": plainOp} {
		t.Run(name, func(t *testing.T) {
			forEachRescale(t, func(t *testing.T, p1, p2 int) {
				checkRestore(t, op, 2, first, second, p1, p2)
			})
		})
	}
}
