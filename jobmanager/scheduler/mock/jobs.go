package mock

import (
	"fmt"

	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/jobmanager/simulator"
)

// Vertex IDs of the fixture jobs.
const (
	Source   jobgraph.VertexID = "source"
	Tokenize jobgraph.VertexID = "tokenize"
	Count    jobgraph.VertexID = "count"
	Sink     jobgraph.VertexID = "sink"
)

// SlotSharingGroup is the group every fixture vertex is in.
const SlotSharingGroup = "default"

func vertex(id jobgraph.VertexID, parallelism int) *jobgraph.Vertex {
	return &jobgraph.Vertex{ID: id, Name: string(id), Parallelism: parallelism, SlotSharingGroup: SlotSharingGroup, Invokable: "noop"}
}

func jobType(typ jobgraph.ResultPartitionType) jobgraph.JobType {
	if typ == jobgraph.Blocking {
		return jobgraph.Batch
	}
	return jobgraph.Streaming
}

// TwoVertexJob is the job of Flink's scheduler benchmarks: source → sink,
// both at the given parallelism, in slot sharing group "default", running
// the "noop" invokable, joined by one edge of the given partition type and
// distribution pattern. The job is STREAMING for PIPELINED edges and BATCH
// for BLOCKING ones.
func TwoVertexJob(parallelism int, typ jobgraph.ResultPartitionType, pattern jobgraph.DistributionPattern) *jobgraph.JobGraph {
	return &jobgraph.JobGraph{
		JobID:    fmt.Sprintf("two-vertex-%s-%s-%d", typ, pattern, parallelism),
		Name:     "two-vertex",
		Type:     jobType(typ),
		Vertices: []*jobgraph.Vertex{vertex(Source, parallelism), vertex(Sink, parallelism)},
		Edges: []*jobgraph.Edge{
			{Source: Source, Target: Sink, Distribution: pattern, PartitionType: typ, ShipStrategy: shipStrategy(pattern)},
		},
	}
}

// StreamingJob is TwoVertexJob(parallelism, PIPELINED, ALL_TO_ALL): one
// pipelined region of 2×parallelism vertices.
func StreamingJob(parallelism int) *jobgraph.JobGraph {
	return TwoVertexJob(parallelism, jobgraph.Pipelined, jobgraph.AllToAll)
}

// BatchJob is TwoVertexJob(parallelism, BLOCKING, ALL_TO_ALL): every vertex
// is a pipelined region of its own.
func BatchJob(parallelism int) *jobgraph.JobGraph {
	return TwoVertexJob(parallelism, jobgraph.Blocking, jobgraph.AllToAll)
}

func shipStrategy(pattern jobgraph.DistributionPattern) string {
	if pattern == jobgraph.AllToAll {
		return "HASH"
	}
	return "FORWARD"
}

// Wordcount is the simulator's wordcount shape: source → tokenize (forward)
// → count (hash) → sink (forward); BLOCKING and BATCH with batch, else
// PIPELINED and STREAMING.
func Wordcount(parallelism int, batch bool) *jobgraph.JobGraph {
	return simulator.WordcountJob(parallelism, batch)
}
