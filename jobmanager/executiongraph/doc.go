// Package executiongraph is the parallel, runtime form of a JobGraph, as in
// Flink: each JobGraph vertex becomes an ExecutionJobVertex with one
// ExecutionVertex per subtask, each running one Execution attempt at a time;
// each edge becomes an IntermediateResult with one IntermediateResultPartition
// per producer subtask.
//
// Edges between subtasks are never stored one by one. Every edge's connections
// are split into ConsumedPartitionGroups: a contiguous range of partitions
// that is read in full by a contiguous range of consumer vertices (its
// ConsumerVertexGroup). An ALL_TO_ALL edge is exactly one group; a POINTWISE
// edge is one group per consumer (or per partition when consumers outnumber
// producers). Memory and every traversal are therefore O(vertices +
// partitions), the shape Flink adopted in FLINK-21110.
//
// The package also computes pipelined regions: vertices joined by PIPELINED
// edges, with regions that would depend on each other in a cycle merged.
//
// The graph keeps the counters the scheduler needs to react in O(1): per
// group the partitions not yet finished, per region the vertices not yet
// finished. Only Transition and ResetVertex change them. Nothing here does
// I/O or starts goroutines; one owner (the scheduler) mutates a Graph.
package executiongraph
