package taskmanager

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/mailbox"
	"github.com/gofl/gofl/metrics"
	"github.com/gofl/gofl/rpc/pb"
)

// service is the gRPC face of the TaskExecutor: every handler hands its
// work to the mailbox and waits for the answer.
type service struct {
	pb.UnimplementedTaskExecutorServiceServer
	te *TaskExecutor
}

func onMailbox[T any](ctx context.Context, te *TaskExecutor, fn func() (T, error)) (T, error) {
	v, err := mailbox.Call(ctx, te.mb, fn)
	switch {
	case err == nil:
		return v, nil
	case errors.Is(err, mailbox.ErrClosed):
		return v, status.Error(codes.Unavailable, "TaskManager is shutting down")
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return v, status.FromContextError(err).Err()
	}
	return v, err
}

func ack(ctx context.Context, te *TaskExecutor, fn func() error) (*pb.Ack, error) {
	return onMailbox(ctx, te, func() (*pb.Ack, error) {
		if err := fn(); err != nil {
			return nil, err
		}
		return &pb.Ack{}, nil
	})
}

func (s *service) RequestSlot(ctx context.Context, req *pb.RequestSlotRequest) (*pb.Ack, error) {
	if err := checkRequestSlot(req); err != nil {
		return nil, err
	}
	return ack(ctx, s.te, func() error { return s.te.requestSlot(req) })
}

func (s *service) SubmitTask(ctx context.Context, req *pb.SubmitTaskRequest) (*pb.Ack, error) {
	if err := checkSubmitTask(req); err != nil {
		return nil, err
	}
	return ack(ctx, s.te, func() error { return s.te.submitTask(req) })
}

func (s *service) CancelTask(ctx context.Context, req *pb.CancelTaskRequest) (*pb.CancelTaskResponse, error) {
	if err := checkCancelTask(req); err != nil {
		return nil, err
	}
	return onMailbox(ctx, s.te, func() (*pb.CancelTaskResponse, error) {
		return &pb.CancelTaskResponse{Running: s.te.cancelTaskRPC(req)}, nil
	})
}

func (s *service) FreeSlot(ctx context.Context, req *pb.FreeSlotRequest) (*pb.Ack, error) {
	if err := checkFreeSlot(req); err != nil {
		return nil, err
	}
	return ack(ctx, s.te, func() error { return s.te.freeSlotRPC(req) })
}

func (s *service) ReleasePartitions(ctx context.Context, req *pb.ReleasePartitionsRequest) (*pb.Ack, error) {
	if err := checkReleasePartitions(req); err != nil {
		return nil, err
	}
	return ack(ctx, s.te, func() error { return s.te.releasePartitions(req) })
}

func (s *service) DisconnectJobManager(ctx context.Context, req *pb.DisconnectJobManagerRequest) (*pb.Ack, error) {
	if err := checkJobID("DisconnectJobManagerRequest.job_id", req.JobId); err != nil {
		return nil, err
	}
	return ack(ctx, s.te, func() error { return s.te.disconnectJobManager(req) })
}

// HeartbeatFromResourceManager answers with the slot report and the
// process's Go runtime status. Only the
// ResourceManager this TaskManager is registered at keeps it alive.
// UpdateDelegationTokens implements pb.TaskExecutorServiceServer.
func (s *service) UpdateDelegationTokens(ctx context.Context, req *pb.UpdateDelegationTokensRequest) (*pb.Ack, error) {
	return ack(ctx, s.te, func() error { return s.te.updateDelegationTokens(req.ResourceManagerId, req.Tokens) })
}

func (s *service) HeartbeatFromResourceManager(ctx context.Context, req *pb.HeartbeatRequest) (*pb.TaskManagerHeartbeatResponse, error) {
	te := s.te
	goStatus := metrics.GoStatus() // off the mailbox: it stops the world briefly
	return onMailbox(ctx, te, func() (*pb.TaskManagerHeartbeatResponse, error) {
		te.resourceManagerHeartbeat(req.SenderId)
		return &pb.TaskManagerHeartbeatResponse{SlotReport: te.slotReport(), StatusMetrics: goStatus}, nil
	})
}

// HeartbeatFromJobManager answers with the slot report, the job's running
// attempts with their metrics and the job's partitions held here. It fails
// with NOT_FOUND if the TaskManager has no connection to the job's
// JobMaster and FAILED_PRECONDITION if another JobMaster leads the job
// here. While the registration reply is still on its way it answers
// without counting the heartbeat.
func (s *service) HeartbeatFromJobManager(ctx context.Context, req *pb.HeartbeatRequest) (*pb.TaskManagerHeartbeatResponse, error) {
	if err := checkJobID("HeartbeatRequest.job_id", req.JobId); err != nil {
		return nil, err
	}
	return onMailbox(ctx, s.te, func() (*pb.TaskManagerHeartbeatResponse, error) { return s.te.jobMasterHeartbeat(req) })
}

// TriggerCheckpoint starts a checkpoint at a task running here; NOT_FOUND
// when the attempt does not run here or the job's JobMaster is not the one
// this TaskManager serves. The outcome comes back as AcknowledgeCheckpoint
// or DeclineCheckpoint.
func (s *service) TriggerCheckpoint(ctx context.Context, req *pb.TriggerCheckpointRequest) (*pb.Ack, error) {
	if err := checkCheckpointCall("TriggerCheckpointRequest", req.JobId, req.Attempt); err != nil {
		return nil, err
	}
	return ack(ctx, s.te, func() error { return s.te.triggerCheckpoint(req) })
}

// SendOperatorEventToTask hands a coordinator's event to a task running
// here; NOT_FOUND as for TriggerCheckpoint.
func (s *service) SendOperatorEventToTask(ctx context.Context, req *pb.OperatorEventRequest) (*pb.Ack, error) {
	if err := checkCheckpointCall("OperatorEventRequest", req.JobId, req.Attempt); err != nil {
		return nil, err
	}
	return ack(ctx, s.te, func() error { return s.te.sendOperatorEvent(req) })
}

// NotifyCheckpoint tells a task running here that a checkpoint completed
// or was aborted; NOT_FOUND as for TriggerCheckpoint.
func (s *service) NotifyCheckpoint(ctx context.Context, req *pb.NotifyCheckpointRequest) (*pb.Ack, error) {
	if err := checkCheckpointCall("NotifyCheckpointRequest", req.JobId, req.Attempt); err != nil {
		return nil, err
	}
	return ack(ctx, s.te, func() error { return s.te.notifyCheckpoint(req) })
}
