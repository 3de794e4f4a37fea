package checkpoint

import (
	"slices"

	"github.com/gofl/gofl/rpc/pb"
)

// Checkpoint statuses, with Flink's names.
const (
	StatusInProgress = "IN_PROGRESS"
	StatusCompleted  = "COMPLETED"
	StatusFailed     = "FAILED"
)

// Stats of one checkpoint or savepoint (Flink's AbstractCheckpointStats).
// Times are Unix milliseconds, durations milliseconds.
type Stats struct {
	ID                 int64
	Status             string
	Savepoint          bool
	Type               pb.CheckpointType
	TriggerTimestamp   int64
	LatestAckTimestamp int64
	StateSize          int64
	CheckpointedSize   int64
	EndToEndDuration   int64
	// AlignmentDuration is the longest alignment of a subtask.
	AlignmentDuration int64
	PersistedData     int64
	Unaligned         bool
	NumSubtasks       int
	NumAcknowledged   int
	ExternalPath      string
	Discarded         bool
	FailureTimestamp  int64
	FailureMessage    string
}

// RestoredStats describes the checkpoint the job restored from.
type RestoredStats struct {
	ID           int64
	ExternalPath string
	Savepoint    bool
}

// Summary is min, max and average over the completed checkpoints.
type Summary struct {
	Min, Max, Sum, Count int64
}

// Avg is the average, 0 without values.
func (s Summary) Avg() int64 {
	if s.Count == 0 {
		return 0
	}
	return s.Sum / s.Count
}

func (s *Summary) add(v int64) {
	if s.Count == 0 || v < s.Min {
		s.Min = v
	}
	if s.Count == 0 || v > s.Max {
		s.Max = v
	}
	s.Sum += v
	s.Count++
}

// StatsSnapshot is what GET /jobs/:id/checkpoints shows.
type StatsSnapshot struct {
	Restored, Total, InProgress, Completed, Failed           int
	StateSize, CheckpointedSize, EndToEndDuration, Alignment Summary
	LatestCompleted, LatestSavepoint, LatestFailed           *Stats
	LatestRestored                                           *RestoredStats
	// History, newest first: in-progress checkpoints and the last ten
	// finished ones.
	History []Stats
}

type statsState struct {
	total, completedN, failedN                     int
	stateSize, ckSize, duration, alignment         Summary
	latestCompleted, latestSavepoint, latestFailed *Stats
	restored                                       *RestoredStats
	restoredN                                      int
	history                                        []*Stats // oldest first
}

func (s *statsState) triggered(id int64, typ pb.CheckpointType, at int64, subtasks, finished int, location string) *Stats {
	st := &Stats{ID: id, Status: StatusInProgress, Savepoint: typ != pb.CheckpointType_CHECKPOINT_TYPE_CHECKPOINT, Type: typ,
		TriggerTimestamp: at, NumSubtasks: subtasks, NumAcknowledged: finished, ExternalPath: location}
	s.total++
	s.history = append(s.history, st)
	s.trim()
	return st
}

func (s *statsState) acknowledged(st *Stats, m *pb.CheckpointMetrics, at int64) {
	st.NumAcknowledged++
	st.LatestAckTimestamp = at
	st.StateSize += m.GetStateSize()
	st.CheckpointedSize += m.GetCheckpointedSize()
	st.PersistedData += m.GetPersistedInFlightBytes()
	st.AlignmentDuration = max(st.AlignmentDuration, m.GetAlignmentDurationMs())
	st.Unaligned = st.Unaligned || m.GetUnaligned()
}

func (s *statsState) completed(st *Stats, at int64) {
	st.Status = StatusCompleted
	st.EndToEndDuration = at - st.TriggerTimestamp
	s.completedN++
	s.stateSize.add(st.StateSize)
	s.ckSize.add(st.CheckpointedSize)
	s.duration.add(st.EndToEndDuration)
	s.alignment.add(st.AlignmentDuration)
	if st.Savepoint {
		s.latestSavepoint = st
	} else {
		s.latestCompleted = st
	}
	s.trim()
}

func (s *statsState) failed(st *Stats, at int64, cause error) {
	st.Status = StatusFailed
	st.FailureTimestamp = at
	st.EndToEndDuration = at - st.TriggerTimestamp
	st.FailureMessage = cause.Error()
	st.Discarded = true
	s.failedN++
	s.latestFailed = st
	s.trim()
}

func (s *statsState) discarded(id int64) {
	for _, st := range s.history {
		if st.ID == id {
			st.Discarded = true
		}
	}
}

// trim keeps in-progress checkpoints and the last historySize others.
func (s *statsState) trim() {
	done := 0
	for i := len(s.history) - 1; i >= 0; i-- {
		if s.history[i].Status == StatusInProgress {
			continue
		}
		if done++; done > historySize {
			s.history = slices.Delete(s.history, i, i+1)
		}
	}
}

// Stats returns a copy of the statistics.
func (c *Coordinator) Stats() StatsSnapshot {
	s := &c.stats
	out := StatsSnapshot{Total: s.total, Completed: s.completedN, Failed: s.failedN, InProgress: len(c.pending),
		StateSize: s.stateSize, CheckpointedSize: s.ckSize, EndToEndDuration: s.duration, Alignment: s.alignment}
	cp := func(st *Stats) *Stats {
		if st == nil {
			return nil
		}
		v := *st
		return &v
	}
	out.LatestCompleted, out.LatestSavepoint, out.LatestFailed = cp(s.latestCompleted), cp(s.latestSavepoint), cp(s.latestFailed)
	if s.restored != nil {
		r := *s.restored
		out.LatestRestored = &r
		out.Restored = s.restoredN
	}
	for i := len(s.history) - 1; i >= 0; i-- {
		out.History = append(out.History, *s.history[i])
	}
	return out
}
