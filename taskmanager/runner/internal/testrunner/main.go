// Command testrunner is a job binary for tests: in runner role it serves the
// built-in invokables, optionally claiming another protocol version or
// fingerprint to exercise the TaskManager's checks. On the data port it
// inherited, if any, it answers every connection with its process ID, so
// tests can tell which runner listens on an advertised data address. With
// -checkpoints it takes checkpoints: a trigger for a running task is
// acknowledged at once with one inline operator state.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/taskmanager/runner"
)

func main() {
	protocol := flag.Int("protocol", 0, "runner protocol version to claim (0: the real one)")
	fingerprint := flag.String("fingerprint", "", "graph fingerprint to claim")
	checkpoints := flag.Bool("checkpoints", false, "acknowledge checkpoint triggers")
	flag.Parse()
	if !runner.IsRunner() {
		fmt.Fprintln(os.Stderr, "testrunner: start me as a job runner")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := zerolog.New(os.Stderr).With().Timestamp().Logger()
	lis, _, err := runner.DataListener()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if lis != nil {
		defer lis.Close()
		go func() {
			for {
				conn, err := lis.Accept()
				if err != nil {
					return
				}
				fmt.Fprintf(conn, "%d\n", os.Getpid())
				conn.Close()
			}
		}()
	}
	var ex runner.Executor = runner.NewBuiltinExecutor()
	if *checkpoints {
		ex = &ackingExecutor{Executor: ex, running: map[string]bool{}}
	}
	err = runner.ServeFromEnv(ctx, runner.Info{ProtocolVersion: int32(*protocol), Fingerprint: *fingerprint, SDKVersion: "test"},
		ex, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// ackingExecutor acknowledges every trigger for a running task at once.
type ackingExecutor struct {
	runner.Executor
	report  func(*pb.RunnerCheckpointReport)
	mu      sync.Mutex
	running map[string]bool
}

func key(a *pb.ExecutionAttemptID) string {
	return fmt.Sprintf("%x/%s/%d/%d", a.GetGraph(), a.GetJobVertexId(), a.GetSubtaskIndex(), a.GetAttemptNumber())
}

func (e *ackingExecutor) Submit(ctx context.Context, req *pb.SubmitTaskRequest, report func(*pb.RunnerTaskState)) error {
	k := key(req.GetTdd().GetAttempt())
	e.mu.Lock()
	e.running[k] = true
	e.mu.Unlock()
	return e.Executor.Submit(ctx, req, func(st *pb.RunnerTaskState) {
		switch st.State {
		case "FINISHED", "FAILED", "CANCELED":
			e.mu.Lock()
			delete(e.running, k)
			e.mu.Unlock()
		}
		report(st)
	})
}

func (e *ackingExecutor) SetCheckpointReporter(report func(*pb.RunnerCheckpointReport)) {
	e.report = report
}

func (e *ackingExecutor) isRunning(a *pb.ExecutionAttemptID) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.running[key(a)] {
		return fmt.Errorf("%w: %s", runner.ErrTaskNotFound, key(a))
	}
	return nil
}

func (e *ackingExecutor) TriggerCheckpoint(req *pb.TriggerCheckpointRequest) error {
	if err := e.isRunning(req.Attempt); err != nil {
		return err
	}
	e.report(&pb.RunnerCheckpointReport{Report: &pb.RunnerCheckpointReport_Acknowledge{Acknowledge: &pb.AcknowledgeCheckpointRequest{
		JobId: req.JobId, Attempt: req.Attempt, CheckpointId: req.CheckpointId,
		Operators: []*pb.OperatorSubtaskStateHandle{{OperatorId: "op-" + req.Attempt.GetJobVertexId(), SubtaskIndex: req.Attempt.GetSubtaskIndex(),
			File: &pb.StateFile{Inline: []byte(req.GetOptions().GetTargetLocation())}}},
	}}})
	return nil
}

func (e *ackingExecutor) NotifyCheckpoint(req *pb.NotifyCheckpointRequest) error {
	return e.isRunning(req.Attempt)
}
