package executiongraph

import (
	"errors"
	"fmt"

	"github.com/gofl/gofl/jobgraph"
)

var (
	// ErrUnknownAttempt means an attempt ID names no vertex of this graph.
	ErrUnknownAttempt = errors.New("executiongraph: unknown execution attempt")
	// ErrStaleAttempt means an attempt ID names a vertex whose current
	// attempt is newer.
	ErrStaleAttempt = errors.New("executiongraph: stale execution attempt")
)

// Graph is the ExecutionGraph of one job.
type Graph struct {
	ID          uint64
	JobGraph    *jobgraph.JobGraph
	JobVertices []*ExecutionJobVertex // topological order
	Vertices    []ExecutionVertex
	Results     []*IntermediateResult
	Partitions  []IntermediateResultPartition
	Groups      []ConsumedPartitionGroup
	Regions     []PipelinedRegion

	jobVertexByID map[jobgraph.VertexID]*ExecutionJobVertex
	resultByID    map[jobgraph.ResultID]*IntermediateResult
}

// ExecutionJobVertex is the parallel form of one JobGraph vertex.
type ExecutionJobVertex struct {
	Index          int
	Vertex         *jobgraph.Vertex
	Parallelism    int
	MaxParallelism int
	FirstVertex    VertexIndex
	Inputs         []*IntermediateResult // in input order
	Produced       []*IntermediateResult
}

// ID is the JobGraph vertex ID.
func (j *ExecutionJobVertex) ID() jobgraph.VertexID { return j.Vertex.ID }

// VertexAt is the index of subtask i.
func (j *ExecutionJobVertex) VertexAt(subtask int) VertexIndex {
	return j.FirstVertex + VertexIndex(subtask)
}

// ExecutionVertex is one subtask of a job vertex.
type ExecutionVertex struct {
	JobVertex int32
	Subtask   int32
	Region    RegionIndex
	// Inputs holds the group each input of the job vertex reads, in input order.
	Inputs  []GroupIndex
	Current Execution
	// LastAllocation is the slot of the previous attempt, for local recovery.
	LastAllocation AllocationID
	LastLocation   TaskManagerLocation
}

// Execution is one attempt to run an ExecutionVertex.
type Execution struct {
	Attempt    int32
	State      ExecutionState
	Allocation AllocationID
	Location   TaskManagerLocation
	// Failure is the cause of FAILED, or why a cancel was requested.
	Failure error
}

// IntermediateResult is the data set one JobGraph edge carries.
type IntermediateResult struct {
	Index          int
	ID             jobgraph.ResultID
	Type           jobgraph.ResultPartitionType
	Distribution   jobgraph.DistributionPattern
	ShipStrategy   string
	Producer       *ExecutionJobVertex
	Consumer       *ExecutionJobVertex
	InputIndex     int // position among Consumer's inputs
	FirstPartition PartitionIndex
	FirstGroup     GroupIndex
	NumGroups      int
}

// NumPartitions is the producer's parallelism.
func (r *IntermediateResult) NumPartitions() int { return r.Producer.Parallelism }

// IntermediateResultPartition is the output of one producer subtask for one
// result.
type IntermediateResultPartition struct {
	Result   int32
	Number   int32 // equals the producer's subtask index
	Group    GroupIndex
	Finished bool // producer FINISHED; data fully available
	// Consumable is set once a PIPELINED partition has data (or finished).
	Consumable bool
}

// ConsumedPartitionGroup is a range of partitions of one result read in full
// by a range of consumer vertices (its ConsumerVertexGroup).
type ConsumedPartitionGroup struct {
	Result         int32
	FirstPartition PartitionIndex
	NumPartitions  int32
	FirstConsumer  VertexIndex
	NumConsumers   int32
	// UnfinishedPartitions counts partitions whose producer has not finished.
	UnfinishedPartitions int32
	// UnconsumablePartitions counts partitions not yet consumable.
	UnconsumablePartitions int32
	// ConsumerRegions lists the distinct regions of the consumers.
	ConsumerRegions []RegionIndex
	// UnfinishedConsumerRegions counts ConsumerRegions not yet finished; at
	// zero the partitions have been fully consumed.
	UnfinishedConsumerRegions int32
}

