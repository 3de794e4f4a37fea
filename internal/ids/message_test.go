package ids

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gofl/gofl/rpc/pb"
)

func TestCheckMessage(t *testing.T) {
	ok := &pb.SubmitTaskRequest{JobId: "0123456789abcdef0123456789abcdef", Tdd: &pb.TaskDeploymentDescriptor{
		Attempt:      &pb.ExecutionAttemptID{JobVertexId: "op"},
		InputGates:   []*pb.InputGateDeploymentDescriptor{{ResultId: "a>b"}},
		AllocationId: "a1"}}
	if err := CheckMessage(ok); err != nil {
		t.Fatalf("a well-formed request: %v", err)
	}
	for name, m := range map[string]*pb.SubmitTaskRequest{
		"job_id":         {JobId: "../x"},
		"job_vertex_id":  {Tdd: &pb.TaskDeploymentDescriptor{Attempt: &pb.ExecutionAttemptID{JobVertexId: "a/b"}}},
		"result_id":      {Tdd: &pb.TaskDeploymentDescriptor{InputGates: []*pb.InputGateDeploymentDescriptor{{ResultId: "x"}, {ResultId: "../r"}}}},
		"job_binary_key": {Tdd: &pb.TaskDeploymentDescriptor{JobInformation: &pb.JobInformation{JobBinaryKey: "sha256:x"}}},
	} {
		err := CheckMessage(m)
		var e *Error
		if !errors.As(err, &e) || !strings.HasSuffix(e.Field, "."+name) {
			t.Errorf("%s: %v; want an *Error on the field", name, err)
		}
	}
}

// Attack surface: made-up IDs on the JobManager's anonymous gRPC port
// (e.g. DisconnectTaskExecutor of "a/../b") are refused before any handler.
func TestUnaryServerInterceptor(t *testing.T) {
	called := false
	h := func(context.Context, any) (any, error) { called = true; return &pb.Ack{}, nil }
	_, err := UnaryServerInterceptor()(context.Background(), &pb.DisconnectTaskExecutorRequest{ResourceId: "a/../b"}, nil, h)
	if status.Code(err) != codes.InvalidArgument || called {
		t.Errorf("bad resource id: %v, handler called %v", err, called)
	}
	if _, err := UnaryServerInterceptor()(context.Background(), &pb.DisconnectTaskExecutorRequest{ResourceId: "127.0.0.1:41-ab"}, nil, h); err != nil || !called {
		t.Errorf("good resource id: %v, handler called %v", err, called)
	}
}
