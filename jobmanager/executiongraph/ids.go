package executiongraph

import (
	"fmt"

	"github.com/gofl/gofl/jobgraph"
)

// VertexIndex indexes Graph.Vertices. Vertices are laid out job vertex by job
// vertex in topological order, subtasks consecutive, so a lower index never
// consumes from a higher one.
type VertexIndex int32

// PartitionIndex indexes Graph.Partitions.
type PartitionIndex int32

// GroupIndex indexes Graph.Groups.
type GroupIndex int32

// RegionIndex indexes Graph.Regions.
type RegionIndex int32

// ExecutionAttemptID identifies one attempt of one subtask of one graph
// instance. Graph distinguishes attempts of a replaced ExecutionGraph.
type ExecutionAttemptID struct {
	Graph     uint64
	JobVertex jobgraph.VertexID
	Subtask   int32
	Attempt   int32
}

func (a ExecutionAttemptID) String() string {
	return fmt.Sprintf("%s#%d.%d@%x", a.JobVertex, a.Subtask, a.Attempt, a.Graph)
}

// ResultPartitionID identifies one partition as produced by one attempt;
// a restarted producer produces a new ResultPartitionID.
type ResultPartitionID struct {
	Result    jobgraph.ResultID
	Partition int32
	Producer  ExecutionAttemptID
}

func (p ResultPartitionID) String() string {
	return fmt.Sprintf("%s[%d]@%s", p.Result, p.Partition, p.Producer)
}

// AllocationID identifies a slot allocation, as issued by the ResourceManager.
type AllocationID string

// TaskManagerLocation says where a TaskManager is and how its data plane is
// reached.
type TaskManagerLocation struct {
	ID          string
	Host        string
	DataAddress string
}
