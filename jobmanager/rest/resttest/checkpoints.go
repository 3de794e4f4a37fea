package resttest

import (
	"context"
	"fmt"

	"github.com/gofl/gofl/rpc/restapi"
)

// SetSavepointFailure makes the following savepoints fail with err (nil:
// succeed).
func (d *Dispatcher) SetSavepointFailure(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.savepointErr = err
}

// CheckpointStatistics returns empty statistics for a known job.
func (d *Dispatcher) CheckpointStatistics(ctx context.Context, jobID string) (restapi.CheckpointingStatistics, error) {
	if err := d.known(ctx, jobID); err != nil {
		return restapi.CheckpointingStatistics{}, err
	}
	return restapi.CheckpointingStatistics{History: []restapi.CheckpointStatistics{}}, nil
}

// CheckpointConfig returns Flink's defaults for a known job.
func (d *Dispatcher) CheckpointConfig(ctx context.Context, jobID string) (restapi.CheckpointConfigInfo, error) {
	if err := d.known(ctx, jobID); err != nil {
		return restapi.CheckpointConfigInfo{}, err
	}
	return restapi.CheckpointConfigInfo{Mode: "exactly_once", Timeout: 600000, MaxConcurrent: 1, StateBackend: "HashMapStateBackend",
		CheckpointStorage: "JobManagerCheckpointStorage", CheckpointsAfterTasksFinish: true}, nil
}

// TriggerSavepoint completes a savepoint into dir at once; with cancelJob
// the job ends FINISHED.
func (d *Dispatcher) TriggerSavepoint(ctx context.Context, jobID, dir string, cancelJob bool) (string, error) {
	return d.savepoint(ctx, jobID, dir, cancelJob)
}

// StopWithSavepoint completes a savepoint at once and ends the job FINISHED.
func (d *Dispatcher) StopWithSavepoint(ctx context.Context, jobID, dir string, _ bool) (string, error) {
	return d.savepoint(ctx, jobID, dir, true)
}

func (d *Dispatcher) savepoint(ctx context.Context, jobID, dir string, stop bool) (string, error) {
	if err := d.enter(ctx); err != nil {
		return "", err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	j, err := d.get(jobID)
	if err != nil {
		return "", err
	}
	if terminal(j.state) {
		return "", fmt.Errorf("%w: job %s is %s", restapi.ErrBadRequest, jobID, j.state)
	}
	m := d.savepoints
	id := fmt.Sprintf("%032x", len(m)+1)
	op := &restapi.SavepointInfo{Location: fmt.Sprintf("%s/savepoint-%.6s-%012x", dir, jobID, len(m)+1)}
	if ferr := d.savepointErr; ferr != nil {
		op = &restapi.SavepointInfo{FailureCause: &restapi.FailureCause{Class: "java.lang.Exception", StackTrace: ferr.Error()}}
	} else if stop {
		j.state, j.end = StateFinished, d.now().UnixMilli()
	}
	m[jobID+"/"+id] = restapi.SavepointStatusResponse{Status: restapi.QueueStatus{ID: restapi.ResultCompleted}, Operation: op}
	return id, nil
}

// SavepointStatus answers for a request of TriggerSavepoint or
// StopWithSavepoint.
func (d *Dispatcher) SavepointStatus(ctx context.Context, jobID, requestID string) (restapi.SavepointStatusResponse, error) {
	if err := d.known(ctx, jobID); err != nil {
		return restapi.SavepointStatusResponse{}, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.savepoints[jobID+"/"+requestID]
	if !ok {
		return s, fmt.Errorf("%w: %s", restapi.ErrOperationNotFound, requestID)
	}
	return s, nil
}

func (d *Dispatcher) known(ctx context.Context, jobID string) error {
	if err := d.enter(ctx); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	_, err := d.get(jobID)
	return err
}

// JobMetrics reports a known job with no restarts and no checkpoints.
func (d *Dispatcher) JobMetrics(ctx context.Context, jobID string) (map[string]float64, error) {
	if err := d.known(ctx, jobID); err != nil {
		return nil, err
	}
	return map[string]float64{"numRestarts": 0, "totalNumberOfCheckpoints": 0, "numberOfCompletedCheckpoints": 0,
		"numberOfFailedCheckpoints": 0, "lastCheckpointDuration": -1}, nil
}
