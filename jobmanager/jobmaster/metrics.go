package jobmaster

import (
	"github.com/gofl/gofl/jobgraph"
	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/rpc/restapi"
)

// Task I/O metrics: TaskManagers attach the latest sample of every running
// attempt to their heartbeat answers and an attempt's final counters to its
// terminal state update. The JobMaster keeps the newest per subtask; the
// REST views show those of each subtask's current attempt.

type subtaskKey struct {
	vertex  jobgraph.VertexID
	subtask int32
}

// attemptMetrics is the newest sample of one attempt; final once it came
// with the attempt's terminal state.
type attemptMetrics struct {
	attempt eg.ExecutionAttemptID
	m       *pb.TaskIOMetrics
	final   bool
}

// recordMetrics keeps m if it is the newest of its subtask. It runs on the
// mailbox.
func (jm *JobMaster) recordMetrics(m *pb.TaskIOMetrics, final bool) {
	if m == nil || m.Attempt == nil {
		return
	}
	id := attemptID(m.Attempt)
	k := subtaskKey{vertex: id.JobVertex, subtask: id.Subtask}
	if cur := jm.metrics[k]; cur != nil && cur.attempt.Graph == id.Graph {
		if cur.attempt.Attempt > id.Attempt || (cur.attempt.Attempt == id.Attempt && cur.final && !final) {
			return // an older attempt's, or a heartbeat sample racing the final one
		}
	}
	jm.metrics[k] = &attemptMetrics{attempt: id, m: m, final: final}
}

// metricsOf returns the metrics of the current attempt of a subtask, or nil.
func (jm *JobMaster) metricsOf(id eg.ExecutionAttemptID) *pb.TaskIOMetrics {
	cur := jm.metrics[subtaskKey{vertex: id.JobVertex, subtask: id.Subtask}]
	if cur == nil || cur.attempt != id {
		return nil
	}
	return cur.m
}

// subtaskIO renders one subtask's metrics, m nil if its current attempt
// reported none. As in Flink, a running attempt without metrics makes them
// incomplete; a terminal one without (never deployed) counts as zeros.
func subtaskIO(state eg.ExecutionState, m *pb.TaskIOMetrics) restapi.IOMetricsInfo {
	if m == nil {
		complete := state.IsTerminal()
		return restapi.IOMetricsInfo{ReadBytesComplete: complete, WriteBytesComplete: complete,
			ReadRecordsComplete: complete, WriteRecordsComplete: complete}
	}
	return restapi.IOMetricsInfo{
		ReadBytes: m.NumBytesIn, ReadBytesComplete: true, WriteBytes: m.NumBytesOut, WriteBytesComplete: true,
		ReadRecords: m.NumRecordsIn, ReadRecordsComplete: true, WriteRecords: m.NumRecordsOut, WriteRecordsComplete: true,
		AccumulatedBackpressuredTime: m.BackPressuredTimeMs, AccumulatedIdleTime: m.IdleTimeMs, AccumulatedBusyTime: float64(m.BusyTimeMs),
	}
}

// taskMetrics are a subtask's metrics beyond its I/O counters by Flink's
// names: the per-second rates, the watermarks, and the user metrics as
// "<operator>.<name>" (histograms as Flink's MetricStore has them:
// "<name>_count", "_min", "_max", "_mean", "_median", "_p95", "_p99").
// Nil without a sample.
func taskMetrics(m *pb.TaskIOMetrics) map[string]float64 {
	if m == nil {
		return nil
	}
	out := map[string]float64{
		"numRecordsInPerSecond": m.NumRecordsInPerSecond, "numRecordsOutPerSecond": m.NumRecordsOutPerSecond,
		"numBytesInPerSecond": m.NumBytesInPerSecond, "numBytesOutPerSecond": m.NumBytesOutPerSecond,
		"currentInputWatermark": float64(m.CurrentInputWatermark), "currentOutputWatermark": float64(m.CurrentOutputWatermark),
	}
	for _, u := range m.UserMetrics {
		name := u.Name
		if u.OperatorName != "" {
			name = u.OperatorName + "." + name
		}
		if u.Type != pb.UserMetric_TYPE_HISTOGRAM {
			out[name] = u.Value
			continue
		}
		h := u.Histogram
		for suffix, v := range map[string]float64{"count": float64(h.GetCount()), "min": float64(h.GetMin()), "max": float64(h.GetMax()),
			"mean": h.GetMean(), "median": h.GetP50(), "p95": h.GetP95(), "p99": h.GetP99()} {
			out[name+"_"+suffix] = v
		}
	}
	return out
}

// sumIO adds a subtask's metrics to a vertex's: counters add up, a vertex's
// metrics are complete when every subtask's are.
func sumIO(subtasks []restapi.IOMetricsInfo) restapi.IOMetricsInfo {
	sum := restapi.IOMetricsInfo{ReadBytesComplete: true, WriteBytesComplete: true, ReadRecordsComplete: true, WriteRecordsComplete: true}
	for _, s := range subtasks {
		sum.ReadBytes += s.ReadBytes
		sum.WriteBytes += s.WriteBytes
		sum.ReadRecords += s.ReadRecords
		sum.WriteRecords += s.WriteRecords
		sum.AccumulatedBackpressuredTime += s.AccumulatedBackpressuredTime
		sum.AccumulatedIdleTime += s.AccumulatedIdleTime
		sum.AccumulatedBusyTime += s.AccumulatedBusyTime
		sum.ReadBytesComplete = sum.ReadBytesComplete && s.ReadBytesComplete
		sum.WriteBytesComplete = sum.WriteBytesComplete && s.WriteBytesComplete
		sum.ReadRecordsComplete = sum.ReadRecordsComplete && s.ReadRecordsComplete
		sum.WriteRecordsComplete = sum.WriteRecordsComplete && s.WriteRecordsComplete
	}
	return sum
}

// subtaskSample is what the back-pressure view needs of a subtask.
type subtaskSample struct {
	subtask, attempt int
	state            eg.ExecutionState
	m                *pb.TaskIOMetrics // nil: none reported
}

// backPressure computes Flink's JobVertexBackPressureInfo from the
// subtasks' latest per-second rates. Only running attempts are
// back-pressured; without any sample the view is "deprecated", Flink's
// answer when it has no metrics.
func backPressure(subtasks []subtaskSample) restapi.JobVertexBackPressureInfo {
	out := restapi.JobVertexBackPressureInfo{Status: restapi.BackPressureStatusOK}
	worst := 0.0
	sampled := false
	for _, s := range subtasks {
		info := restapi.SubtaskBackPressureInfo{Subtask: s.subtask, AttemptNumber: s.attempt}
		if s.m != nil {
			sampled = true
			out.EndTimestamp = max(out.EndTimestamp, s.m.TimestampMs)
			if s.state == eg.Running {
				info.Ratio = ratio(s.m.BackPressuredTimeMsPerSecond)
				info.IdleRatio = ratio(s.m.IdleTimeMsPerSecond)
				info.BusyRatio = ratio(s.m.BusyTimeMsPerSecond)
			}
		}
		info.BackpressureLevel = restapi.BackPressureLevel(info.Ratio)
		worst = max(worst, info.Ratio)
		out.Subtasks = append(out.Subtasks, info)
	}
	if !sampled {
		return restapi.JobVertexBackPressureInfo{Status: restapi.BackPressureStatusDeprecated}
	}
	out.BackpressureLevel = restapi.BackPressureLevel(worst)
	return out
}

// ratio turns ms per second into a share in [0, 1].
func ratio(msPerSecond float64) float64 { return min(max(msPerSecond/1000, 0), 1) }
