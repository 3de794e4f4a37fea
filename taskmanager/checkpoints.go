package taskmanager

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/ha"
	"github.com/gofl/gofl/rpc/pb"
)

// checkpointTask finds the running task a checkpoint message is for. Only
// the JobMaster this TaskManager is connected to for the job reaches its
// tasks: without a connection, or for an attempt that does not run here
// (ended, cancelled, never deployed), the answer is NOT_FOUND.
func (te *TaskExecutor) checkpointTask(jobID string, a *pb.ExecutionAttemptID, what string) (*task, error) {
	key := attemptKey(a)
	jc := te.jobs[jobID]
	if jc == nil || !jc.connected {
		return nil, status.Errorf(codes.NotFound, "%s for task %s: this TaskManager is not connected to the JobMaster of job %s", what, key, jobID)
	}
	t := te.tasks[key]
	switch {
	case t == nil || t.jobID != jobID || t.ended:
		return nil, status.Errorf(codes.NotFound, "%s: task %s of job %s does not run here", what, key, jobID)
	case t.canceled:
		return nil, status.Errorf(codes.NotFound, "%s: task %s of job %s is being cancelled", what, key, jobID)
	}
	return t, nil
}

// triggerCheckpoint is TriggerCheckpoint on the mailbox.
func (te *TaskExecutor) triggerCheckpoint(req *pb.TriggerCheckpointRequest) error {
	if te.stopping {
		return status.Error(codes.Unavailable, "TaskManager is shutting down")
	}
	t, err := te.checkpointTask(req.JobId, req.Attempt, fmt.Sprintf("checkpoint %d", req.CheckpointId))
	if err != nil {
		return err
	}
	ct, ok := t.run.(CheckpointingTask)
	if !ok {
		te.relayCheckpointReport(req.JobId, declineReport(req, fmt.Sprintf("task %s runs the built-in invokable %q, which takes no checkpoints", t.key, t.invokable)))
		return nil
	}
	t.log.Debug().Int64("checkpoint_id", req.CheckpointId).Msg("triggering checkpoint")
	ct.TriggerCheckpoint(req)
	return nil
}

// notifyCheckpoint is NotifyCheckpoint on the mailbox; a task that takes
// no checkpoints has nothing to commit.
func (te *TaskExecutor) notifyCheckpoint(req *pb.NotifyCheckpointRequest) error {
	if err := te.checkLeaderSession(req); err != nil {
		return err
	}
	t, err := te.checkpointTask(req.JobId, req.Attempt, fmt.Sprintf("notice of checkpoint %d", req.CheckpointId))
	if err != nil {
		return err
	}
	if ct, ok := t.run.(CheckpointingTask); ok {
		ct.NotifyCheckpoint(req)
	}
	return nil
}

// checkLeaderSession refuses (FAILED_PRECONDITION) a checkpoint notice
// from a leader session this TaskManager saw replaced by a newer one: a
// deposed JobManager that has not noticed yet must never make a sink
// commit. A session not known yet is accepted (the new leader may be
// heard from before the retrieval reports it); the fenced checkpoint store
// keeps a deposed leader from completing checkpoints in the first place.
func (te *TaskExecutor) checkLeaderSession(req *pb.NotifyCheckpointRequest) error {
	if req.LeaderSessionId == "" {
		return nil
	}
	s, err := ha.ParseSessionID(req.LeaderSessionId)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "notice of checkpoint %d: leader session: %v", req.CheckpointId, err)
	}
	if te.deposedSessions[s] {
		te.log.Warn().Str("job_id", req.JobId).Int64("checkpoint_id", req.CheckpointId).Stringer("leader_session", s).
			Msg("refused a checkpoint notice from a deposed leader")
		return status.Errorf(codes.FailedPrecondition, "%v: notice of checkpoint %d of job %s from leader session %s, which lost its leadership to %s",
			ErrDeposedLeader, req.CheckpointId, req.JobId, s, *te.rmSession)
	}
	return nil
}

