package stream_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/gofl/gofl/stream"
)

// lifecycleLog records the Open and Close calls of every subtask.
type lifecycleLog struct {
	mu     sync.Mutex
	events []string
}

func (l *lifecycleLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, s)
}

func (l *lifecycleLog) sorted() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]string(nil), l.events...)
	sort.Strings(out)
	return out
}

type richScaler struct {
	log     *lifecycleLog
	factor  int
	sub     int
	counter stream.Counter
}

func (f *richScaler) Open(ctx *stream.RuntimeContext) error {
	f.sub = ctx.SubtaskIndex()
	f.factor = 10 * ctx.Parallelism()
	f.counter = ctx.MetricGroup().Counter("scaled")
	ctx.MetricGroup().AddGroup("sizes").Histogram("v").Update(1)
	f.log.add(fmt.Sprintf("open %d/%d", ctx.SubtaskIndex(), ctx.Parallelism()))
	return nil
}

func (f *richScaler) Close() error {
	f.log.add(fmt.Sprintf("close %d", f.sub))
	return nil
}

func (f *richScaler) Map(v int) (int, error) {
	if f.factor == 0 {
		return 0, errors.New("Map before Open")
	}
	f.counter.Inc()
	return v * f.factor, nil
}

type tagger struct{ odd stream.OutputTag[int] }

func (t tagger) ProcessElement(ctx *stream.ProcessContext, v int, out stream.Collector[string]) error {
	if v%20 != 0 {
		stream.Output(ctx, t.odd, v)
		return nil
	}
	out.Collect(fmt.Sprint(v))
	return nil
}

// Rich functions are opened before their first record with the subtask's
// runtime context and closed after the last; their user metrics reach the
// environment's metric group.
func TestRichFunctionsLifecycleAndMetrics(t *testing.T) {
	const p = 3
	log := &lifecycleLog{}
	metrics := stream.NewLocalMetrics()
	env := stream.NewEnvironment(stream.WithParallelism(p), stream.WithMetrics(metrics))
	var in []int
	for i := 1; i <= 60; i++ {
		in = append(in, i)
	}
	scaled := stream.MapWith(stream.FromCollection(env, in).Rebalance(), func() stream.MapFunction[int, int] { return &richScaler{log: log} }).Name("Scale")
	odd := stream.NewOutputTag[int]("odd")
	main := stream.ProcessWith(scaled, func() stream.ProcessFunction[int, string] { return tagger{odd} })
	kept := main.Collect()
	side := stream.GetSideOutput(main, odd).Collect()
	keyedLog := &lifecycleLog{}
	stream.KeyedProcess(stream.KeyBy(scaled, func(v int) int { return v % 7 }), stream.KeyedProcessFunction[int, int, int]{
		Open: func(ctx *stream.RuntimeContext) error {
			keyedLog.add(fmt.Sprintf("open %d", ctx.SubtaskIndex()))
			return nil
		},
		ProcessElement: func(ctx *stream.KeyedContext[int], v int, out stream.Collector[int]) error {
			ctx.MetricGroup().Counter("keyed").Inc()
			return nil
		},
		Close: func() error { keyedLog.add("close"); return nil },
	}).Name("Keyed")
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	var wantLog []string
	for i := 0; i < p; i++ {
		wantLog = append(wantLog, fmt.Sprintf("close %d", i), fmt.Sprintf("open %d/%d", i, p))
	}
	sort.Strings(wantLog)
	if got := log.sorted(); !reflect.DeepEqual(got, wantLog) {
		t.Fatalf("lifecycle %v, want %v", got, wantLog)
	}
	if got := keyedLog.sorted(); len(got) != 2*p || got[0] != "close" || got[p] != "open 0" {
		t.Fatalf("keyed lifecycle %v", got)
	}
	var wantKept []string
	var wantSide []int
	for _, v := range in {
		if v*30%20 == 0 {
			wantKept = append(wantKept, fmt.Sprint(v*30))
		} else {
			wantSide = append(wantSide, v*30)
		}
	}
	gotKept, gotSide := kept.Values(), side.Values()
	sort.Strings(gotKept)
	sort.Strings(wantKept)
	sort.Ints(gotSide)
	if !reflect.DeepEqual(gotKept, wantKept) || !reflect.DeepEqual(gotSide, wantSide) {
		t.Fatalf("main %v side %v, want %v and %v", gotKept, gotSide, wantKept, wantSide)
	}
	snap := metrics.Snapshot()
	var scaledCount, keyedCount, hist float64
	for name, v := range snap {
		switch {
		case strings.HasSuffix(name, ".Scale.scaled"):
			scaledCount += v
		case strings.HasSuffix(name, ".Keyed.keyed"):
			keyedCount += v
		case strings.HasSuffix(name, ".Scale.sizes.v.count"):
			hist += v
		}
	}
	if scaledCount != 60 || keyedCount != 60 || hist != p {
		t.Fatalf("metrics: scaled %v keyed %v histogram count %v (want 60, 60, %d); all: %v", scaledCount, keyedCount, hist, p, snap)
	}
}
