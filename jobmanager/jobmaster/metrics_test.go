package jobmaster

import (
	"encoding/json"
	"slices"
	"testing"

	eg "github.com/gofl/gofl/jobmanager/executiongraph"
	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/rpc/restapi"
)

func TestRecordMetricsKeepsTheNewestPerSubtask(t *testing.T) {
	jm := &JobMaster{metrics: map[subtaskKey]*attemptMetrics{}}
	at := func(attempt int32) *pb.ExecutionAttemptID {
		return &pb.ExecutionAttemptID{Graph: 7, JobVertexId: "v", SubtaskIndex: 1, AttemptNumber: attempt}
	}
	jm.recordMetrics(&pb.TaskIOMetrics{Attempt: at(0), NumRecordsIn: 10}, false)
	jm.recordMetrics(&pb.TaskIOMetrics{Attempt: at(0), NumRecordsIn: 20}, true)
	jm.recordMetrics(&pb.TaskIOMetrics{Attempt: at(0), NumRecordsIn: 15}, false) // a late heartbeat sample
	if m := jm.metricsOf(attemptID(at(0))); m == nil || m.NumRecordsIn != 20 {
		t.Fatalf("after the final sample: %v", m)
	}
	jm.recordMetrics(&pb.TaskIOMetrics{Attempt: at(1), NumRecordsIn: 3}, false)
	jm.recordMetrics(&pb.TaskIOMetrics{Attempt: at(0), NumRecordsIn: 30}, true) // an older attempt's
	if m := jm.metricsOf(attemptID(at(1))); m == nil || m.NumRecordsIn != 3 {
		t.Fatalf("the new attempt's: %v", m)
	}
	if m := jm.metricsOf(attemptID(at(0))); m != nil {
		t.Fatalf("the replaced attempt's metrics are still shown: %v", m)
	}
	jm.recordMetrics(nil, false)
	jm.recordMetrics(&pb.TaskIOMetrics{}, false)
	if len(jm.metrics) != 1 {
		t.Fatalf("metrics without an attempt were kept: %v", jm.metrics)
	}
}

func TestIOMetricsAggregation(t *testing.T) {
	a := subtaskIO(eg.Finished, &pb.TaskIOMetrics{NumRecordsIn: 5, NumRecordsOut: 7, NumBytesIn: 50, NumBytesOut: 70,
		BackPressuredTimeMs: 100, IdleTimeMs: 20, BusyTimeMs: 30})
	b := subtaskIO(eg.Running, &pb.TaskIOMetrics{NumRecordsIn: 1, NumRecordsOut: 2, NumBytesIn: 10, NumBytesOut: 20,
		BackPressuredTimeMs: 1, IdleTimeMs: 2, BusyTimeMs: 3})
	sum := sumIO([]restapi.IOMetricsInfo{a, b})
	want := restapi.IOMetricsInfo{ReadBytes: 60, ReadBytesComplete: true, WriteBytes: 90, WriteBytesComplete: true,
		ReadRecords: 6, ReadRecordsComplete: true, WriteRecords: 9, WriteRecordsComplete: true,
		AccumulatedBackpressuredTime: 101, AccumulatedIdleTime: 22, AccumulatedBusyTime: 33}
	if sum != want {
		t.Fatalf("sum = %+v\nwant  %+v", sum, want)
	}
	// A running subtask that has not reported makes the sums incomplete; a
	// never deployed, cancelled one counts as zeros.
	if s := sumIO([]restapi.IOMetricsInfo{a, subtaskIO(eg.Running, nil)}); s.ReadRecordsComplete || s.WriteBytesComplete || s.ReadRecords != 5 {
		t.Errorf("with a silent running subtask: %+v", s)
	}
	if s := sumIO([]restapi.IOMetricsInfo{a, subtaskIO(eg.Canceled, nil)}); !s.ReadRecordsComplete || !s.WriteRecordsComplete {
		t.Errorf("with a cancelled, never deployed subtask: %+v", s)
	}
	if s := sumIO(nil); !s.ReadRecordsComplete {
		t.Errorf("empty: %+v", s)
	}
}

