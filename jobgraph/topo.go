package jobgraph

// TopologicalOrder returns the vertices of a valid graph sorted so that every
// edge's source comes before its target. Ties keep the graph's vertex order,
// so the result is deterministic.
func (g *JobGraph) TopologicalOrder() []*Vertex {
	index := make(map[VertexID]int, len(g.Vertices))
	for i, v := range g.Vertices {
		index[v.ID] = i
	}
	indeg := make([]int, len(g.Vertices))
	out := make([][]int, len(g.Vertices))
	for _, e := range g.Edges {
		s, t := index[e.Source], index[e.Target]
		out[s] = append(out[s], t)
		indeg[t]++
	}
	order := make([]*Vertex, 0, len(g.Vertices))
	// Kahn's algorithm over a queue seeded in vertex order.
	queue := make([]int, 0, len(g.Vertices))
	for i := range g.Vertices {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		order = append(order, g.Vertices[i])
		for _, t := range out[i] {
			if indeg[t]--; indeg[t] == 0 {
				queue = append(queue, t)
			}
		}
	}
	return order
}
