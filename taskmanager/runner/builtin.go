package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/failure"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/taskmanager/invokable"
)

// BuiltinExecutor runs the built-in invokables (taskmanager/invokable) as
// goroutines. The gofl binary serves it in runner role, so a job made of
// built-in tasks can name gofl itself as its job binary.
type BuiltinExecutor struct {
	mu    sync.Mutex
	tasks map[string]*builtinTask
	wg    sync.WaitGroup
}

type builtinTask struct {
	attempt  *pb.ExecutionAttemptID
	cancel   context.CancelFunc
	canceled bool
}

// NewBuiltinExecutor returns an executor with no tasks.
func NewBuiltinExecutor() *BuiltinExecutor {
	return &BuiltinExecutor{tasks: map[string]*builtinTask{}}
}

// Submit implements Executor.
func (b *BuiltinExecutor) Submit(_ context.Context, req *pb.SubmitTaskRequest, report func(*pb.RunnerTaskState)) error {
	tdd := req.Tdd
	ti := tdd.GetTaskInformation()
	if ti == nil {
		return errors.New("the deployment has no task information")
	}
	key := attemptKey(tdd.Attempt)
	ctx, cancel := context.WithCancel(context.Background())
	t := &builtinTask{attempt: tdd.Attempt, cancel: cancel}
	b.mu.Lock()
	if b.tasks[key] != nil {
		b.mu.Unlock()
		cancel()
		return fmt.Errorf("task %s is already running", key)
	}
	b.tasks[key] = t
	b.wg.Add(1)
	b.mu.Unlock()
	env := invokable.Env{JobID: req.JobId, JobVertexID: ti.JobVertexId, TaskName: ti.TaskName,
		SubtaskIndex: int(tdd.Attempt.SubtaskIndex), Parallelism: int(ti.NumberOfSubtasks),
		AttemptNumber: int(tdd.Attempt.AttemptNumber), Config: ti.Config}
	go func() {
		defer b.wg.Done()
		err := invokable.Run(ctx, ti.Invokable, env, func(state string) {
			report(&pb.RunnerTaskState{Attempt: tdd.Attempt, State: state})
		})
		b.mu.Lock()
		delete(b.tasks, key)
		canceled := t.canceled
		b.mu.Unlock()
		cancel()
		st := &pb.RunnerTaskState{Attempt: tdd.Attempt, Metrics: &pb.TaskIOMetrics{Attempt: tdd.Attempt}}
		switch {
		case canceled:
			st.State = "CANCELED"
		case err == nil:
			st.State = "FINISHED"
		default:
			st.State, st.Failure = "FAILED", failure.Encode(err)
		}
		report(st)
	}()
	return nil
}

// Cancel implements Executor.
func (b *BuiltinExecutor) Cancel(attempt *pb.ExecutionAttemptID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.tasks[attemptKey(attempt)]; t != nil {
		t.canceled = true
		t.cancel()
	}
}

// TaskMetrics implements MetricsExecutor: built-in tasks exchange no data,
// so their counters are zero.
func (b *BuiltinExecutor) TaskMetrics() []*pb.TaskIOMetrics {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]*pb.TaskIOMetrics, 0, len(b.tasks))
	for _, t := range b.tasks {
		out = append(out, &pb.TaskIOMetrics{Attempt: t.attempt})
	}
	return out
}

// ReleasePartitions implements Executor; built-in tasks produce no data.
func (b *BuiltinExecutor) ReleasePartitions(*pb.ReleasePartitionsRequest) {}

// Close implements Executor.
func (b *BuiltinExecutor) Close() {
	b.mu.Lock()
	for _, t := range b.tasks {
		t.canceled = true
		t.cancel()
	}
	b.mu.Unlock()
	b.wg.Wait()
}

// IsRunner reports whether this process was started as a job runner.
func IsRunner() bool { return os.Getenv(EnvRole) == RoleRunner }

// ServeFromEnv serves ex on the socket the TaskManager named in the
// environment, until the TaskManager shuts the runner down.
func ServeFromEnv(ctx context.Context, info Info, ex Executor, log zerolog.Logger) error {
	socket := os.Getenv(EnvSocket)
	if socket == "" {
		return fmt.Errorf("runner: %s is not set; a runner is started by a TaskManager", EnvSocket)
	}
	if info.JobID == "" {
		info.JobID = os.Getenv(EnvJobID)
	}
	return Serve(ctx, socket, info, ex, log)
}