// sendOperatorEvent is SendOperatorEventToTask on the mailbox.
func (te *TaskExecutor) sendOperatorEvent(req *pb.OperatorEventRequest) error {
	t, err := te.checkpointTask(req.JobId, req.Attempt, fmt.Sprintf("operator event %d", req.Seq))
	if err != nil {
		return err
	}
	ot, ok := t.run.(OperatorEventTask)
	if !ok {
		return status.Errorf(codes.FailedPrecondition, "task %s runs the built-in invokable %q, which has no operator coordinators", t.key, t.invokable)
	}
	ot.SendOperatorEvent(req)
	return nil
}

func declineReport(req *pb.TriggerCheckpointRequest, reason string) *pb.RunnerCheckpointReport {
	return &pb.RunnerCheckpointReport{Report: &pb.RunnerCheckpointReport_Decline{Decline: &pb.DeclineCheckpointRequest{
		JobId: req.JobId, Attempt: req.Attempt, CheckpointId: req.CheckpointId,
		Reason: failureInfo(fmt.Errorf("checkpoint %d declined: %s", req.CheckpointId, reason)),
	}}}
}

// relayCheckpointReport sends an acknowledgement or decline to the job's
// JobMaster through its outbox, in order with the task state updates and
// never replaced by a later report (every acknowledgement counts). Without
// a connection it is dropped: that JobMaster is gone, and with it the
// checkpoint.
func (te *TaskExecutor) relayCheckpointReport(jobID string, r *pb.RunnerCheckpointReport) {
	jc := te.jobs[jobID]
	if jc == nil || !jc.connected {
		te.log.Debug().Str("job_id", jobID).Msg("no JobMaster connection; checkpoint report dropped")
		return
	}
	switch x := r.Report.(type) {
	case *pb.RunnerCheckpointReport_Acknowledge:
		req := x.Acknowledge
		req.JobId = jobID // the runner serves this job only
		key := attemptKey(req.Attempt)
		log := jc.log.With().Str("attempt", key).Int64("checkpoint_id", req.CheckpointId).Logger()
		te.sendReport(jc, fmt.Sprintf("AcknowledgeCheckpoint %d %s", req.CheckpointId, key), log, func(ctx context.Context, c pb.JobMasterServiceClient) error {
			_, err := c.AcknowledgeCheckpoint(ctx, req)
			return err
		})
	case *pb.RunnerCheckpointReport_Decline:
		req := x.Decline
		req.JobId = jobID
		key := attemptKey(req.Attempt)
		log := jc.log.With().Str("attempt", key).Int64("checkpoint_id", req.CheckpointId).Logger()
		log.Info().Str("reason", req.Reason.GetMessage()).Msg("task declined checkpoint")
		te.sendReport(jc, fmt.Sprintf("DeclineCheckpoint %d %s", req.CheckpointId, key), log, func(ctx context.Context, c pb.JobMasterServiceClient) error {
			_, err := c.DeclineCheckpoint(ctx, req)
			return err
		})
	case *pb.RunnerCheckpointReport_OperatorEvent:
		req := x.OperatorEvent
		req.JobId = jobID
		key := attemptKey(req.Attempt)
		log := jc.log.With().Str("attempt", key).Str("operator_id", req.OperatorId).Int64("seq", req.Seq).Logger()
		te.sendReport(jc, fmt.Sprintf("SendOperatorEventToCoordinator %d %s", req.Seq, key), log, func(ctx context.Context, c pb.JobMasterServiceClient) error {
			_, err := c.SendOperatorEventToCoordinator(ctx, req)
			return err
		})
	case *pb.RunnerCheckpointReport_EndOfData:
		req := x.EndOfData
		req.JobId = jobID
		key := attemptKey(req.Attempt)
		log := jc.log.With().Str("attempt", key).Logger()
		te.sendReport(jc, "NotifyEndOfData "+key, log, func(ctx context.Context, c pb.JobMasterServiceClient) error {
			_, err := c.NotifyEndOfData(ctx, req)
			return err
		})
	default:
		te.log.Warn().Str("job_id", jobID).Msg("empty checkpoint report from the job runner; dropped")
	}
}
