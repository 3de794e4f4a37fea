package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/gofl/gofl/internal/clustertest"
	"github.com/gofl/gofl/rpc/pb"
)

type syncBuffer = clustertest.SyncBuffer

type cliTestRM struct {
	pb.UnimplementedResourceManagerServiceServer
	registers chan *pb.RegisterTaskExecutorRequest
	reports   chan *pb.SendSlotReportRequest
}

func (r *cliTestRM) RegisterTaskExecutor(_ context.Context, req *pb.RegisterTaskExecutorRequest) (*pb.RegisterTaskExecutorResponse, error) {
	r.registers <- req
	return &pb.RegisterTaskExecutorResponse{ResourceManagerId: "rm-cli", HeartbeatIntervalMs: 10_000, HeartbeatTimeoutMs: 50_000}, nil
}

func (r *cliTestRM) SendSlotReport(_ context.Context, req *pb.SendSlotReportRequest) (*pb.Ack, error) {
	r.reports <- req
	return &pb.Ack{}, nil
}

func (r *cliTestRM) DisconnectTaskExecutor(context.Context, *pb.DisconnectTaskExecutorRequest) (*pb.Ack, error) {
	return &pb.Ack{}, nil
}

func TestTaskManagerRegistersAndStops(t *testing.T) {
	defer goleak.VerifyNone(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rm := &cliTestRM{registers: make(chan *pb.RegisterTaskExecutorRequest, 10), reports: make(chan *pb.SendSlotReportRequest, 10)}
	srv := grpc.NewServer()
	pb.RegisterResourceManagerServiceServer(srv, rm)
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(lis) }()
	defer func() { srv.Stop(); <-served }()
	_, port, _ := net.SplitHostPort(lis.Addr().String())

	app := newApp()
	var stdout, stderr syncBuffer
	app.Writer, app.ErrWriter = &stdout, &stderr
	app.Metadata[environKey] = func() []string { return []string{"GOFL_TASKMANAGER_NUMBEROFTASKSLOTS=3"} }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- app.RunContext(ctx, normalizeArgs([]string{"gofl", "taskmanager",
			"-Djobmanager.rpc.address=127.0.0.1", "-Djobmanager.rpc.port=" + port,
			"-Dtaskmanager.resource-id=tm-cli", "--log-level", "info"}))
	}()
	var req *pb.RegisterTaskExecutorRequest
	select {
	case req = <-rm.registers:
	case err := <-done:
		t.Fatalf("gofl taskmanager ended early: %v\n%s", err, stderr.String())
	case <-time.After(time.Minute):
		t.Fatalf("no registration\n%s", stderr.String())
	}
	select {
	case <-rm.reports: // registered
	case <-time.After(time.Minute):
		t.Fatalf("no slot report\n%s", stderr.String())
	}
	if req.Location.ResourceId != "tm-cli" || req.NumberOfSlots != 3 || !strings.HasPrefix(req.Location.RpcAddress, "127.0.0.1:") {
		t.Errorf("registration = %v", req)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("gofl taskmanager = %v\n%s", err, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("gofl taskmanager did not stop")
	}
	logs := stderr.String()
	for _, want := range []string{`"message":"TaskManager listening"`, `"resource_id":"tm-cli"`, `"address":"` + req.Location.RpcAddress + `"`, "registered at the ResourceManager"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %s:\n%s", want, logs)
		}
	}
}

func TestTaskManagerFailsOnBadConfig(t *testing.T) {
	r := gofl(t, nil, "taskmanager", "-D", "taskmanager.rpc.port=70000")
	if r.code == 0 || !strings.Contains(r.stderr, `taskmanager.rpc.port: "70000" must be between 0 and 65535`) {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
	r = gofl(t, nil, "taskmanager", "extra")
	if r.code == 0 || !strings.Contains(r.stderr, `unexpected argument "extra"`) {
		t.Errorf("exit %d, stderr %q", r.code, r.stderr)
	}
}
