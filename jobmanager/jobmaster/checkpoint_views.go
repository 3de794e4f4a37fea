package jobmaster

import (
	"maps"
	"strings"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/jobmanager/checkpoint"
	"github.com/gofl/gofl/rpc/restapi"
)

// CheckpointView is what REST shows about a job's checkpoints; it stays
// valid after the job ended (the Dispatcher archives it).
type CheckpointView struct {
	Statistics restapi.CheckpointingStatistics
	Config     restapi.CheckpointConfigInfo
	Savepoints map[string]SavepointStatus
}

// CheckpointView returns the job's checkpoint views. It does not block.
func (jm *JobMaster) CheckpointView() CheckpointView {
	jm.ckMu.Lock()
	sps := maps.Clone(jm.savepoints)
	st := jm.ckStats
	jm.ckMu.Unlock()
	return CheckpointView{Statistics: checkpointStatistics(st, jm.start.UnixMilli()), Config: checkpointConfigInfo(jm.ckCfg), Savepoints: sps}
}

// SavepointResponse renders a savepoint status in Flink's shape.
func SavepointResponse(s SavepointStatus) restapi.SavepointStatusResponse {
	if !s.Done {
		return restapi.SavepointStatusResponse{Status: restapi.QueueStatus{ID: restapi.ResultInProgress}}
	}
	op := &restapi.SavepointInfo{Location: s.Location}
	if s.Err != nil {
		op = &restapi.SavepointInfo{FailureCause: &restapi.FailureCause{Class: "org.apache.flink.util.FlinkException", StackTrace: s.Err.Error()}}
	}
	return restapi.SavepointStatusResponse{Status: restapi.QueueStatus{ID: restapi.ResultCompleted}, Operation: op}
}

func checkpointStatistics(s checkpoint.StatsSnapshot, startMs int64) restapi.CheckpointingStatistics {
	mma := func(x checkpoint.Summary) restapi.MinMaxAvg {
		return restapi.MinMaxAvg{Min: x.Min, Max: x.Max, Avg: x.Avg()}
	}
	out := restapi.CheckpointingStatistics{
		Counts: restapi.CheckpointCounts{Restored: int64(s.Restored), Total: int64(s.Total), InProgress: int64(s.InProgress),
			Completed: int64(s.Completed), Failed: int64(s.Failed)},
		Summary: restapi.CheckpointSummary{CheckpointedSize: mma(s.CheckpointedSize), StateSize: mma(s.StateSize),
			EndToEndDuration: mma(s.EndToEndDuration)},
		History: []restapi.CheckpointStatistics{},
	}
	one := func(st *checkpoint.Stats) *restapi.CheckpointStatistics {
		if st == nil {
			return nil
		}
		c := checkpointStats(*st)
		return &c
	}
	out.Latest.Completed, out.Latest.Savepoint, out.Latest.Failed = one(s.LatestCompleted), one(s.LatestSavepoint), one(s.LatestFailed)
	if r := s.LatestRestored; r != nil {
		out.Latest.Restored = &restapi.RestoredCheckpointStatistics{ID: r.ID, RestoreTimestamp: startMs, IsSavepoint: r.Savepoint, ExternalPath: r.ExternalPath}
	}
	for _, h := range s.History {
		out.History = append(out.History, checkpointStats(h))
	}
	return out
}

func checkpointStats(s checkpoint.Stats) restapi.CheckpointStatistics {
	typ := "CHECKPOINT"
	switch {
	case s.Savepoint && strings.Contains(s.Type.String(), "SUSPEND"), s.Savepoint && strings.Contains(s.Type.String(), "TERMINATE"):
		typ = "SYNC_SAVEPOINT"
	case s.Savepoint:
		typ = "SAVEPOINT"
	case s.Unaligned:
		typ = "UNALIGNED_CHECKPOINT"
	}
	class := map[string]string{checkpoint.StatusCompleted: "completed", checkpoint.StatusFailed: "failed", checkpoint.StatusInProgress: "in_progress"}[s.Status]
	return restapi.CheckpointStatistics{Class: class, ID: s.ID, Status: s.Status, IsSavepoint: s.Savepoint, CheckpointType: typ,
		TriggerTimestamp: s.TriggerTimestamp, LatestAckTimestamp: s.LatestAckTimestamp, CheckpointedSize: s.CheckpointedSize,
		StateSize: s.StateSize, EndToEndDuration: s.EndToEndDuration, PersistedData: s.PersistedData,
		NumSubtasks: s.NumSubtasks, NumAcknowledgedSubtasks: s.NumAcknowledged, ExternalPath: s.ExternalPath,
		Discarded: s.Discarded, FailureTimestamp: s.FailureTimestamp, FailureMessage: s.FailureMessage, AlignmentDuration: s.AlignmentDuration}
}

func checkpointConfigInfo(c checkpoint.Config) restapi.CheckpointConfigInfo {
	mode := "exactly_once"
	if c.AtLeastOnce {
		mode = "at_least_once"
	}
	storage := "JobManagerCheckpointStorage"
	if c.CheckpointsDir != "" {
		storage = "FileSystemCheckpointStorage"
	}
	return restapi.CheckpointConfigInfo{Mode: mode, Interval: c.Interval.Milliseconds(), Timeout: c.Timeout.Milliseconds(),
		MinPause: c.MinPause.Milliseconds(), MaxConcurrent: int64(c.MaxConcurrent),
		Externalization: restapi.ExternalizedCheckpointInfo{Enabled: c.Retention != conf.NoExternalizedCheckpoints,
			DeleteOnCancellation: c.Retention == conf.DeleteOnCancellation},
		StateBackend: "HashMapStateBackend", CheckpointStorage: storage, UnalignedCheckpoints: c.Unaligned,
		TolerableFailedCheckpoints: c.TolerableFailures, AlignedCheckpointTimeout: c.AlignedTimeout.Milliseconds(),
		CheckpointsAfterTasksFinish: true}
}
