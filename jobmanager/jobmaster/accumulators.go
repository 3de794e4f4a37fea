package jobmaster

import (
	"errors"
	"fmt"

	"github.com/gofl/gofl/failure"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/jobmanager/scheduler"
	"github.com/gofl/gofl/rpc/restapi"
)

// Accumulators: a task's FINISHED state update carries its accumulator
// results (serialized lists by name, e.g. a collect sink's records). The
// JobMaster keeps the newest attempt's per subtask; once the job ended, the
// results of every subtask whose current attempt FINISHED are concatenated
// per name in vertex and subtask order into the job's execution result.
// Results of attempts that were restarted later are dropped, so a failover
// never duplicates records.

// MaxJobAccumulatorBytes bounds what one job's accumulator results may hold
// in the JobManager (and in every client that fetches the execution
// result, which base64 inflates by a third): the update that would exceed it
// fails its task as non-recoverable.
const MaxJobAccumulatorBytes = 32 << 20

// ErrAccumulatorsTooLarge fails a task whose accumulator results would
// push the job's over MaxJobAccumulatorBytes.
var ErrAccumulatorsTooLarge = errors.New("jobmaster: job accumulator results too large")

type attemptAccumulators struct {
	attempt eg.ExecutionAttemptID
	values  map[string][]byte
	bytes   int
}

// recordAccumulators keeps the accumulator results of a FINISHED attempt,
// replacing an older attempt's of the same subtask. It runs on the mailbox,
// before the state change is applied, and fails (keeping nothing) when the
// job's results would exceed MaxJobAccumulatorBytes.
func (jm *JobMaster) recordAccumulators(id eg.ExecutionAttemptID, values map[string][]byte) error {
	k := subtaskKey{vertex: id.JobVertex, subtask: id.Subtask}
	cur, had := jm.accumulators[k]
	if had && cur.attempt.Graph == id.Graph && cur.attempt.Attempt > id.Attempt {
		return nil // an older attempt's
	}
	n := 0
	for name, v := range values {
		n += len(name) + len(v)
	}
	total := jm.accumulatorBytes + n
	if had {
		total -= cur.bytes
	}
	if total > MaxJobAccumulatorBytes {
		return failure.NonRecoverable(fmt.Errorf("%w: %s reported %d bytes, which would make the job's %d, more than %d; write large results with a file sink instead of Collect",
			ErrAccumulatorsTooLarge, id, n, total, MaxJobAccumulatorBytes))
	}
	jm.accumulatorBytes = total
	jm.accumulators[k] = attemptAccumulators{attempt: id, values: values, bytes: n}
	return nil
}

// isCurrent reports whether id is its subtask's current attempt: only a
// current attempt's results count, a stale one's are dropped.
func (jm *JobMaster) isCurrent(id eg.ExecutionAttemptID) bool {
	_, err := jm.sched.Graph().Lookup(id)
	return err == nil
}

// executionResult is the job's result once it is globally terminal, nil
// before; it is built once, as nothing changes after. It runs on the
// mailbox.
func (jm *JobMaster) executionResult(st scheduler.JobStatus, netRuntimeMs int64) *restapi.JobExecutionResult {
	if !st.IsGloballyTerminal() {
		return nil
	}
	if jm.execResult != nil {
		return jm.execResult
	}
	res := &restapi.JobExecutionResult{ID: jm.jobID, NetRuntime: netRuntimeMs, AccumulatorResults: map[string][]byte{}}
	switch st {
	case scheduler.JobFinished:
		res.ApplicationStatus = "SUCCEEDED"
	case scheduler.JobFailed:
		res.ApplicationStatus = "FAILED"
	case scheduler.JobCanceled:
		res.ApplicationStatus = "CANCELED"
	default:
		res.ApplicationStatus = "UNKNOWN"
	}
	if h := jm.sched.ExceptionHistory(); st == scheduler.JobFailed && len(h) > 0 {
		cause := rootCause(h)
		res.FailureCause = &restapi.FailureCause{Class: errorName(cause), StackTrace: stackTrace(cause)}
	}
	g := jm.sched.Graph()
	for _, jv := range g.JobVertices {
		for i := 0; i < jv.Parallelism; i++ {
			vi := jv.VertexAt(i)
			a, ok := jm.accumulators[subtaskKey{vertex: jv.ID(), subtask: int32(i)}]
			if !ok || a.attempt != g.AttemptID(vi) || g.Vertices[vi].Current.State != eg.Finished {
				continue
			}
			for name, v := range a.values {
				res.AccumulatorResults[name] = append(res.AccumulatorResults[name], v...)
			}
		}
	}
	jm.execResult = res
	return res
}

// rootCause is the failure a FAILED job reports, from its exception
// history (oldest first): of the failures that ended the job (the trailing
// ones that restarted nothing), the first that is not a consumer's missing
// partition data, since the failure of the producer that took the data
// with it (a crashed runner's panic) explains its consumers' lost
// connections; else the last failure.
func rootCause(h []scheduler.FailureRecord) error {
	start := len(h) - 1
	for start > 0 && h[start-1].Restarted == 0 {
		start--
	}
	for _, r := range h[start:] {
		if r.Type != failure.FailurePartitionDataMissing {
			return r.Cause
		}
	}
	return h[len(h)-1].Cause
}
