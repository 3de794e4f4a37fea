// Package jobgraph is the logical plan of a job: what the client submits and
// what the JobManager expands into an ExecutionGraph.
//
// A JobGraph is a DAG of Vertices (each a chain of operators run as one task
// at some parallelism) joined by Edges. Every Edge carries one intermediate
// data set from its source to its target with a DistributionPattern
// (POINTWISE or ALL_TO_ALL) and a ResultPartitionType (PIPELINED or
// BLOCKING), as in Flink. Vertices may name a slot sharing group (subtasks of
// the same index share one slot) and a co-location group (subtasks of the same
// index must share one slot).
//
// Validate collects every problem of a graph, not only the first. Marshal and
// Unmarshal convert to and from the protobuf wire form in rpc/pb.
package jobgraph
