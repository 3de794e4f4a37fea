package taskmanager

import (
	"context"
	"fmt"

	"github.com/gofl/gofl/internal/mailbox"
	"github.com/gofl/gofl/rpc/pb"
)

// partitionKey identifies a result partition: result, index and producer
// attempt, as Flink's ResultPartitionID.
func partitionKey(resultID string, index int32, producer *pb.ExecutionAttemptID) string {
	return fmt.Sprintf("%s/%d/%s", resultID, index, attemptKey(producer))
}

// recordPartitions tracks the BLOCKING partitions a finished task produced
// until the JobMaster releases them (or the job's connection is lost).
// The data itself lives in the job's runner, which gets the releases too.
func (te *TaskExecutor) recordPartitions(t *task) {
	for _, p := range t.produced {
		if p.PartitionType != pb.ResultPartitionType_RESULT_PARTITION_TYPE_BLOCKING {
			continue
		}
		m := te.partitions[t.jobID]
		if m == nil {
			m = map[string]*pb.ResultPartitionIDProto{}
			te.partitions[t.jobID] = m
		}
		id := &pb.ResultPartitionIDProto{ResultId: p.ResultId, PartitionIndex: p.PartitionIndex, Producer: t.attempt}
		m[partitionKey(p.ResultId, p.PartitionIndex, t.attempt)] = id
	}
}

// releasePartitions is ReleasePartitions on the mailbox; unknown partitions
// are ignored.
func (te *TaskExecutor) releasePartitions(req *pb.ReleasePartitionsRequest) error {
	m := te.partitions[req.JobId]
	n := 0
	for _, p := range req.Partitions {
		k := partitionKey(p.ResultId, p.PartitionIndex, p.Producer)
		if _, ok := m[k]; ok {
			delete(m, k)
			n++
		}
	}
	if len(m) == 0 {
		delete(te.partitions, req.JobId)
	}
	te.log.Debug().Str("job_id", req.JobId).Int("released", n).Int("requested", len(req.Partitions)).Msg("partitions released")
	if proc := te.runners.running(req.JobId); proc != nil {
		// The runner holds the data; forward off the mailbox.
		mailbox.Go(te.mb, func(context.Context) (struct{}, error) {
			ctx, cancel := context.WithTimeout(context.Background(), te.cfg.RPCTimeout)
			defer cancel()
			return struct{}{}, proc.ReleasePartitions(ctx, req)
		}, func(_ struct{}, err error) {
			if err != nil {
				te.log.Debug().Err(err).Str("job_id", req.JobId).Msg("forwarding the partition release to the job runner failed")
			}
		})
	}
	te.closeJobIfIdle(req.JobId)
	return nil
}
