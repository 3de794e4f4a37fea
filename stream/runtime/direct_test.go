package runtime

import (
	"context"
	"errors"
	"testing"
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