func TestBackPressureLevels(t *testing.T) {
	for _, tc := range []struct {
		ratio float64
		want  string
	}{{0, "ok"}, {0.10, "ok"}, {0.11, "low"}, {0.5, "low"}, {0.51, "high"}, {1, "high"}} {
		if got := restapi.BackPressureLevel(tc.ratio); got != tc.want {
			t.Errorf("level(%v) = %s, want %s", tc.ratio, got, tc.want)
		}
	}
	if got := backPressure([]subtaskSample{{subtask: 0, state: eg.Running}}); got.Status != "deprecated" || got.Subtasks != nil {
		t.Errorf("without samples: %+v", got)
	}
	got := backPressure([]subtaskSample{
		{subtask: 0, attempt: 1, state: eg.Running, m: &pb.TaskIOMetrics{BackPressuredTimeMsPerSecond: 900, BusyTimeMsPerSecond: 100, TimestampMs: 5}},
		{subtask: 1, state: eg.Running, m: &pb.TaskIOMetrics{BackPressuredTimeMsPerSecond: 300, IdleTimeMsPerSecond: 700, TimestampMs: 9}},
		{subtask: 2, state: eg.Finished, m: &pb.TaskIOMetrics{BackPressuredTimeMsPerSecond: 1000, TimestampMs: 7}},
		{subtask: 3, state: eg.Running},
	})
	want := restapi.JobVertexBackPressureInfo{Status: "ok", BackpressureLevel: "high", EndTimestamp: 9, Subtasks: []restapi.SubtaskBackPressureInfo{
		{Subtask: 0, AttemptNumber: 1, BackpressureLevel: "high", Ratio: 0.9, BusyRatio: 0.1},
		{Subtask: 1, BackpressureLevel: "low", Ratio: 0.3, IdleRatio: 0.7},
		{Subtask: 2, BackpressureLevel: "ok"}, // finished: no longer back-pressured
		{Subtask: 3, BackpressureLevel: "ok"},
	}}
	if got.Status != want.Status || got.BackpressureLevel != want.BackpressureLevel || got.EndTimestamp != want.EndTimestamp || !slices.Equal(got.Subtasks, want.Subtasks) {
		t.Errorf("back pressure = %+v\nwant %+v", got, want)
	}
}

// The JSON field names are Flink's (IOMetricsInfo, JobVertexBackPressureInfo).
func TestMetricsJSONShapes(t *testing.T) {
	keys := func(v any) []string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	io := []string{"accumulated-backpressured-time", "accumulated-busy-time", "accumulated-idle-time",
		"read-bytes", "read-bytes-complete", "read-records", "read-records-complete",
		"write-bytes", "write-bytes-complete", "write-records", "write-records-complete"}
	if got := keys(restapi.IOMetricsInfo{}); !slices.Equal(got, io) {
		t.Errorf("IOMetricsInfo keys %v, want %v", got, io)
	}
	vertex := keys(restapi.JobVertexDetails{})
	if !slices.Contains(vertex, "metrics") {
		t.Errorf("JobVertexDetails keys %v lack metrics", vertex)
	}
	if st := keys(restapi.SubtaskInfo{}); !slices.Contains(st, "metrics") {
		t.Errorf("SubtaskInfo keys %v lack metrics", st)
	}
	if v := keys(restapi.JobVertexInfo{}); slices.Contains(v, "BackPressure") || slices.Contains(v, "backpressure") {
		t.Errorf("the back-pressure view leaks into the vertex JSON: %v", v)
	}
	bp := restapi.JobVertexBackPressureInfo{Status: "ok", BackpressureLevel: "low", EndTimestamp: 1,
		Subtasks: []restapi.SubtaskBackPressureInfo{{Subtask: 0, BackpressureLevel: "low", Ratio: 0.2}}}
	if got, want := keys(bp), []string{"backpressure-level", "end-timestamp", "status", "subtasks"}; !slices.Equal(got, want) {
		t.Errorf("JobVertexBackPressureInfo keys %v, want %v", got, want)
	}
	if got, want := keys(bp.Subtasks[0]), []string{"attempt-number", "backpressure-level", "busyRatio", "idleRatio", "ratio", "subtask"}; !slices.Equal(got, want) {
		t.Errorf("SubtaskBackPressureInfo keys %v, want %v", got, want)
	}
	if got, want := keys(restapi.JobVertexBackPressureInfo{Status: "deprecated"}), []string{"status"}; !slices.Equal(got, want) {
		t.Errorf("deprecated back pressure keys %v, want %v", got, want)
	}
}