// Partitions yields the group's partition indices.
func (c *ConsumedPartitionGroup) Partitions() (first, end PartitionIndex) {
	return c.FirstPartition, c.FirstPartition + PartitionIndex(c.NumPartitions)
}

// Consumers yields the group's consumer vertex indices.
func (c *ConsumedPartitionGroup) Consumers() (first, end VertexIndex) {
	return c.FirstConsumer, c.FirstConsumer + VertexIndex(c.NumConsumers)
}

// Build expands a valid JobGraph. graphID makes its attempt IDs unique.
func Build(jg *jobgraph.JobGraph, graphID uint64) (*Graph, error) {
	if err := jg.Validate(); err != nil {
		return nil, err
	}
	g := &Graph{
		ID:            graphID,
		JobGraph:      jg,
		jobVertexByID: make(map[jobgraph.VertexID]*ExecutionJobVertex, len(jg.Vertices)),
		resultByID:    make(map[jobgraph.ResultID]*IntermediateResult, len(jg.Edges)),
	}
	total := 0
	for i, v := range jg.TopologicalOrder() {
		ejv := &ExecutionJobVertex{Index: i, Vertex: v, Parallelism: v.Parallelism, MaxParallelism: v.EffectiveMaxParallelism(), FirstVertex: VertexIndex(total)}
		g.JobVertices = append(g.JobVertices, ejv)
		g.jobVertexByID[v.ID] = ejv
		total += v.Parallelism
	}
	g.Vertices = make([]ExecutionVertex, total)
	for _, ejv := range g.JobVertices {
		for s := 0; s < ejv.Parallelism; s++ {
			g.Vertices[int(ejv.FirstVertex)+s] = ExecutionVertex{JobVertex: int32(ejv.Index), Subtask: int32(s)}
		}
	}
	// Results in edge order, so input indices follow the JobGraph's order.
	numPartitions := 0
	for i, e := range jg.Edges {
		r := &IntermediateResult{
			Index: i, ID: jg.ResultIDOf(i), Type: e.PartitionType, Distribution: e.Distribution, ShipStrategy: e.ShipStrategy,
			Producer: g.jobVertexByID[e.Source], Consumer: g.jobVertexByID[e.Target], FirstPartition: PartitionIndex(numPartitions),
		}
		r.InputIndex = len(r.Consumer.Inputs)
		r.Consumer.Inputs = append(r.Consumer.Inputs, r)
		r.Producer.Produced = append(r.Producer.Produced, r)
		g.Results = append(g.Results, r)
		g.resultByID[r.ID] = r
		numPartitions += r.Producer.Parallelism
	}
	g.Partitions = make([]IntermediateResultPartition, numPartitions)
	for _, r := range g.Results {
		for p := 0; p < r.Producer.Parallelism; p++ {
			g.Partitions[int(r.FirstPartition)+p] = IntermediateResultPartition{Result: int32(r.Index), Number: int32(p)}
		}
		g.connect(r)
	}
	g.computeRegions()
	g.initCounters()
	return g, nil
}

