package stream_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode"

	"go.uber.org/goleak"

	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/stream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func words(line string) []string {
	return strings.FieldsFunc(strings.ToLower(line), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

type wc struct {
	Word  string
	Count int
}

func wordCount(lines stream.DataStream[string]) *stream.Collected[wc] {
	ws := stream.FlatMap(lines, func(l string, out stream.Collector[wc]) error {
		for _, w := range words(l) {
			out.Collect(wc{w, 1})
		}
		return nil
	}).Name("Tokenizer")
	counts := stream.KeyBy(ws, func(w wc) string { return w.Word }).Reduce(func(a, b wc) wc { return wc{a.Word, a.Count + b.Count} }).Name("Sum")
	return counts.Collect()
}

// finalCounts keeps the largest running count per word.
func finalCounts(vs []wc) map[string]int {
	m := map[string]int{}
	for _, v := range vs {
		if v.Count > m[v.Word] {
			m[v.Word] = v.Count
		}
	}
	return m
}

func expectedCounts(lines []string) map[string]int {
	m := map[string]int{}
	for _, l := range lines {
		for _, w := range words(l) {
			m[w]++
		}
	}
	return m
}

var corpus = []string{
	"To be, or not to be, that is the question:",
	"Whether 'tis nobler in the mind to suffer",
	"Straße STRASSE straße — Ärger über Öl; naïve café",
	"東京 東京 北京 123 abc123 x_y",
	"Привет, мир! привет МИР 42",
	"",
	"the end the END",
}

func bigCorpus() []string {
	var lines []string
	for i := 0; i < 300; i++ {
		lines = append(lines, corpus...)
	}
	return lines
}

func TestWordCountCollection(t *testing.T) {
	lines := bigCorpus()
	for _, p := range []int{1, 4} {
		env := stream.NewEnvironment(stream.WithParallelism(p))
		res := wordCount(stream.FromCollection(env, lines).SetParallelism(p))
		if _, err := env.Execute(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got, want := finalCounts(res.Values()), expectedCounts(lines); !reflect.DeepEqual(got, want) {
			t.Fatalf("p=%d: got %v, want %v", p, got, want)
		}
	}
}

func TestWordCountTextFile(t *testing.T) {
	lines := bigCorpus()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{1, 4} {
		for _, mode := range []stream.RuntimeMode{stream.Streaming, stream.Batch} {
			env := stream.NewEnvironment(stream.WithParallelism(p), stream.WithRuntimeMode(mode))
			res := wordCount(stream.TextFile(env, "file://"+in))
			if _, err := env.Execute(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got, want := finalCounts(res.Values()), expectedCounts(lines); !reflect.DeepEqual(got, want) {
				t.Fatalf("p=%d %v: got %v, want %v", p, mode, got, want)
			}
			if mode == stream.Batch && len(res.Values()) != len(expectedCounts(lines)) {
				t.Fatalf("batch mode emitted %d results for %d words", len(res.Values()), len(expectedCounts(lines)))
			}
		}
	}
}

func TestTextFileSplitsEveryLineOnce(t *testing.T) {
	dir := t.TempDir()
	var want []string
	for f := 0; f < 3; f++ {
		var b strings.Builder
		for i := 0; i < 50+f*37; i++ {
			l := strings.Repeat("é", i%7) + "line" + string(rune('a'+f)) + strings.Repeat("x", i%13)
			want = append(want, l)
			b.WriteString(l + "\r\n")
		}
		if f == 2 {
			want = append(want, "no newline at end")
			b.WriteString("no newline at end")
		}
		os.WriteFile(filepath.Join(dir, "f"+string(rune('0'+f))), []byte(b.String()), 0o644)
	}
	for _, p := range []int{1, 2, 3, 7} {
		env := stream.NewEnvironment(stream.WithParallelism(p))
		res := stream.TextFile(env, dir).Collect()
		if _, err := env.Execute(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := res.Values()
		sort.Strings(got)
		w := append([]string(nil), want...)
		sort.Strings(w)
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("p=%d: %d lines, want %d", p, len(got), len(w))
		}
	}
}

func TestTextFileSink(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	env := stream.NewEnvironment(stream.WithParallelism(3))
	stream.Generate(env, 100, func(i int64) int64 { return i }).Rebalance().WriteAsText(dir)
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := 0; i < 3; i++ {
		b, err := os.ReadFile(filepath.Join(dir, "part-"+string(rune('0'+i))))
		if err != nil {
			t.Fatal(err)
		}
		n += strings.Count(string(b), "\n")
	}
	if n != 100 {
		t.Fatalf("wrote %d lines, want 100", n)
	}
}

func TestPrint(t *testing.T) {
	var b strings.Builder
	env := stream.NewEnvironment(stream.WithStdout(&b))
	stream.FromElements(env, "a", "b").Print()
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b.String() != "a\nb\n" {
		t.Fatalf("printed %q", b.String())
	}
}

func pipeline(env *stream.Environment) {
	src := stream.Generate(env, 10, func(i int64) int64 { return i })
	m := stream.Map(src, func(i int64) int64 { return i * 2 })
	f := stream.Filter(m, func(i int64) bool { return i%3 != 0 })
	stream.Map(f, func(i int64) string { return "x" }).Collect()
}

func TestChaining(t *testing.T) {
	env := stream.NewEnvironment(stream.WithParallelism(2))
	pipeline(env)
	g, err := env.JobGraph()
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Vertices) != 1 || len(g.Vertices[0].Operators) != 5 || len(g.Edges) != 0 {
		t.Fatalf("want one vertex of 5 chained operators, got %d vertices: %+v", len(g.Vertices), g.Vertices[0])
	}
	if g.Vertices[0].Invokable != stream.Invokable || g.Vertices[0].Parallelism != 2 {
		t.Fatalf("vertex %+v", g.Vertices[0])
	}

	// keyBy breaks the chain; different parallelism breaks it; slot sharing
	// groups propagate.
	env = stream.NewEnvironment(stream.WithParallelism(2))
	src := stream.Generate(env, 10, func(i int64) int64 { return i }).SlotSharingGroup("g1")
	m := stream.Map(src, func(i int64) int64 { return i })
	r := stream.KeyBy(m, func(i int64) int64 { return i % 3 }).Reduce(func(a, b int64) int64 { return a + b })
	m2 := stream.Map(r, func(i int64) int64 { return i }).SetParallelism(3)
	m2.SlotSharingGroup("g2").Collect().SetParallelism(3)
	g, err = env.JobGraph()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(g.Vertices) != 3 {
		t.Fatalf("want 3 vertices, got %d", len(g.Vertices))
	}
	var names, ssgs []string
	for _, v := range g.Vertices {
		names = append(names, v.Name)
		ssgs = append(ssgs, v.SlotSharingGroup)
	}
	if want := []string{"Generator Source -> Map", "Reduce", "Map -> Collect Sink"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("vertices %q, want %q", names, want)
	}
	if want := []string{"g1", "g1", "g2"}; !reflect.DeepEqual(ssgs, want) {
		t.Fatalf("slot sharing groups %q, want %q", ssgs, want)
	}
	if g.Edges[0].ShipStrategy != "HASH" || g.Edges[0].Distribution != jobgraph.AllToAll || g.Edges[1].ShipStrategy != "REBALANCE" {
		t.Fatalf("edges %+v %+v", g.Edges[0], g.Edges[1])
	}
	for _, e := range g.Edges {
		if e.PartitionType != jobgraph.Pipelined {
			t.Fatalf("streaming edge %+v is not PIPELINED", e)
		}
	}

	// A different slot sharing group or disabled chaining breaks the chain;
	// the forward edge stays POINTWISE.
	env = stream.NewEnvironment()
	src2 := stream.FromElements(env, 1, 2)
	stream.Map(src2, func(i int) int { return i }).SlotSharingGroup("other").Collect()
	g, _ = env.JobGraph()
	if len(g.Vertices) != 2 || g.Edges[0].Distribution != jobgraph.Pointwise || g.Edges[0].ShipStrategy != "FORWARD" {
		t.Fatalf("got %d vertices, edges %+v", len(g.Vertices), g.Edges)
	}
}

func TestDeterministicIDs(t *testing.T) {
	build := func(extra bool) *jobgraph.JobGraph {
		env := stream.NewEnvironment(stream.WithParallelism(2))
		pipeline(env)
		if extra {
			stream.FromElements(env, 1).Print()
		}
		g, err := env.JobGraph()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	a, b, c := build(false), build(false), build(true)
	if a.Fingerprint == "" || a.Fingerprint != b.Fingerprint || stream.Fingerprint(a) != a.Fingerprint {
		t.Fatalf("fingerprints differ across identical builds: %s %s", a.Fingerprint, b.Fingerprint)
	}
	if a.Vertices[0].ID != b.Vertices[0].ID || a.Vertices[0].Operators[2].ID != b.Vertices[0].Operators[2].ID {
		t.Fatal("IDs differ across identical builds")
	}
	if c.Fingerprint == a.Fingerprint {
		t.Fatal("a different builder has the same fingerprint")
	}
	// Marshal round trip keeps the fingerprint.
	raw, err := jobgraph.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	back, err := jobgraph.Unmarshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	if stream.Fingerprint(back) != a.Fingerprint {
		t.Fatal("fingerprint changed through the wire form")
	}
}

func TestBatchExchangesBlocking(t *testing.T) {
	env := stream.NewEnvironment(stream.WithParallelism(2), stream.WithRuntimeMode(stream.Batch))
	res := wordCount(stream.FromCollection(env, corpus))
	g, err := env.JobGraph()
	if err != nil {
		t.Fatal(err)
	}
	if g.Type != jobgraph.Batch || len(g.Edges) == 0 {
		t.Fatalf("type %v, %d edges", g.Type, len(g.Edges))
	}
	for _, e := range g.Edges {
		if e.PartitionType != jobgraph.Blocking {
			t.Fatalf("batch edge %+v is not BLOCKING", e)
		}
	}
	if _, err := env.Execute(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := finalCounts(res.Values()), expectedCounts(corpus); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	env = stream.NewEnvironment(stream.WithRuntimeMode(stream.Batch))
	stream.Generate(env, -1, func(i int64) int64 { return i }).Print()
	if _, err := env.JobGraph(); err == nil || !strings.Contains(err.Error(), "unbounded") {
		t.Fatalf("unbounded source in batch mode: %v", err)
	}
}

func TestRegistry(t *testing.T) {
	stream.RegisterJob("test-wordcount", func(env *stream.Environment, args []string) error {
		env.SetParallelism(len(args))
		wordCount(stream.FromCollection(env, args))
		return nil
	})
	p1, err := stream.PlanJob("test-wordcount", []string{"a b", "b"})
	if err != nil {
		t.Fatal(err)
	}
	env, _ := stream.BuildJob("test-wordcount", []string{"a b", "b"})
	g, _ := env.JobGraph()
	if err := p1.CheckFingerprint(g.Fingerprint); err != nil {
		t.Fatal(err)
	}
	p3, _ := stream.PlanJob("test-wordcount", []string{"a b", "b", "c"})
	if err := p3.CheckFingerprint(g.Fingerprint); err == nil {
		t.Fatal("different arguments, same fingerprint")
	}
	for _, v := range p1.Graph.Vertices {
		for _, o := range v.Operators {
			if spec, ok := p1.Operator(o.ID); !ok || spec.Name != o.Name {
				t.Fatalf("operator %s not in the registry", o.ID)
			}
		}
	}
	if _, err := stream.RunJob(context.Background(), "test-wordcount", []string{"x"}); err != nil {
		t.Fatal(err)
	}
}

func TestFailingUserFunction(t *testing.T) {
	env := stream.NewEnvironment(stream.WithParallelism(2))
	src := stream.Generate(env, 1000, func(i int64) int64 { return i })
	m := stream.Map(stream.KeyBy(src, func(i int64) int64 { return i }).DataStream, func(i int64) int64 {
		if i == 500 {
			panic("boom at 500")
		}
		return i
	}).Name("Exploding Map")
	m.Collect()
	_, err := env.Execute(context.Background())
	if err == nil || !strings.Contains(err.Error(), `"Exploding Map"`) || !strings.Contains(err.Error(), "boom at 500") || !strings.Contains(err.Error(), "goroutine") {
		t.Fatalf("error %v", err)
	}

	env = stream.NewEnvironment()
	stream.FlatMap(stream.FromElements(env, 1, 2, 3), func(i int, out stream.Collector[int]) error {
		if i == 2 {
			return os.ErrInvalid
		}
		out.Collect(i)
		return nil
	}).Name("Picky").Print()
	_, err = env.Execute(context.Background())
	if err == nil || !strings.Contains(err.Error(), `"Picky"`) {
		t.Fatalf("error %v", err)
	}
}

func TestCancel(t *testing.T) {
	env := stream.NewEnvironment(stream.WithParallelism(3))
	src := stream.Generate(env, -1, func(i int64) int64 { return i })
	stream.KeyBy(src, func(i int64) int64 { return i % 10 }).Reduce(func(a, b int64) int64 { return a + b }).Collect()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := env.Execute(ctx)
	if err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("error %v", err)
	}
}

func TestPlanRejectsUnserializableExchange(t *testing.T) {
	type withFunc struct{ F func() }
	env := stream.NewEnvironment(stream.WithParallelism(2))
	s := stream.Map(stream.FromElements(env, 1, 2, 3), func(i int) withFunc { return withFunc{} }).Name("MakeFuncs")
	stream.Map(s.Rebalance(), func(w withFunc) int { return 0 }).Print()
	_, err := env.Plan()
	if err == nil || !strings.Contains(err.Error(), `"MakeFuncs"`) || !strings.Contains(err.Error(), "withFunc") {
		t.Fatalf("Plan: %v; want an error naming the operator and the type", err)
	}
	// Chained, the same records are never serialized.
	env = stream.NewEnvironment()
	stream.Map(stream.Map(stream.FromElements(env, 1), func(i int) withFunc { return withFunc{} }), func(w withFunc) int { return 0 }).Print()
	if _, err := env.Plan(); err != nil {
		t.Fatalf("chained: %v", err)
	}
}
