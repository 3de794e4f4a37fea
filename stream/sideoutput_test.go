package stream_test

import (
	"context"
	"reflect"
	"sort"
	"testing"

	"github.com/gofl/gofl/stream"
)

// Odd numbers go to a side output as strings, even ones to the main
// output; the side output is consumed chained and over a keyed exchange.
func TestSideOutputOfProcess(t *testing.T) {
	odd := stream.NewOutputTag[string]("odd")
	for _, p := range []int{1, 3} {
		env := stream.NewEnvironment(stream.WithParallelism(p))
		var in []int
		for i := 0; i < 100; i++ {
			in = append(in, i)
		}
		main := stream.Process(stream.FromCollection(env, in), func(ctx *stream.ProcessContext, v int, out stream.Collector[int]) error {
			if v%2 == 1 {
				stream.Output(ctx, odd, string(rune('a'+v%26)))
				return nil
			}
			out.Collect(v)
			return nil
		})
		side := stream.GetSideOutput(main, odd)
		evens := main.Collect()
		chained := side.Collect()
		counts := stream.KeyBy(side, func(s string) string { return s }).
			Reduce(func(a, b string) string { return a + b[:1] })
		keyed := counts.Collect()
		if _, err := env.Execute(context.Background()); err != nil {
			t.Fatal(err)
		}
		var wantEven []int
		wantOdd := map[string]int{}
		for _, v := range in {
			if v%2 == 0 {
				wantEven = append(wantEven, v)
			} else {
				wantOdd[string(rune('a'+v%26))]++
			}
		}
		gotEven := evens.Values()
		sort.Ints(gotEven)
		if !reflect.DeepEqual(gotEven, wantEven) {
			t.Fatalf("p=%d: main output %v, want %v", p, gotEven, wantEven)
		}
		gotOdd := map[string]int{}
		for _, s := range chained.Values() {
			gotOdd[s]++
		}
		if !reflect.DeepEqual(gotOdd, wantOdd) {
			t.Fatalf("p=%d: side output %v, want %v", p, gotOdd, wantOdd)
		}
		final := map[string]int{}
		for _, s := range keyed.Values() {
			if len(s) > final[s[:1]] {
				final[s[:1]] = len(s)
			}
		}
		if !reflect.DeepEqual(final, wantOdd) {
			t.Fatalf("p=%d: keyed side output %v, want %v", p, final, wantOdd)
		}
	}
}
