package dispatcher

import (
	"context"

	"github.com/gofl/gofl/rpc/restapi"
)

// JobMetrics implements rest.Dispatcher: the job's metrics by Flink's
// names (the job scope of the JobManager).
func (d *Dispatcher) JobMetrics(ctx context.Context, jobID string) (map[string]float64, error) {
	v, err := d.lookup(ctx, jobID)
	if err != nil {
		return nil, err
	}
	s, err := v.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{"numRestarts": float64(s.NumRestarts)}
	det := s.Details
	if det.State == "RUNNING" {
		out["uptime"] = float64(det.Now - det.Timestamps["RUNNING"])
	} else {
		out["uptime"] = 0
	}
	cs := v.checkpointView().Statistics
	checkpointMetrics(cs, out)
	return out, nil
}

// checkpointMetrics adds Flink's checkpoint metrics of the job scope.
func checkpointMetrics(cs restapi.CheckpointingStatistics, out map[string]float64) {
	out["totalNumberOfCheckpoints"] = float64(cs.Counts.Total)
	out["numberOfInProgressCheckpoints"] = float64(cs.Counts.InProgress)
	out["numberOfCompletedCheckpoints"] = float64(cs.Counts.Completed)
	out["numberOfFailedCheckpoints"] = float64(cs.Counts.Failed)
	last := cs.Latest.Completed
	if last == nil {
		out["lastCheckpointDuration"], out["lastCheckpointSize"], out["lastCheckpointFullSize"] = -1, -1, -1
		return
	}
	out["lastCheckpointDuration"] = float64(last.EndToEndDuration)
	out["lastCheckpointSize"] = float64(last.CheckpointedSize)
	out["lastCheckpointFullSize"] = float64(last.StateSize)
}
