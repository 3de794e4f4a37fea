package simulator

import "github.com/gofl/gofl/jobgraph"

// WordcountJob is the shape of the wordcount example: source → tokenize
// (forward) → count (hash) → sink (forward). A batch job exchanges data
// through BLOCKING partitions, a streaming one through PIPELINED ones.
func WordcountJob(parallelism int, batch bool) *jobgraph.JobGraph {
	typ, exchange := jobgraph.Streaming, jobgraph.Pipelined
	if batch {
		typ, exchange = jobgraph.Batch, jobgraph.Blocking
	}
	v := func(id, name string) *jobgraph.Vertex {
		return &jobgraph.Vertex{ID: jobgraph.VertexID(id), Name: name, Parallelism: parallelism, Invokable: "noop", SlotSharingGroup: "default"}
	}
	e := func(src, dst string, d jobgraph.DistributionPattern, ship string) *jobgraph.Edge {
		return &jobgraph.Edge{Source: jobgraph.VertexID(src), Target: jobgraph.VertexID(dst), Distribution: d, PartitionType: exchange, ShipStrategy: ship}
	}
	return &jobgraph.JobGraph{
		JobID: "00000000000000000000000000000c01", Name: "wordcount", Type: typ, // a well-formed ID: TaskManagers check it
		Vertices: []*jobgraph.Vertex{v("source", "Source: text"), v("tokenize", "Tokenize"), v("count", "Count"), v("sink", "Sink: text")},
		Edges: []*jobgraph.Edge{
			e("source", "tokenize", jobgraph.Pointwise, "forward"),
			e("tokenize", "count", jobgraph.AllToAll, "hash"),
			e("count", "sink", jobgraph.Pointwise, "forward"),
		},
	}
}
