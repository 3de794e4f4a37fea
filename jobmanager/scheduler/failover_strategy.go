package scheduler

import (
	"slices"

	eg "github.com/gofl/gofl/jobmanager/executiongraph"
)

// FailoverStrategy picks the vertices to restart after failures. Pure and
// non-blocking; called from the scheduler's goroutine.
type FailoverStrategy interface {
	// TasksNeedingRestart returns, in ascending order, every vertex to
	// restart because the given vertices failed.
	TasksNeedingRestart(failed []eg.VertexIndex) []eg.VertexIndex
}

// restartAll restarts the whole job (failover-strategy: full).
type restartAll struct{ g *eg.Graph }

func (r restartAll) TasksNeedingRestart([]eg.VertexIndex) []eg.VertexIndex {
	all := make([]eg.VertexIndex, len(r.g.Vertices))
	for i := range all {
		all[i] = eg.VertexIndex(i)
	}
	return all
}

// restartPipelinedRegion restarts the failed vertices' regions, the regions
// producing inputs of those that are no longer available, and the regions
// consuming what the restarted regions will produce again (Flink's
// RestartPipelinedRegionFailoverStrategy). Groups are visited once each, so
// the cost is linear even for ALL_TO_ALL edges.
type restartPipelinedRegion struct {
	g         *eg.Graph
	available func(eg.PartitionIndex) bool
}

func (r *restartPipelinedRegion) TasksNeedingRestart(failed []eg.VertexIndex) []eg.VertexIndex {
	g := r.g
	visited := make([]bool, len(g.Regions))
	inputChecked := make([]bool, len(g.Groups))
	outputVisited := make([]bool, len(g.Groups))
	var queue []eg.RegionIndex
	visit := func(reg eg.RegionIndex) {
		if !visited[reg] {
			visited[reg] = true
			queue = append(queue, reg)
		}
	}
	for _, v := range failed {
		visit(g.Vertices[v].Region)
	}
	var buf []eg.PartitionIndex
	for i := 0; i < len(queue); i++ {
		reg := &g.Regions[queue[i]]
		for _, gi := range reg.ConsumedGroups {
			if inputChecked[gi] {
				continue
			}
			inputChecked[gi] = true
			first, end := g.Groups[gi].Partitions()
			for p := first; p < end; p++ {
				if !r.available(p) {
					visit(g.Vertices[g.ProducerOf(p)].Region)
				}
			}
		}
		for _, v := range reg.Vertices {
			buf = g.ProducedPartitions(buf[:0], v)
			for _, p := range buf {
				gi := g.Partitions[p].Group
				if outputVisited[gi] {
					continue
				}
				outputVisited[gi] = true
				for _, cr := range g.Groups[gi].ConsumerRegions {
					visit(cr)
				}
			}
		}
	}
	var out []eg.VertexIndex
	for _, reg := range queue {
		out = append(out, g.Regions[reg].Vertices...)
	}
	slices.Sort(out)
	return out
}
