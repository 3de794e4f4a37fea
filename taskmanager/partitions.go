package taskmanager

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/gofl/gofl/rpc/pb"
)

// heldPartition is a BLOCKING result partition a finished task produced
// here, and the job runner incarnation holding its data (0: in-process).
type heldPartition struct {
	key    string
	id     *pb.ResultPartitionIDProto
	runner uint64
}

// partitionKey identifies a result partition: result, index and producer
// attempt, as Flink's ResultPartitionID.
func partitionKey(resultID string, index int32, producer *pb.ExecutionAttemptID) string {
	return fmt.Sprintf("%s/%d/%s", resultID, index, attemptKey(producer))
}

// recordPartitions tracks the BLOCKING partitions a finished task produced
// until the JobMaster releases them, the job's connection is lost, or the
// runner holding them dies. The data itself lives in the job's runner,
// which gets the releases too. A task whose runner already died lost them
// at once.
func (te *TaskExecutor) recordPartitions(t *task, runner uint64) {
	jc := te.jobs[t.jobID]
	if jc == nil {
		return // the JobMaster is gone; nobody will consume or release them
	}
	var lost []*heldPartition
	for _, p := range t.produced {
		if p.PartitionType != pb.ResultPartitionType_RESULT_PARTITION_TYPE_BLOCKING {
			continue
		}
		id := &pb.ResultPartitionIDProto{ResultId: p.ResultId, PartitionIndex: p.PartitionIndex, Producer: t.attempt}
		hp := &heldPartition{key: partitionKey(p.ResultId, p.PartitionIndex, t.attempt), id: id, runner: runner}
		if _, dead := jc.lostRunners[runner]; dead && runner != 0 {
			lost = append(lost, hp)
			continue
		}
		m := te.partitions[t.jobID]
		if m == nil {
			m = map[string]*heldPartition{}
			te.partitions[t.jobID] = m
		}
		m[hp.key] = hp
	}
	if len(lost) > 0 {
		te.reportPartitionsLost(jc, lost, jc.lostRunners[runner])
	}
}

// heldPartitions lists the job's partitions held here, for its
// JobMaster's heartbeat.
func (te *TaskExecutor) heldPartitions(jobID string) []*pb.ResultPartitionIDProto {
	m := te.partitions[jobID]
	if len(m) == 0 {
		return nil
	}
	hs := make([]*heldPartition, 0, len(m))
	for _, hp := range m {
		hs = append(hs, hp)
	}
	slices.SortFunc(hs, func(a, b *heldPartition) int { return strings.Compare(a.key, b.key) })
	out := make([]*pb.ResultPartitionIDProto, len(hs))
	for i, hp := range hs {
		out[i] = hp.id
	}
	return out
}

// runnerLost runs on the mailbox when one of the job's runners died
// without being released: the partitions it held are gone, so the
// JobMaster learns which, to rerun their producers. Its running tasks
// fail on their own.
func (te *TaskExecutor) runnerLost(jobID string, runner uint64, cause error) {
	jc := te.jobs[jobID]
	if jc == nil {
		te.log.Info().Str("job_id", jobID).Uint64("runner", runner).Err(cause).
			Msg("a job runner died after its JobMaster connection closed")
		return
	}
	jc.lostRunners[runner] = cause
	var lost []*heldPartition
	for k, hp := range te.partitions[jobID] {
		if hp.runner == runner {
			lost = append(lost, hp)
			delete(te.partitions[jobID], k)
		}
	}
	if len(te.partitions[jobID]) == 0 {
		delete(te.partitions, jobID)
	}
	jc.log.Warn().Err(cause).Uint64("runner", runner).Int("partitions_lost", len(lost)).Msg("job runner died")
	if len(lost) > 0 {
		te.reportPartitionsLost(jc, lost, cause)
	}
	te.closeJobIfIdle(jobID)
}

// reportPartitionsLost tells the job's JobMaster that partitions it was
// told of are gone, behind the task state updates sent before.
func (te *TaskExecutor) reportPartitionsLost(jc *jobConnection, lost []*heldPartition, cause error) {
	slices.SortFunc(lost, func(a, b *heldPartition) int { return cmp.Compare(a.key, b.key) })
	req := &pb.ReportPartitionsLostRequest{JobId: jc.jobID, ResourceId: te.cfg.ResourceID, Cause: fmt.Sprint(cause)}
	for _, hp := range lost {
		req.Partitions = append(req.Partitions, hp.id)
	}
	log := jc.log.With().Int("partitions", len(lost)).Logger()
	te.sendReport(jc, fmt.Sprintf("ReportPartitionsLost (%d partitions)", len(lost)), log, func(ctx context.Context, c pb.JobMasterServiceClient) error {
		_, err := c.ReportPartitionsLost(ctx, req)
		return err
	})
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
	te.exec.ReleasePartitions(req)
	te.closeJobIfIdle(req.JobId)
	return nil
}
