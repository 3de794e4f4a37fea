package jobgraph

import (
	"fmt"
	"math/bits"
)

// MaxMaxParallelism is the upper bound of a vertex's max parallelism (the
// number of key groups), as in Flink.
const MaxMaxParallelism = 1 << 15

// VertexID identifies a Vertex within its JobGraph (Flink's JobVertexID).
type VertexID string

// ResultID identifies an intermediate data set (Flink's IntermediateDataSetID).
type ResultID string

// JobType decides the default exchange and scheduling behaviour.
type JobType int

const (
	Streaming JobType = iota + 1
	Batch
)

// DistributionPattern says how producer subtasks connect to consumer subtasks.
type DistributionPattern int

const (
	// Pointwise connects each consumer to a contiguous range of producers
	// (or each producer to a contiguous range of consumers).
	Pointwise DistributionPattern = iota + 1
	// AllToAll connects every consumer to every producer.
	AllToAll
)

// ResultPartitionType says when a produced partition can be consumed.
type ResultPartitionType int

const (
	// Pipelined partitions are consumed while they are produced; producer and
	// consumer run at the same time and so fall into one pipelined region.
	Pipelined ResultPartitionType = iota + 1
	// Blocking partitions are consumed after the producer finished; they
	// separate pipelined regions.
	Blocking
)

// JobGraph is a job's logical plan.
type JobGraph struct {
	JobID string
	Name  string
	Type  JobType
	// Vertices in any order; the ExecutionGraph sorts them topologically.
	Vertices []*Vertex
	// Edges in input order: a target's inputs are numbered by their order here.
	Edges []*Edge
	// Fingerprint identifies the builder's output; runners check it at deploy.
	Fingerprint string
	// Config is job-level configuration shipped to every task.
	Config map[string]string
	// BinaryKey is the blob key ("sha256:<hex>") of the job binary whose
	// runner role runs the tasks; empty for jobs of built-in tasks only.
	BinaryKey string
	// ProgramArgs are the arguments the job's builder ran with.
	ProgramArgs []string
}

// Vertex is one task: a chain of operators run at some parallelism.
type Vertex struct {
	ID               VertexID
	Name             string
	Parallelism      int
	MaxParallelism   int // 0 means derive from parallelism, as Flink does
	SlotSharingGroup string
	CoLocationGroup  string
	Invokable        string
	Operators        []Operator
	Config           []byte
}

// Operator describes one operator of a vertex's chain.
type Operator struct {
	ID     string
	Name   string
	Kind   string
	Config []byte
	// Coordinator names the operator coordinator the JobMaster runs for
	// the operator (source.RegisterCoordinator); empty: none.
	Coordinator       string
	CoordinatorConfig []byte
}

// Edge carries one intermediate data set from Source to Target.
type Edge struct {
	Result        ResultID // "" means derived from the edge's position
	Source        VertexID
	Target        VertexID
	Distribution  DistributionPattern
	PartitionType ResultPartitionType
	ShipStrategy  string
}

// EffectiveMaxParallelism is the vertex's max parallelism, derived when unset
// with Flink's rule: 1.5 × parallelism rounded up to a power of two, within
// [128, 32768].
func (v *Vertex) EffectiveMaxParallelism() int {
	if v.MaxParallelism > 0 {
		return v.MaxParallelism
	}
	return DefaultMaxParallelism(v.Parallelism)
}

// DefaultMaxParallelism is Flink's KeyGroupRangeAssignment.computeDefaultMaxParallelism.
func DefaultMaxParallelism(parallelism int) int {
	n := parallelism + parallelism/2
	if n < 1 {
		n = 1
	}
	p := 1 << bits.Len(uint(n-1))
	return min(max(p, 128), MaxMaxParallelism)
}

// ResultIDOf is the ID of the data set carried by the i-th edge.
func (g *JobGraph) ResultIDOf(i int) ResultID {
	if r := g.Edges[i].Result; r != "" {
		return r
	}
	return ResultID(fmt.Sprintf("%s-%d", g.Edges[i].Source, i))
}

// Vertex returns the vertex with the given ID, or nil.
func (g *JobGraph) Vertex(id VertexID) *Vertex {
	for _, v := range g.Vertices {
		if v.ID == id {
			return v
		}
	}
	return nil
}

func (t JobType) String() string {
	switch t {
	case Streaming:
		return "STREAMING"
	case Batch:
		return "BATCH"
	}
	return fmt.Sprintf("JobType(%d)", int(t))
}

func (d DistributionPattern) String() string {
	switch d {
	case Pointwise:
		return "POINTWISE"
	case AllToAll:
		return "ALL_TO_ALL"
	}
	return fmt.Sprintf("DistributionPattern(%d)", int(d))
}

func (r ResultPartitionType) String() string {
	switch r {
	case Pipelined:
		return "PIPELINED"
	case Blocking:
		return "BLOCKING"
	}
	return fmt.Sprintf("ResultPartitionType(%d)", int(r))
}
