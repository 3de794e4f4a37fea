package executiongraph

import "github.com/gofl/gofl/jobgraph"

// PipelinedRegion is a set of vertices that must run at the same time
// because PIPELINED edges join them. Regions are the unit of scheduling and
// of restart-pipelined-region failover.
type PipelinedRegion struct {
	Index RegionIndex
	// Vertices in ascending (topological) order.
	Vertices []VertexIndex
	// ConsumedGroups are the distinct BLOCKING groups the region reads from
	// producers outside it. The region can start once all are finished.
	ConsumedGroups []GroupIndex
	// UnfinishedVertices counts vertices whose current attempt is not FINISHED.
	UnfinishedVertices int32
}

// unionFind over vertex indices, with path halving and union by size.
type unionFind struct{ parent, size []int32 }

func newUnionFind(n int) *unionFind {
	u := &unionFind{parent: make([]int32, n), size: make([]int32, n)}
	for i := range u.parent {
		u.parent[i], u.size[i] = int32(i), 1
	}
	return u
}

func (u *unionFind) find(x int32) int32 {
	for u.parent[x] != x {
		u.parent[x] = u.parent[u.parent[x]]
		x = u.parent[x]
	}
	return x
}

func (u *unionFind) union(a, b int32) bool {
	a, b = u.find(a), u.find(b)
	if a == b {
		return false
	}
	if u.size[a] < u.size[b] {
		a, b = b, a
	}
	u.parent[b] = a
	u.size[a] += u.size[b]
	return true
}

// computeRegions groups vertices into pipelined regions:
//  1. PIPELINED groups join all their producers and consumers;
//  2. a BLOCKING group whose producers and consumers already share a region
//     joins all of them too, or that region would wait on itself;
//  3. regions that depend on each other in a cycle through BLOCKING groups are
//     merged (Flink's FLINK-17330), so the region graph is a DAG.
//
// Every step is linear in vertices plus partitions: a group's producers and
// consumers are visited once, never its producer×consumer edges.
func (g *Graph) computeRegions() {
	uf := newUnionFind(len(g.Vertices))
	joinGroup := func(gi GroupIndex) bool {
		grp := &g.Groups[gi]
		changed := false
		rep := int32(grp.FirstConsumer)
		pf, pe := grp.Partitions()
		for p := pf; p < pe; p++ {
			changed = uf.union(rep, int32(g.ProducerOf(p))) || changed
		}
		cf, ce := grp.Consumers()
		for c := cf + 1; c < ce; c++ {
			changed = uf.union(rep, int32(c)) || changed
		}
		return changed
	}
	for gi := range g.Groups {
		if !g.IsBlocking(GroupIndex(gi)) {
			joinGroup(GroupIndex(gi))
		}
	}
	mark := make([]int32, len(g.Vertices)) // mark[root] == gi+1: a consumer of gi is in root's set
	for changed := true; changed; {
		changed = false
		for gi := range g.Groups {
			if !g.IsBlocking(GroupIndex(gi)) {
				continue
			}
			grp := &g.Groups[gi]
			stamp := int32(gi + 1)
			cf, ce := grp.Consumers()
			for c := cf; c < ce; c++ {
				mark[uf.find(int32(c))] = stamp
			}
			pf, pe := grp.Partitions()
			for p := pf; p < pe; p++ {
				if mark[uf.find(int32(g.ProducerOf(p)))] == stamp {
					changed = joinGroup(GroupIndex(gi)) || changed
					break
				}
			}
		}
	}
	g.buildRegions(uf)
	if g.mergeCyclicRegions(uf) {
		g.buildRegions(uf)
	}
}