// connect splits a result's connections into groups, each a complete
// bipartite block of contiguous partitions and contiguous consumers.
func (g *Graph) connect(r *IntermediateResult) {
	P, C := r.Producer.Parallelism, r.Consumer.Parallelism
	r.FirstGroup = GroupIndex(len(g.Groups))
	add := func(pFirst, pEnd, cFirst, cEnd int) {
		gi := GroupIndex(len(g.Groups))
		g.Groups = append(g.Groups, ConsumedPartitionGroup{
			Result: int32(r.Index), FirstPartition: r.FirstPartition + PartitionIndex(pFirst), NumPartitions: int32(pEnd - pFirst),
			FirstConsumer: r.Consumer.FirstVertex + VertexIndex(cFirst), NumConsumers: int32(cEnd - cFirst),
		})
		for p := pFirst; p < pEnd; p++ {
			g.Partitions[int(r.FirstPartition)+p].Group = gi
		}
		for c := cFirst; c < cEnd; c++ {
			ev := &g.Vertices[int(r.Consumer.FirstVertex)+c]
			if ev.Inputs == nil {
				ev.Inputs = make([]GroupIndex, 0, len(r.Consumer.Inputs))
			}
			ev.Inputs = append(ev.Inputs, gi)
		}
	}
	switch {
	case r.Distribution == jobgraph.AllToAll:
		add(0, P, 0, C)
	case P >= C:
		// Consumer c reads partitions [c*P/C, (c+1)*P/C).
		for c := 0; c < C; c++ {
			add(c*P/C, (c+1)*P/C, c, c+1)
		}
	default:
		// Partition p is read by consumers [ceil(p*C/P), ceil((p+1)*C/P)).
		for p := 0; p < P; p++ {
			add(p, p+1, ceilDiv(p*C, P), ceilDiv((p+1)*C, P))
		}
	}
	r.NumGroups = len(g.Groups) - int(r.FirstGroup)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func (g *Graph) initCounters() {
	for i := range g.Groups {
		grp := &g.Groups[i]
		grp.UnfinishedPartitions = grp.NumPartitions
		grp.UnconsumablePartitions = grp.NumPartitions
		grp.UnfinishedConsumerRegions = int32(len(grp.ConsumerRegions))
	}
	for i := range g.Regions {
		g.Regions[i].UnfinishedVertices = int32(len(g.Regions[i].Vertices))
	}
}

// JobVertex returns the job vertex with the given ID, or nil.
func (g *Graph) JobVertex(id jobgraph.VertexID) *ExecutionJobVertex { return g.jobVertexByID[id] }

// Result returns the result with the given ID, or nil.
func (g *Graph) Result(id jobgraph.ResultID) *IntermediateResult { return g.resultByID[id] }

// JobVertexOf is the job vertex of v.
func (g *Graph) JobVertexOf(v VertexIndex) *ExecutionJobVertex {
	return g.JobVertices[g.Vertices[v].JobVertex]
}

// ProducerOf is the vertex that produces partition p.
func (g *Graph) ProducerOf(p PartitionIndex) VertexIndex {
	part := &g.Partitions[p]
	return g.Results[part.Result].Producer.VertexAt(int(part.Number))
}

// ProducedPartitions appends v's partitions, one per produced result, to dst.
func (g *Graph) ProducedPartitions(dst []PartitionIndex, v VertexIndex) []PartitionIndex {
	ev := &g.Vertices[v]
	for _, r := range g.JobVertices[ev.JobVertex].Produced {
		dst = append(dst, r.FirstPartition+PartitionIndex(ev.Subtask))
	}
	return dst
}

// AttemptID is the ID of v's current attempt.
func (g *Graph) AttemptID(v VertexIndex) ExecutionAttemptID {
	ev := &g.Vertices[v]
	return ExecutionAttemptID{Graph: g.ID, JobVertex: g.JobVertices[ev.JobVertex].ID(), Subtask: ev.Subtask, Attempt: ev.Current.Attempt}
}

// PartitionID is the ID of partition p as produced by its producer's current
// attempt.
func (g *Graph) PartitionID(p PartitionIndex) ResultPartitionID {
	part := &g.Partitions[p]
	return ResultPartitionID{Result: g.Results[part.Result].ID, Partition: part.Number, Producer: g.AttemptID(g.ProducerOf(p))}
}

// LookupPartition finds the partition with the given ID. The producer attempt
// is not checked: a partition of an older attempt maps to the same index.
func (g *Graph) LookupPartition(id ResultPartitionID) (PartitionIndex, bool) {
	r := g.resultByID[id.Result]
	if r == nil || id.Partition < 0 || int(id.Partition) >= r.NumPartitions() {
		return 0, false
	}
	return r.FirstPartition + PartitionIndex(id.Partition), true
}

// Lookup finds the vertex of a current attempt. It returns ErrUnknownAttempt
// for IDs of other graphs or vertices, ErrStaleAttempt for older attempts.
func (g *Graph) Lookup(id ExecutionAttemptID) (VertexIndex, error) {
	ejv := g.jobVertexByID[id.JobVertex]
	if id.Graph != g.ID || ejv == nil || id.Subtask < 0 || int(id.Subtask) >= ejv.Parallelism {
		return 0, fmt.Errorf("%w: %s", ErrUnknownAttempt, id)
	}
	v := ejv.VertexAt(int(id.Subtask))
	if cur := g.Vertices[v].Current.Attempt; id.Attempt != cur {
		if id.Attempt < cur {
			return v, fmt.Errorf("%w: %s (current attempt is %d)", ErrStaleAttempt, id, cur)
		}
		return 0, fmt.Errorf("%w: %s (current attempt is %d)", ErrUnknownAttempt, id, cur)
	}
	return v, nil
}

// Transition moves v's current execution to state to, keeping the finished
// and consumable counters of partitions, groups and regions in step.
func (g *Graph) Transition(v VertexIndex, to ExecutionState) error {
	ex := &g.Vertices[v].Current
	if !CanTransition(ex.State, to) {
		return fmt.Errorf("%w: %s from %s to %s", ErrIllegalTransition, g.AttemptID(v), ex.State, to)
	}
	ex.State = to
	switch to {
	case Running:
		g.forProduced(v, func(p *IntermediateResultPartition, grp *ConsumedPartitionGroup) {
			if g.Results[p.Result].Type == jobgraph.Pipelined && !p.Consumable {
				p.Consumable = true
				grp.UnconsumablePartitions--
			}
		})
	case Finished:
		g.forProduced(v, func(p *IntermediateResultPartition, grp *ConsumedPartitionGroup) {
			p.Finished = true
			grp.UnfinishedPartitions--
			if !p.Consumable {
				p.Consumable = true
				grp.UnconsumablePartitions--
			}
		})
		reg := &g.Regions[g.Vertices[v].Region]
		if reg.UnfinishedVertices--; reg.UnfinishedVertices == 0 {
			for _, gi := range reg.ConsumedGroups {
				g.Groups[gi].UnfinishedConsumerRegions--
			}
		}
	}
	return nil
}

// MarkConsumable records that a PIPELINED partition has data. It reports
// whether that changed anything.
func (g *Graph) MarkConsumable(p PartitionIndex) bool {
	part := &g.Partitions[p]
	if part.Consumable {
		return false
	}
	part.Consumable = true
	g.Groups[part.Group].UnconsumablePartitions--
	return true
}

// ResetVertex starts a new attempt of v in CREATED. The previous attempt must
// be terminal. The slot of the previous attempt is kept as LastAllocation.
func (g *Graph) ResetVertex(v VertexIndex) error {
	ev := &g.Vertices[v]
	if !ev.Current.State.IsTerminal() {
		return fmt.Errorf("%w: cannot reset %s in state %s", ErrIllegalTransition, g.AttemptID(v), ev.Current.State)
	}
	if ev.Current.State == Finished {
		reg := &g.Regions[ev.Region]
		if reg.UnfinishedVertices == 0 {
			for _, gi := range reg.ConsumedGroups {
				g.Groups[gi].UnfinishedConsumerRegions++
			}
		}
		reg.UnfinishedVertices++
	}
	g.forProduced(v, func(p *IntermediateResultPartition, grp *ConsumedPartitionGroup) {
		if p.Finished {
			p.Finished = false
			grp.UnfinishedPartitions++
		}
		if p.Consumable {
			p.Consumable = false
			grp.UnconsumablePartitions++
		}
	})
	if ev.Current.Allocation != "" {
		ev.LastAllocation, ev.LastLocation = ev.Current.Allocation, ev.Current.Location
	}
	ev.Current = Execution{Attempt: ev.Current.Attempt + 1}
	return nil
}

func (g *Graph) forProduced(v VertexIndex, f func(*IntermediateResultPartition, *ConsumedPartitionGroup)) {
	ev := &g.Vertices[v]
	for _, r := range g.JobVertices[ev.JobVertex].Produced {
		p := &g.Partitions[int(r.FirstPartition)+int(ev.Subtask)]
		f(p, &g.Groups[p.Group])
	}
}

// IsBlocking reports whether group gi carries a BLOCKING result.
func (g *Graph) IsBlocking(gi GroupIndex) bool {
	return g.Results[g.Groups[gi].Result].Type == jobgraph.Blocking
}
