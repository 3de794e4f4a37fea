package resourcemanager

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/internal/version"
	"github.com/gofl/gofl/rpc/pb"
)

// service is the gRPC ResourceManagerService. Handlers validate their input
// on the calling goroutine and hand the rest to the mailbox.
type service struct {
	pb.UnimplementedResourceManagerServiceServer
	rm *ResourceManager
}

// RegisterTaskExecutor registers (or re-registers) a TaskExecutor; see the
// proto for the contract. Called by TaskExecutors; idempotent for the same
// instance_id.
func (s *service) RegisterTaskExecutor(ctx context.Context, req *pb.RegisterTaskExecutorRequest) (*pb.RegisterTaskExecutorResponse, error) {
	if req.GetProtocolVersion() != version.ProtocolVersion {
		return nil, status.Errorf(codes.FailedPrecondition,
			"protocol version mismatch: the TaskExecutor speaks protocol %d, this ResourceManager speaks protocol %d; run the same gofl version on both",
			req.GetProtocolVersion(), version.ProtocolVersion)
	}
	loc := req.GetLocation()
	switch {
	case loc.GetResourceId() == "":
		return nil, status.Error(codes.InvalidArgument, "location.resource_id is required")
	case loc.GetRpcAddress() == "":
		return nil, status.Error(codes.InvalidArgument, "location.rpc_address is required")
	case req.GetNumberOfSlots() < 1:
		return nil, status.Errorf(codes.InvalidArgument, "number_of_slots must be at least 1, got %d", req.GetNumberOfSlots())
	}
	resp, err := call(ctx, s.rm, func() (*pb.RegisterTaskExecutorResponse, error) {
		return s.rm.registerTaskExecutor(req)
	})
	return resp, toStatus(err)
}

// SendSlotReport reconciles a TaskExecutor's slots with its report. Called
// by TaskExecutors after registering and whenever they want; idempotent.
// Fails with NOT_FOUND for an unknown resource or instance.
func (s *service) SendSlotReport(ctx context.Context, req *pb.SendSlotReportRequest) (*pb.Ack, error) {
	_, err := call(ctx, s.rm, func() (struct{}, error) {
		return struct{}{}, s.rm.sendSlotReport(req)
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.Ack{}, nil
}

// DisconnectTaskExecutor unregisters a TaskExecutor at once, e.g. when it
// shuts down. Called by TaskExecutors; idempotent (an unknown resource ID
// succeeds).
func (s *service) DisconnectTaskExecutor(ctx context.Context, req *pb.DisconnectTaskExecutorRequest) (*pb.Ack, error) {
	_, err := call(ctx, s.rm, func() (struct{}, error) {
		s.rm.removeTaskExecutor(req.GetResourceId(), fmt.Sprintf("disconnected by the TaskExecutor: %s", req.GetCause()), true)
		return struct{}{}, nil
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.Ack{}, nil
}

// toStatus passes gRPC status errors through and maps the rest.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	if errors.Is(err, ErrStopped) {
		return status.Error(codes.Unavailable, err.Error())
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.Internal, err.Error())
}
