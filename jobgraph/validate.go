package jobgraph

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gofl/gofl/internal/ids"
)

// ErrInvalid is wrapped by every validation failure.
var ErrInvalid = errors.New("jobgraph: invalid JobGraph")

// ValidationError lists every problem found in a JobGraph.
type ValidationError struct {
	Problems []string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("%v: %d problem(s): %s", ErrInvalid, len(e.Problems), strings.Join(e.Problems, "; "))
}

func (e *ValidationError) Unwrap() error { return ErrInvalid }

// Validate checks the whole graph and reports every problem it finds, or nil.
// It checks the syntax of vertex and result IDs and the binary key, but not
// of the job ID, which the Dispatcher checks (ValidateJobID) where a
// graph arrives from the network.
func (g *JobGraph) Validate() error {
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	if g == nil {
		return &ValidationError{Problems: []string{"job graph is nil"}}
	}
	if g.Type != Streaming && g.Type != Batch {
		add("job type %v is unknown (want STREAMING or BATCH)", g.Type)
	}
	if g.BinaryKey != "" {
		if err := ids.BlobKey("job binary key", g.BinaryKey); err != nil {
			add("%v", err)
		}
	}
	if len(g.Vertices) == 0 {
		add("job graph has no vertices")
	}
	byID := make(map[VertexID]*Vertex, len(g.Vertices))
	for i, v := range g.Vertices {
		if v == nil {
			add("vertex #%d is nil", i)
			continue
		}
		switch _, dup := byID[v.ID]; {
		case v.ID == "":
			add("vertex #%d (%q) has an empty id", i, v.Name)
		case ids.VertexID("vertex id", string(v.ID)) != nil:
			// Vertex IDs name task-local state directories on TaskManagers.
			add("vertex #%d (%q): %v", i, v.Name, ids.VertexID("vertex id", string(v.ID)))
		case dup:
			add("vertex id %q is used more than once", v.ID)
		default:
			byID[v.ID] = v
		}
		if v.Invokable == "" {
			add("vertex %q has no invokable", v.ID)
		}
		if v.Parallelism < 1 {
			add("vertex %q has parallelism %d (must be at least 1)", v.ID, v.Parallelism)
		}
		if v.MaxParallelism < 0 || v.MaxParallelism > MaxMaxParallelism {
			add("vertex %q has max parallelism %d (must be in 1..%d)", v.ID, v.MaxParallelism, MaxMaxParallelism)
		} else if v.Parallelism > v.EffectiveMaxParallelism() {
			add("vertex %q has parallelism %d above its max parallelism %d", v.ID, v.Parallelism, v.EffectiveMaxParallelism())
		}
		if v.CoLocationGroup != "" && v.SlotSharingGroup == "" {
			add("vertex %q is in co-location group %q but in no slot sharing group", v.ID, v.CoLocationGroup)
		}
	}
	validateCoLocation(g, add)

	results := make(map[ResultID]bool, len(g.Edges))
	for i, e := range g.Edges {
		if e == nil {
			add("edge #%d is nil", i)
			continue
		}
		name := fmt.Sprintf("edge #%d (%s -> %s)", i, e.Source, e.Target)
		if byID[e.Source] == nil {
			add("%s: source vertex %q does not exist", name, e.Source)
		}
		if byID[e.Target] == nil {
			add("%s: target vertex %q does not exist", name, e.Target)
		}
		if e.Source == e.Target && e.Source != "" {
			add("%s: a vertex cannot consume its own output", name)
		}
		if e.Distribution != Pointwise && e.Distribution != AllToAll {
			add("%s: distribution pattern %v is unknown (want POINTWISE or ALL_TO_ALL)", name, e.Distribution)
		}
		if e.PartitionType != Pipelined && e.PartitionType != Blocking {
			add("%s: result partition type %v is unknown (want PIPELINED or BLOCKING)", name, e.PartitionType)
		}
		r := g.ResultIDOf(i)
		if err := ids.ResultID("result id", string(r)); err != nil {
			add("%s: %v", name, err)
		}
		if results[r] {
			add("%s: result id %q is used more than once", name, r)
		}
		results[r] = true
	}
	if cycle := findCycle(g, byID); cycle != nil {
		add("job graph has a cycle: %s", strings.Join(cycle, " -> "))
	}
	if len(p) > 0 {
		return &ValidationError{Problems: p}
	}
	return nil
}

func validateCoLocation(g *JobGraph, add func(string, ...any)) {
	first := map[string]*Vertex{}
	for _, v := range g.Vertices {
		if v == nil || v.CoLocationGroup == "" {
			continue
		}
		f, ok := first[v.CoLocationGroup]
		if !ok {
			first[v.CoLocationGroup] = v
			continue
		}
		if f.Parallelism != v.Parallelism {
			add("co-location group %q mixes parallelism %d (%q) and %d (%q)", v.CoLocationGroup, f.Parallelism, f.ID, v.Parallelism, v.ID)
		}
		if f.SlotSharingGroup != v.SlotSharingGroup {
			add("co-location group %q spans slot sharing groups %q and %q", v.CoLocationGroup, f.SlotSharingGroup, v.SlotSharingGroup)
		}
	}
}

// findCycle returns the vertex IDs of one cycle, or nil. Edges to unknown
// vertices are ignored; they are reported separately.
func findCycle(g *JobGraph, byID map[VertexID]*Vertex) []string {
	out := make(map[VertexID][]VertexID, len(byID))
	for _, e := range g.Edges {
		if e != nil && byID[e.Source] != nil && byID[e.Target] != nil && e.Source != e.Target {
			out[e.Source] = append(out[e.Source], e.Target)
		}
	}
	const (
		unseen = iota
		onStack
		done
	)
	state := make(map[VertexID]int, len(byID))
	parent := make(map[VertexID]VertexID, len(byID))
	type frame struct {
		v    VertexID
		next int
	}
	for _, root := range g.Vertices {
		if root == nil || state[root.ID] != unseen || byID[root.ID] != root {
			continue
		}
		stack := []frame{{v: root.ID}}
		state[root.ID] = onStack
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next == len(out[top.v]) {
				state[top.v] = done
				stack = stack[:len(stack)-1]
				continue
			}
			w := out[top.v][top.next]
			top.next++
			switch state[w] {
			case unseen:
				state[w] = onStack
				parent[w] = top.v
				stack = append(stack, frame{v: w})
			case onStack:
				cycle := []string{string(w)}
				for u := top.v; u != w; u = parent[u] {
					cycle = append(cycle, string(u))
				}
				cycle = append(cycle, string(w))
				for i, j := 0, len(cycle)-1; i < j; i, j = i+1, j-1 {
					cycle[i], cycle[j] = cycle[j], cycle[i]
				}
				return cycle
			}
		}
	}
	return nil
}

// ValidateJobID checks a job ID given with a submission: empty (the
// Dispatcher assigns one) or 32 lowercase hex characters, as Flink's JobID.
func ValidateJobID(id string) error {
	if id == "" {
		return nil
	}
	if err := ids.JobID("job id", id); err != nil {
		return &ValidationError{Problems: []string{err.Error()}}
	}
	return nil
}
