package checkpoint

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gofl/gofl/jobgraph"
	"github.com/gofl/gofl/rpc/pb"
)

// TaskRestoreFor is what subtask (of parallelism) of a vertex whose chain
// has operatorIDs restores from the checkpoint md at location: for each of
// its operators, the handles of every old subtask whose state it may need
// (the runner picks its key groups and redistributes list state). Handles
// holding only keyed state are left out when none of their key groups
// falls in the subtask's range. Nil when none of the operators has state.
func TaskRestoreFor(md *pb.CheckpointMetadata, location string, operatorIDs []string, subtask, parallelism int) *pb.TaskRestore {
	if md == nil {
		return nil
	}
	tr := &pb.TaskRestore{CheckpointId: md.CheckpointId, Location: location}
	for _, op := range md.Operators {
		if !slices.Contains(operatorIDs, op.OperatorId) {
			continue
		}
		maxP := int(op.MaxParallelism)
		for _, h := range op.Subtasks {
			if h.GetMaxParallelism() > 0 {
				maxP = int(h.MaxParallelism)
			}
			if len(h.ListStates) == 0 && len(h.InFlight) == 0 && len(h.KeyGroups) > 0 && maxP > 0 {
				lo, hi := keyGroupRange(subtask, parallelism, maxP)
				if !slices.ContainsFunc(h.KeyGroups, func(k *pb.KeyGroupRegion) bool {
					return int(k.KeyGroup) >= lo && int(k.KeyGroup) <= hi
				}) {
					continue
				}
			}
			tr.Operators = append(tr.Operators, h)
		}
	}
	if len(tr.Operators) == 0 {
		return nil
	}
	return tr
}

// keyGroupRange is runtime.KeyGroupRange (Flink's KeyGroupRangeAssignment):
// the key groups [start, end] of subtask index.
func keyGroupRange(index, parallelism, maxParallelism int) (start, end int) {
	start = (index*maxParallelism + parallelism - 1) / parallelism
	end = ((index+1)*maxParallelism+parallelism-1)/parallelism - 1
	return start, end
}

// ValidateRestore checks that every operator with state in md exists in jg
// (by operator ID), unless allowNonRestored
// (execution.savepoint.ignore-unclaimed-state). The error wraps
// ErrUnknownOperators and names the operators and path.
func ValidateRestore(md *pb.CheckpointMetadata, path string, jg *jobgraph.JobGraph, allowNonRestored bool) error {
	if allowNonRestored {
		return nil
	}
	known := map[string]bool{}
	for _, v := range jg.Vertices {
		for _, op := range v.Operators {
			known[op.ID] = true
		}
	}
	var missing []string
	for _, op := range md.GetOperators() {
		if known[op.OperatorId] || !hasState(op) {
			continue
		}
		if op.OperatorName != "" {
			missing = append(missing, fmt.Sprintf("%q (%s)", op.OperatorName, op.OperatorId))
		} else {
			missing = append(missing, op.OperatorId)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s holds state of operator(s) %s that the job does not have; give the operators their old uids, or allow dropping their state with execution.savepoint.ignore-unclaimed-state (--allowNonRestoredState)",
		ErrUnknownOperators, path, strings.Join(missing, ", "))
}

func hasState(op *pb.OperatorState) bool {
	for _, h := range op.Subtasks {
		if !h.Finished || h.File != nil || len(h.KeyGroups) > 0 || len(h.ListStates) > 0 {
			return true
		}
	}
	return false
}

// RecordRestore counts a restore of the latest completed checkpoint to
// redeployed tasks after a failover (Flink counts every restore, the one at
// the job's start included, which New counts). The JobMaster calls it once
// per batch of redeployments that restore state; without a completed
// checkpoint it does nothing.
func (c *Coordinator) RecordRestore() {
	if c.latest == nil {
		return
	}
	c.stats.restoredN++
	c.stats.restored = &RestoredStats{ID: c.latest.ID, ExternalPath: c.latest.Location, Savepoint: c.latest.Savepoint}
}

// TaskRestore is what a deployment of subtask of vertex v restores from the
// newest completed checkpoint (or the restored one); nil if none.
func (c *Coordinator) TaskRestore(v *jobgraph.Vertex, subtask int) *pb.TaskRestore {
	if c.latest == nil || v == nil {
		return nil
	}
	ids := make([]string, len(v.Operators))
	for i, op := range v.Operators {
		ids[i] = op.ID
	}
	return TaskRestoreFor(c.latest.Metadata, c.latest.Location, ids, subtask, v.Parallelism)
}
