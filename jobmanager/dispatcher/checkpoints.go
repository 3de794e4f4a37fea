package dispatcher

import (
	"context"
	"errors"
	"fmt"

	"github.com/gofl/gofl/jobmanager/jobmaster"
	"github.com/gofl/gofl/rpc/restapi"
)

func (v view) checkpointView() jobmaster.CheckpointView {
	if v.checkpoints != nil {
		return *v.checkpoints
	}
	return v.jm.CheckpointView()
}

// CheckpointStatistics implements rest.Dispatcher.
func (d *Dispatcher) CheckpointStatistics(ctx context.Context, jobID string) (restapi.CheckpointingStatistics, error) {
	v, err := d.lookup(ctx, jobID)
	if err != nil {
		return restapi.CheckpointingStatistics{}, err
	}
	return v.checkpointView().Statistics, nil
}

// CheckpointConfig implements rest.Dispatcher.
func (d *Dispatcher) CheckpointConfig(ctx context.Context, jobID string) (restapi.CheckpointConfigInfo, error) {
	v, err := d.lookup(ctx, jobID)
	if err != nil {
		return restapi.CheckpointConfigInfo{}, err
	}
	return v.checkpointView().Config, nil
}

// TriggerSavepoint implements rest.Dispatcher. cancelJob (Flink's
// deprecated cancel-job) stops the job after the savepoint, as
// stop-with-savepoint does.
func (d *Dispatcher) TriggerSavepoint(ctx context.Context, jobID, dir string, cancelJob bool) (string, error) {
	return d.savepoint(ctx, jobID, dir, cancelJob, false)
}

// StopWithSavepoint implements rest.Dispatcher.
func (d *Dispatcher) StopWithSavepoint(ctx context.Context, jobID, dir string, drain bool) (string, error) {
	return d.savepoint(ctx, jobID, dir, true, drain)
}

func (d *Dispatcher) savepoint(ctx context.Context, jobID, dir string, stop, drain bool) (string, error) {
	v, err := d.lookup(ctx, jobID)
	if err != nil {
		return "", err
	}
	if v.archived != nil {
		return "", fmt.Errorf("%w: job %s already ended %s", restapi.ErrBadRequest, jobID, v.archived.Overview.State)
	}
	id, err := v.jm.TriggerSavepoint(ctx, dir, stop, drain)
	if errors.Is(err, jobmaster.ErrJobEnded) {
		return "", fmt.Errorf("%w: %w", restapi.ErrBadRequest, err)
	}
	return id, err
}

// SavepointStatus implements rest.Dispatcher.
func (d *Dispatcher) SavepointStatus(ctx context.Context, jobID, requestID string) (restapi.SavepointStatusResponse, error) {
	v, err := d.lookup(ctx, jobID)
	if err != nil {
		return restapi.SavepointStatusResponse{}, err
	}
	s, ok := v.checkpointView().Savepoints[requestID]
	if !ok {
		return restapi.SavepointStatusResponse{}, fmt.Errorf("%w: job %s has no savepoint %s", restapi.ErrOperationNotFound, jobID, requestID)
	}
	return jobmaster.SavepointResponse(s), nil
}
