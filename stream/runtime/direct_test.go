package runtime

import (
	"context"
	"errors"
	"testing"
	"time"
)

// directSpec is combineSpec whose operator hands its values straight to
// the combiner (DirectCombinerOf) instead of collecting records.
func directSpec(vals []int, c *sumCombiner) *TaskSpec {
	spec := combineSpec(vals, c)
	spec.Operators[1].NewOperator = func() Operator { return &directEmitter{} }
	return spec
}

type directEmitter struct{ Base }

func (o *directEmitter) ProcessElement(_ int, r Record) error {
	d := DirectCombinerOf(o.Ctx.Output)
	if d == nil || d != DirectCombinerOf(o.Ctx.Output) {
		return errors.New("no stable direct combiner")
	}
	prev := *d.Running
	*d.Running = d.Self
	d.Combiner.Add(r, d.Next)
	*d.Running = prev
	return nil
}

func TestDirectCombinerFeedsTheCombinerAndNamesIt(t *testing.T) {
	c := &sumCombiner{sums: map[int]int{}}
	w := newRecWriter(1)
	if err := RunTask(context.Background(), directSpec([]int{1, 4, 2}, c), TaskEnv{Parallelism: 1, MaxParallelism: 128, Writers: []ResultWriter{w}}); err != nil {
		t.Fatal(err)
	}
	var got []any
	for _, ev := range w.sub(0) {
		if ev.Kind == EventRecord {
			got = append(got, ev.Record.Value)
		}
	}
	if len(got) != 2 || got[0] != "1=5" || got[1] != "2=2" {
		t.Fatalf("written %v, want [1=5 2=2]", got)
	}
	c = &sumCombiner{sums: map[int]int{}}
	err := RunTask(context.Background(), directSpec([]int{1, -2}, c), TaskEnv{Parallelism: 1, MaxParallelism: 128, Writers: []ResultWriter{newRecWriter(1)}})
	var oe *OperatorError
	if !errors.As(err, &oe) || oe.Operator != "Combine (sum)" {
		t.Fatalf("error %v, want an OperatorError of %q", err, "Combine (sum)")
	}
	if DirectCombinerOf(discard{}) != nil {
		t.Fatal("a plain output has a direct combiner")
	}
}

// chainedSource hands its values to the next operator of the chain through
// its typed method (ChainedOperatorOf), not as records.
type chainedSource struct {
	vals []int
	done bool
}

func (s *chainedSource) Open(*Context) error { return nil }
func (s *chainedSource) Close() error        { return nil }
func (s *chainedSource) Poll(out Output) (PollStatus, time.Time, error) {
	if s.done {
		return EndOfInput, time.Time{}, nil
	}
	d := ChainedOperatorOf(out)
	if d == nil {
		return 0, time.Time{}, errors.New("no chained operator")
	}
	next := d.Operator.(*intOperator)
	for _, v := range s.vals {
		prev := *d.Running
		*d.Running = d.Self
		if err := next.processInt(v); err != nil {
			d.Fail(err)
		}
		*d.Running = prev
	}
	s.done = true
	return MoreAvailable, time.Time{}, nil
}

// intOperator doubles ints; a negative one fails it.
type intOperator struct{ Base }

func (o *intOperator) ProcessElement(_ int, r Record) error { return o.processInt(r.Value.(int)) }

func (o *intOperator) processInt(v int) error {
	if v < 0 {
		return errors.New("negative")
	}
	o.Ctx.Output.Collect(Record{Value: 2 * v})
	return nil
}

func TestChainedOperatorTakesValuesAndIsNamedInFailures(t *testing.T) {
	spec := func(vals []int) *TaskSpec {
		return &TaskSpec{
			Name: "chained",
			Operators: []OperatorSpec{
				{ID: "src", Name: "src", Input: -1, NewSource: func() Source { return &chainedSource{vals: vals} }},
				{ID: "op", Name: "double", Input: 0, NewOperator: func() Operator { return &intOperator{} }},
			},
			Outputs: []OutputSpec{{From: 1, NewPartitioner: func(int) Partitioner { return Forward{} }}},
		}
	}
	w := newRecWriter(1)
	if err := RunTask(context.Background(), spec([]int{1, 2, 3}), TaskEnv{Parallelism: 1, MaxParallelism: 128, Writers: []ResultWriter{w}}); err != nil {
		t.Fatal(err)
	}
	var got []any
	for _, ev := range w.sub(0) {
		if ev.Kind == EventRecord {
			got = append(got, ev.Record.Value)
		}
	}
	if len(got) != 3 || got[0] != 2 || got[1] != 4 || got[2] != 6 {
		t.Fatalf("written %v, want [2 4 6]", got)
	}
	err := RunTask(context.Background(), spec([]int{1, -1}), TaskEnv{Parallelism: 1, MaxParallelism: 128, Writers: []ResultWriter{newRecWriter(1)}})
	var oe *OperatorError
	if !errors.As(err, &oe) || oe.Operator != "double" {
		t.Fatalf("error %v, want an OperatorError of %q", err, "double")
	}
	if ChainedOperatorOf(discard{}) != nil || ChainedOperatorOf(fanout{discard{}, discard{}}) != nil {
		t.Fatal("an output that is no chained operator has one")
	}
}
