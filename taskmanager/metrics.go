package taskmanager

import (
	"time"

	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/taskmanager/runner"
)

// taskMetrics is the latest I/O metrics sample of a running task, as its
// job runner (proc, nil if none runs) streamed it. Built-in tasks, and
// runner tasks before their first sample, report zeros.
func (te *TaskExecutor) taskMetrics(t *task, proc *runner.Process) *pb.TaskIOMetrics {
	if proc != nil {
		if m := proc.Metrics(t.attempt); m != nil {
			return m
		}
	}
	return &pb.TaskIOMetrics{Attempt: t.attempt, TimestampMs: time.Now().UnixMilli()}
}
