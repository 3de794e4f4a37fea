package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// sumCombiner sums ints per key (v mod 3), emitting "key=sum" strings in
// key order, so tests can tell partial results from input records.
type sumCombiner struct {
	sums    map[int]int
	flushes int
}

func (c *sumCombiner) Add(r Record, _ Output) {
	v := r.Value.(int)
	if v < 0 {
		panic("negative")
	}
	c.sums[v%3] += v
}

func (c *sumCombiner) Flush(out Output) {
	c.flushes++
	for k := range 3 {
		if s, ok := c.sums[k]; ok {
			out.Collect(Record{Value: fmt.Sprintf("%d=%d", k, s)})
		}
	}
	clear(c.sums)
}

// wmSource emits vals; a -1 in vals is a watermark of 100 instead.
type wmSource struct {
	vals []int
	done bool
}

func (s *wmSource) Open(*Context) error { return nil }
func (s *wmSource) Close() error        { return nil }
func (s *wmSource) Poll(out Output) (PollStatus, time.Time, error) {
	if s.done {
		return EndOfInput, time.Time{}, nil
	}
	for _, v := range s.vals {
		if v == -1 {
			out.EmitWatermark(100)
			continue
		}
		out.Collect(Record{Value: v})
	}
	s.done = true
	return MoreAvailable, time.Time{}, nil
}

// finishEmitter passes records on and emits 30 when it finishes.
type finishEmitter struct{ Base }

func (o *finishEmitter) ProcessElement(_ int, r Record) error { o.Ctx.Output.Collect(r); return nil }
func (o *finishEmitter) Finish() error                        { o.Ctx.Output.Collect(Record{Value: 30}); return nil }

func combineSpec(vals []int, c *sumCombiner) *TaskSpec {
	return &TaskSpec{
		Name: "combine",
		Operators: []OperatorSpec{
			{ID: "src", Name: "src", Input: -1, NewSource: func() Source { return &wmSource{vals: vals} }},
			{ID: "op", Name: "op", Input: 0, NewOperator: func() Operator { return &finishEmitter{} }},
		},
		Outputs: []OutputSpec{{From: 1, NewPartitioner: func(int) Partitioner { return Forward{} },
			NewCombiner: func() Combiner { return c }, CombinerName: "Combine (sum)"}},
	}
}

func TestCombinerFlushesBeforeWatermarksAndAfterFinish(t *testing.T) {
	c := &sumCombiner{sums: map[int]int{}}
	w := newRecWriter(1)
	err := RunTask(context.Background(), combineSpec([]int{1, 2, 4, 5, 7, -1, 3, 6, 8}, c), TaskEnv{Parallelism: 1, MaxParallelism: 128, Writers: []ResultWriter{w}})
	if err != nil {
		t.Fatal(err)
	}
	// Before the watermark: 1+4+7 (key 1), 2+5 (key 2). After it: 3+6 and
	// the 30 emitted by Finish (key 0), 8 (key 2); the final MaxWatermark
	// flushes what came before Finish, the end of input the rest.
	want := []string{"1=12", "2=7", "wm:100", "0=9", "2=8", "wm:max", "0=30", "end"}
	var got []string
	for _, ev := range w.sub(0) {
		switch ev.Kind {
		case EventRecord:
			got = append(got, ev.Record.Value.(string))
		case EventWatermark:
			if ev.Watermark == MaxWatermark {
				got = append(got, "wm:max")
			} else {
				got = append(got, fmt.Sprintf("wm:%d", ev.Watermark))
			}
		case EventEndOfPartition:
			got = append(got, "end")
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("written %q, want %q", got, want)
	}
	if c.flushes != 3 {
		t.Fatalf("%d flushes, want 3", c.flushes)
	}
}

func TestCombinerUnusedWithCheckpointControl(t *testing.T) {
	c := &sumCombiner{sums: map[int]int{}}
	h := (&harness{t: t, manualOnly: true}).start(combineSpec([]int{1, 2, 4}, c), TaskEnv{}, true)
	if err := h.wait(); err != nil {
		t.Fatal(err)
	}
	var got []any
	for _, ev := range h.out.sub(0) {
		if ev.Kind == EventRecord {
			got = append(got, ev.Record.Value)
		}
	}
	if want := []any{1, 2, 4, 30}; !slices.Equal(got, want) {
		t.Fatalf("written %v, want the records as they were: %v", got, want)
	}
	if c.flushes != 0 {
		t.Fatalf("combiner flushed %d times", c.flushes)
	}
}

func TestCombinerPanicNamesTheCombiner(t *testing.T) {
	c := &sumCombiner{sums: map[int]int{}}
	w := newRecWriter(1)
	err := RunTask(context.Background(), combineSpec([]int{1, -2}, c), TaskEnv{Parallelism: 1, MaxParallelism: 128, Writers: []ResultWriter{w}})
	var oe *OperatorError
	if !errors.As(err, &oe) || oe.Operator != "Combine (sum)" || oe.OperatorID != "op" {
		t.Fatalf("error %v, want an OperatorError of %q", err, "Combine (sum)")
	}
}