// buildRegions materializes the union-find sets as regions, numbered by their
// first vertex, and derives ConsumedGroups and ConsumerRegions.
func (g *Graph) buildRegions(uf *unionFind) {
	regionOfRoot := make(map[int32]RegionIndex)
	g.Regions = g.Regions[:0]
	for v := range g.Vertices {
		root := uf.find(int32(v))
		r, ok := regionOfRoot[root]
		if !ok {
			r = RegionIndex(len(g.Regions))
			regionOfRoot[root] = r
			g.Regions = append(g.Regions, PipelinedRegion{Index: r})
		}
		g.Regions[r].Vertices = append(g.Regions[r].Vertices, VertexIndex(v))
		g.Vertices[v].Region = r
	}
	// Consumer regions per group, deduplicated with a stamp per region.
	seen := make([]int32, len(g.Regions))
	for i := range seen {
		seen[i] = -1
	}
	for gi := range g.Groups {
		grp := &g.Groups[gi]
		grp.ConsumerRegions = grp.ConsumerRegions[:0]
		cf, ce := grp.Consumers()
		for c := cf; c < ce; c++ {
			if r := g.Vertices[c].Region; seen[r] != int32(gi) {
				seen[r] = int32(gi)
				grp.ConsumerRegions = append(grp.ConsumerRegions, r)
			}
		}
	}
	// Blocking groups each region reads from outside, deduplicated per group.
	last := make([]RegionIndex, len(g.Groups))
	for i := range last {
		last[i] = -1
	}
	for r := range g.Regions {
		reg := &g.Regions[r]
		reg.ConsumedGroups = nil
		for _, v := range reg.Vertices {
			for _, gi := range g.Vertices[v].Inputs {
				if last[gi] == RegionIndex(r) || !g.IsBlocking(gi) {
					continue
				}
				last[gi] = RegionIndex(r)
				if g.Vertices[g.ProducerOf(g.Groups[gi].FirstPartition)].Region != RegionIndex(r) {
					reg.ConsumedGroups = append(reg.ConsumedGroups, gi)
				}
			}
		}
	}
}

// mergeCyclicRegions finds strongly connected components of the graph whose
// nodes are regions and BLOCKING groups (region → group it produces into,
// group → regions consuming it) and unions the regions of each component.
// Routing through group nodes keeps the graph linear in size where the
// region-to-region graph of an ALL_TO_ALL edge would be quadratic.
func (g *Graph) mergeCyclicRegions(uf *unionFind) bool {
	R := len(g.Regions)
	n := R + len(g.Groups)
	adj := make([][]int32, n)
	last := make([]int32, len(g.Groups))
	for i := range last {
		last[i] = -1
	}
	for r := range g.Regions {
		for _, v := range g.Regions[r].Vertices {
			ev := &g.Vertices[v]
			for _, res := range g.JobVertices[ev.JobVertex].Produced {
				if res.Type != jobgraph.Blocking {
					continue
				}
				gi := g.Partitions[int(res.FirstPartition)+int(ev.Subtask)].Group
				if last[gi] != int32(r) {
					last[gi] = int32(r)
					adj[r] = append(adj[r], int32(R)+int32(gi))
				}
			}
		}
	}
	for gi := range g.Groups {
		if g.IsBlocking(GroupIndex(gi)) {
			for _, r := range g.Groups[gi].ConsumerRegions {
				adj[R+gi] = append(adj[R+gi], int32(r))
			}
		}
	}
	merged := false
	for _, comp := range stronglyConnected(adj) {
		first := int32(-1)
		for _, node := range comp {
			if int(node) >= R {
				continue
			}
			v := int32(g.Regions[node].Vertices[0])
			if first < 0 {
				first = v
			} else if uf.union(first, v) {
				merged = true
			}
		}
	}
	return merged
}

// stronglyConnected returns the components with more than one node, using an
// iterative Tarjan so deep graphs do not overflow the stack.
func stronglyConnected(adj [][]int32) [][]int32 {
	n := len(adj)
	index := make([]int32, n)
	low := make([]int32, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int32
	var comps [][]int32
	type frame struct{ v, next int32 }
	var next int32
	for root := 0; root < n; root++ {
		if index[root] >= 0 {
			continue
		}
		call := []frame{{v: int32(root)}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, int32(root))
		onStack[root] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			if int(f.next) < len(adj[f.v]) {
				w := adj[f.v][f.next]
				f.next++
				if index[w] < 0 {
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{v: w})
				} else if onStack[w] && index[w] < low[f.v] {
					low[f.v] = index[w]
				}
				continue
			}
			v := f.v
			call = call[:len(call)-1]
			if len(call) > 0 {
				if p := call[len(call)-1].v; low[v] < low[p] {
					low[p] = low[v]
				}
			}
			if low[v] == index[v] {
				var comp []int32
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp = append(comp, w)
					if w == v {
						break
					}
				}
				if len(comp) > 1 {
					comps = append(comps, comp)
				}
			}
		}
	}
	return comps
}
