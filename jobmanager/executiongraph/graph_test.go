package executiongraph

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/gofl/gofl/jobgraph"
)

// graph builds a JobGraph from a compact spec: vertices "id:parallelism" and
// edges "src->dst:pattern:type" with pattern a (ALL_TO_ALL) or p (POINTWISE)
// and type P (PIPELINED) or B (BLOCKING).
func graph(t testing.TB, vertices []string, edges ...string) *Graph {
	t.Helper()
	jg := &jobgraph.JobGraph{Type: jobgraph.Streaming}
	for _, s := range vertices {
		var id string
		var p int
		if _, err := fmt.Sscanf(s, "%1s:%d", &id, &p); err != nil {
			t.Fatalf("bad vertex %q: %v", s, err)
		}
		jg.Vertices = append(jg.Vertices, &jobgraph.Vertex{ID: jobgraph.VertexID(id), Parallelism: p, Invokable: "noop", SlotSharingGroup: "default"})
	}
	for _, s := range edges {
		var src, dst, pat, typ string
		if _, err := fmt.Sscanf(s, "%1s->%1s:%1s:%1s", &src, &dst, &pat, &typ); err != nil {
			t.Fatalf("bad edge %q: %v", s, err)
		}
		e := &jobgraph.Edge{Source: jobgraph.VertexID(src), Target: jobgraph.VertexID(dst), Distribution: jobgraph.Pointwise, PartitionType: jobgraph.Pipelined}
		if pat == "a" {
			e.Distribution = jobgraph.AllToAll
		}
		if typ == "B" {
			e.PartitionType = jobgraph.Blocking
		}
		jg.Edges = append(jg.Edges, e)
	}
	g, err := Build(jg, 7)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

type groupShape struct{ parts, consumers [2]int }

func shapes(g *Graph, r *IntermediateResult) []groupShape {
	var out []groupShape
	for gi := r.FirstGroup; gi < r.FirstGroup+GroupIndex(r.NumGroups); gi++ {
		grp := g.Groups[gi]
		out = append(out, groupShape{
			[2]int{int(grp.FirstPartition - r.FirstPartition), int(grp.FirstPartition-r.FirstPartition) + int(grp.NumPartitions)},
			[2]int{int(grp.FirstConsumer - r.Consumer.FirstVertex), int(grp.FirstConsumer-r.Consumer.FirstVertex) + int(grp.NumConsumers)},
		})
	}
	return out
}

func TestConnectGroups(t *testing.T) {
	tests := []struct {
		name string
		p, c int
		pat  string
		want []groupShape
	}{
		{"all-to-all is one group", 3, 5, "a", []groupShape{{[2]int{0, 3}, [2]int{0, 5}}}},
		{"pointwise equal", 2, 2, "p", []groupShape{{[2]int{0, 1}, [2]int{0, 1}}, {[2]int{1, 2}, [2]int{1, 2}}}},
		{"pointwise fan-in", 5, 2, "p", []groupShape{{[2]int{0, 2}, [2]int{0, 1}}, {[2]int{2, 5}, [2]int{1, 2}}}},
		{"pointwise fan-out", 2, 5, "p", []groupShape{{[2]int{0, 1}, [2]int{0, 3}}, {[2]int{1, 2}, [2]int{3, 5}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := graph(t, []string{fmt.Sprintf("a:%d", tt.p), fmt.Sprintf("b:%d", tt.c)}, "a->b:"+tt.pat+":P")
			if got := shapes(g, g.Results[0]); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("groups = %v, want %v", got, tt.want)
			}
			// Every consumer reads exactly one group; every partition is in one.
			for v := g.JobVertices[1].FirstVertex; v < g.JobVertices[1].FirstVertex+VertexIndex(tt.c); v++ {
				if len(g.Vertices[v].Inputs) != 1 {
					t.Errorf("vertex %d has %d inputs", v, len(g.Vertices[v].Inputs))
				}
			}
		})
	}
}

func regionsOf(g *Graph) [][]string {
	var out [][]string
	for _, r := range g.Regions {
		var names []string
		for _, v := range r.Vertices {
			names = append(names, fmt.Sprintf("%s%d", g.JobVertexOf(v).ID(), g.Vertices[v].Subtask))
		}
		out = append(out, names)
	}
	return out
}

func TestPipelinedRegions(t *testing.T) {
	tests := []struct {
		name     string
		vertices []string
		edges    []string
		want     [][]string
	}{
		{"streaming all-to-all is one region", []string{"a:2", "b:2"}, []string{"a->b:a:P"}, [][]string{{"a0", "a1", "b0", "b1"}}},
		{"batch all-to-all: one region per vertex", []string{"a:2", "b:2"}, []string{"a->b:a:B"}, [][]string{{"a0"}, {"a1"}, {"b0"}, {"b1"}}},
		{"pointwise pipelined chains", []string{"a:2", "b:2", "c:1"}, []string{"a->b:p:P", "b->c:a:B"}, [][]string{{"a0", "b0"}, {"a1", "b1"}, {"c0"}}},
		{"blocking inside a region joins its group", []string{"a:2", "b:2"}, []string{"a->b:p:P", "a->b:a:B"}, [][]string{{"a0", "a1", "b0", "b1"}}},
		// a0b0 -> c (blocking) -> b0 (blocking): a cycle between regions.
		{"cyclic regions merge", []string{"a:2", "b:2", "c:1"}, []string{"a->b:p:P", "a->c:a:B", "c->b:a:B"}, [][]string{{"a0", "a1", "c0", "b0", "b1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := graph(t, tt.vertices, tt.edges...)
			if got := regionsOf(g); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("regions = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRegionConsumedGroupsAndCounters(t *testing.T) {
	g := graph(t, []string{"a:2", "b:3"}, "a->b:a:B")
	grp := &g.Groups[0]
	if len(grp.ConsumerRegions) != 3 || grp.UnfinishedConsumerRegions != 3 || grp.UnfinishedPartitions != 2 {
		t.Fatalf("group = %+v", grp)
	}
	b0 := g.JobVertices[1].FirstVertex
	if got := g.Regions[g.Vertices[b0].Region].ConsumedGroups; !reflect.DeepEqual(got, []GroupIndex{0}) {
		t.Fatalf("b0 consumes %v", got)
	}
	finish := func(v VertexIndex) {
		t.Helper()
		for _, s := range []ExecutionState{Scheduled, Deploying, Running, Finished} {
			if err := g.Transition(v, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	finish(0)
	finish(1)
	if grp.UnfinishedPartitions != 0 || grp.UnconsumablePartitions != 0 {
		t.Fatalf("after producers finished: %+v", grp)
	}
	for v := b0; v < b0+3; v++ {
		finish(v)
	}
	if grp.UnfinishedConsumerRegions != 0 {
		t.Fatalf("after consumers finished: %+v", grp)
	}
	// Restarting a producer makes its partition unfinished again, and a
	// restarted consumer region counts as unfinished.
	if err := g.ResetVertex(0); err != nil {
		t.Fatal(err)
	}
	if err := g.ResetVertex(b0); err != nil {
		t.Fatal(err)
	}
	if grp.UnfinishedPartitions != 1 || grp.UnconsumablePartitions != 1 || grp.UnfinishedConsumerRegions != 1 {
		t.Fatalf("after reset: %+v", grp)
	}
	if g.Vertices[0].Current.Attempt != 1 || g.Vertices[0].Current.State != Created {
		t.Fatalf("reset vertex: %+v", g.Vertices[0].Current)
	}
}

func TestTransitions(t *testing.T) {
	legalPaths := [][]ExecutionState{
		{Created, Scheduled, Deploying, Initializing, Running, Finished},
		{Created, Scheduled, Deploying, Finished},
		{Created, Scheduled, Deploying, Running, Canceling, Canceled},
		{Created, Canceled},
		{Created, Scheduled, Failed},
		{Created, Scheduled, Deploying, Initializing, Failed},
	}
	for _, path := range legalPaths {
		for i := 1; i < len(path); i++ {
			if !CanTransition(path[i-1], path[i]) {
				t.Errorf("%s -> %s rejected, want legal", path[i-1], path[i])
			}
		}
	}
	illegal := [][2]ExecutionState{
		{Created, Running}, {Created, Deploying}, {Scheduled, Running}, {Finished, Running}, {Canceled, Scheduled},
		{Failed, Created}, {Canceling, Finished}, {Canceling, Running}, {Running, Deploying}, {Running, Created},
	}
	for _, p := range illegal {
		if CanTransition(p[0], p[1]) {
			t.Errorf("%s -> %s allowed, want illegal", p[0], p[1])
		}
	}
	g := graph(t, []string{"a:1"})
	if err := g.Transition(0, Running); !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("Transition(CREATED->RUNNING) = %v, want ErrIllegalTransition", err)
	}
	if err := g.ResetVertex(0); !errors.Is(err, ErrIllegalTransition) {
		t.Fatalf("ResetVertex of a CREATED vertex = %v, want ErrIllegalTransition", err)
	}
}

func TestLookup(t *testing.T) {
	g := graph(t, []string{"a:2"})
	id := g.AttemptID(1)
	if v, err := g.Lookup(id); err != nil || v != 1 {
		t.Fatalf("Lookup(%s) = %d, %v", id, v, err)
	}
	for _, bad := range []ExecutionAttemptID{
		{Graph: 8, JobVertex: "a", Subtask: 0},
		{Graph: 7, JobVertex: "zz"},
		{Graph: 7, JobVertex: "a", Subtask: 2},
		{Graph: 7, JobVertex: "a", Subtask: 0, Attempt: 3},
	} {
		if _, err := g.Lookup(bad); !errors.Is(err, ErrUnknownAttempt) {
			t.Errorf("Lookup(%s) = %v, want ErrUnknownAttempt", bad, err)
		}
	}
	for _, s := range []ExecutionState{Failed} {
		_ = g.Transition(0, s)
	}
	_ = g.ResetVertex(0)
	if _, err := g.Lookup(ExecutionAttemptID{Graph: 7, JobVertex: "a"}); !errors.Is(err, ErrStaleAttempt) {
		t.Fatalf("Lookup(old attempt) = %v, want ErrStaleAttempt", err)
	}
}

func TestBuildRejectsInvalidGraph(t *testing.T) {
	_, err := Build(&jobgraph.JobGraph{Type: jobgraph.Batch}, 1)
	if !errors.Is(err, jobgraph.ErrInvalid) {
		t.Fatalf("Build(empty) = %v, want jobgraph.ErrInvalid", err)
	}
}
