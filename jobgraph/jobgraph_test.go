package jobgraph

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func v(id string, p int) *Vertex {
	return &Vertex{ID: VertexID(id), Name: id, Parallelism: p, Invokable: "noop", SlotSharingGroup: "default"}
}

func e(src, dst string) *Edge {
	return &Edge{Source: VertexID(src), Target: VertexID(dst), Distribution: AllToAll, PartitionType: Pipelined}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		graph *JobGraph
		want  []string // substrings, one per expected problem, in order
	}{
		{"valid", &JobGraph{Type: Streaming, Vertices: []*Vertex{v("a", 2), v("b", 3)}, Edges: []*Edge{e("a", "b")}}, nil},
		{"nil graph", nil, []string{"job graph is nil"}},
		{"empty", &JobGraph{Type: Batch}, []string{"no vertices"}},
		{"unknown job type", &JobGraph{Vertices: []*Vertex{v("a", 1)}}, []string{"job type JobType(0) is unknown"}},
		{"parallelism", &JobGraph{Type: Batch, Vertices: []*Vertex{v("a", 0), {ID: "b", Parallelism: 300, MaxParallelism: 200, Invokable: "x"}}},
			[]string{`"a" has parallelism 0`, `"b" has parallelism 300 above its max parallelism 200`}},
		{"max parallelism out of range", &JobGraph{Type: Batch, Vertices: []*Vertex{{ID: "a", Parallelism: 1, MaxParallelism: 1 << 16, Invokable: "x"}}},
			[]string{"max parallelism 65536 (must be in 1..32768)"}},
		{"duplicate and empty ids, no invokable", &JobGraph{Type: Batch, Vertices: []*Vertex{v("a", 1), v("a", 1), {Name: "anon", Parallelism: 1}}},
			[]string{`vertex id "a" is used more than once`, `vertex #2 ("anon") has an empty id`, `vertex "" has no invokable`}},
		{"dangling edges", &JobGraph{Type: Batch, Vertices: []*Vertex{v("a", 1)}, Edges: []*Edge{e("a", "zz"), e("yy", "a")}},
			[]string{`target vertex "zz" does not exist`, `source vertex "yy" does not exist`}},
		{"unknown edge types", &JobGraph{Type: Batch, Vertices: []*Vertex{v("a", 1), v("b", 1)}, Edges: []*Edge{{Source: "a", Target: "b"}}},
			[]string{"distribution pattern DistributionPattern(0) is unknown", "result partition type ResultPartitionType(0) is unknown"}},
		{"self loop", &JobGraph{Type: Batch, Vertices: []*Vertex{v("a", 1)}, Edges: []*Edge{e("a", "a")}},
			[]string{"cannot consume its own output"}},
		{"cycle", &JobGraph{Type: Streaming, Vertices: []*Vertex{v("a", 1), v("b", 1), v("c", 1)}, Edges: []*Edge{e("a", "b"), e("b", "c"), e("c", "a")}},
			[]string{"cycle: a -> b -> c -> a"}},
		{"duplicate result ids", &JobGraph{Type: Batch, Vertices: []*Vertex{v("a", 1), v("b", 1)},
			Edges: []*Edge{{Result: "r", Source: "a", Target: "b", Distribution: Pointwise, PartitionType: Blocking}, {Result: "r", Source: "a", Target: "b", Distribution: Pointwise, PartitionType: Blocking}}},
			[]string{`result id "r" is used more than once`}},
		{"co-location", &JobGraph{Type: Streaming, Vertices: []*Vertex{
			{ID: "a", Parallelism: 2, Invokable: "x", SlotSharingGroup: "s", CoLocationGroup: "c"},
			{ID: "b", Parallelism: 3, Invokable: "x", SlotSharingGroup: "t", CoLocationGroup: "c"},
			{ID: "d", Parallelism: 1, Invokable: "x", CoLocationGroup: "c2"}}},
			[]string{`"d" is in co-location group "c2" but in no slot sharing group`, `mixes parallelism 2 ("a") and 3 ("b")`, `spans slot sharing groups "s" and "t"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.graph.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate() = %v, want a ValidationError", err)
			}
			if len(ve.Problems) != len(tt.want) {
				t.Fatalf("got %d problems %q, want %d", len(ve.Problems), ve.Problems, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(ve.Problems[i], w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, ve.Problems[i], w)
				}
			}
		})
	}
}

func TestDefaultMaxParallelism(t *testing.T) {
	for p, want := range map[int]int{1: 128, 85: 128, 86: 256, 1000: 2048, 10000: 16384, 30000: 32768} {
		if got := DefaultMaxParallelism(p); got != want {
			t.Errorf("DefaultMaxParallelism(%d) = %d, want %d", p, got, want)
		}
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	g := &JobGraph{JobID: "j1", Name: "wc", Type: Batch, Fingerprint: "fp", Config: map[string]string{"k": "v"},
		BinaryKey: "sha256:" + strings.Repeat("ab", 32), ProgramArgs: []string{"--input", "x"},
		Vertices: []*Vertex{
			{ID: "src", Name: "Source", Parallelism: 2, MaxParallelism: 64, SlotSharingGroup: "default", CoLocationGroup: "c",
				Invokable: "stream", Operators: []Operator{{ID: "o1", Name: "read", Kind: "text-source", Config: []byte{1}}}, Config: []byte("x")},
			{ID: "sink", Name: "Sink", Parallelism: 1, Invokable: "stream"},
		},
		Edges: []*Edge{{Result: "r1", Source: "src", Target: "sink", Distribution: Pointwise, PartitionType: Blocking, ShipStrategy: "forward"}},
	}
	b, err := Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	g.Vertices[1].Operators = []Operator{} // decoding yields an empty chain, not nil
	if !reflect.DeepEqual(got, g) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, g)
	}
	if _, err := Unmarshal([]byte{0xff, 0xff}); err == nil || !strings.Contains(err.Error(), "jobgraph: unmarshal") {
		t.Fatalf("Unmarshal(garbage) = %v, want a jobgraph: unmarshal error", err)
	}
}

func TestTopologicalOrder(t *testing.T) {
	g := &JobGraph{Type: Streaming, Vertices: []*Vertex{v("sink", 1), v("map", 1), v("src", 1), v("side", 1)},
		Edges: []*Edge{e("map", "sink"), e("src", "map"), e("side", "sink")}}
	var ids []VertexID
	for _, x := range g.TopologicalOrder() {
		ids = append(ids, x.ID)
	}
	want := []VertexID{"src", "side", "map", "sink"}
	if !reflect.DeepEqual(ids, want) {
		t.Fatalf("order = %v, want %v", ids, want)
	}
}

// Vertex and result IDs name directories on TaskManagers, and the binary
// key names a blob: each must keep to its syntax.
func TestValidateChecksIdentifierSyntax(t *testing.T) {
	g := &JobGraph{Name: "x", Type: Streaming, BinaryKey: "sha256:../../x",
		Vertices: []*Vertex{{ID: "../a", Invokable: "noop", Parallelism: 1}, {ID: "b", Invokable: "noop", Parallelism: 1}},
		Edges:    []*Edge{{Source: "b", Target: "../a", Result: "r/1", Distribution: Pointwise, PartitionType: Pipelined}}}
	err := g.Validate()
	for _, want := range []string{"invalid job binary key", "invalid vertex id \"../a\"", "invalid result id \"r/1\""} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v; want it to report %s", err, want)
		}
	}
	if err := ValidateJobID("../../../../tmp/x"); err == nil {
		t.Error("ValidateJobID accepted a traversal")
	}
	if err := ValidateJobID(""); err != nil {
		t.Errorf("ValidateJobID(\"\") = %v; want nil (the Dispatcher assigns one)", err)
	}
}
