package runtime

import (
	"context"
	"testing"
)

type countOp struct {
	Base
	n int64
}

func (o *countOp) ProcessElement(_ int, r Record) error { o.n++; return nil }

// BenchmarkRunTaskInputs measures the input path of a task: one gate of two
// channels fed with batches of 256 records by a producer goroutine, one
// counting operator. One op is one record.
func BenchmarkRunTaskInputs(b *testing.B) {
	b.ReportAllocs()
	const batch = 256
	gate := NewLocalGate(2, 16)
	op := &countOp{}
	spec := &TaskSpec{Name: "bench", NumInputs: 1, Operators: []OperatorSpec{{ID: "c", Name: "count", Input: -1, NewOperator: func() Operator { return op }}}}
	ctx := context.Background()
	evs := make([]Event, batch)
	for i := range evs {
		evs[i] = Event{Kind: EventRecord, Record: Record{Value: int64(i)}}
	}
	go func() {
		sent := 0
		for c := 0; sent < b.N; c ^= 1 {
			n := min(batch, b.N-sent)
			_ = gate.send(ctx, ChannelBatch{Channel: c, Events: evs[:n:n]})
			sent += n
		}
		for c := 0; c < 2; c++ {
			_ = gate.send(ctx, ChannelBatch{Channel: c, Events: []Event{{Kind: EventEndOfPartition}}})
		}
	}()
	b.ResetTimer()
	if err := RunTask(ctx, spec, TaskEnv{Parallelism: 1, MaxParallelism: 128, Gates: []InputGate{gate}}); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if op.n != int64(b.N) {
		b.Fatalf("counted %d of %d", op.n, b.N)
	}
}
