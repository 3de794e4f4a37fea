package rest_test

import (
	"context"
	"math"
	"testing"

	"github.com/gofl/gofl/jobmanager/rest"
	"github.com/gofl/gofl/jobmanager/rest/resttest"
	"github.com/gofl/gofl/rpc/restapi"
)

// The watermarks view lists each subtask's currentInputWatermark as
// Flink's long, exactly at the bounds too; the vertex metrics add the
// task metrics (rates, user metrics) per subtask; a TaskManager's metrics
// are its heartbeat's status by name, and its details carry the hardware.
func TestWatermarksTaskMetricsAndTaskManagerMetrics(t *testing.T) {
	e := newEnv(t, rest.Options{})
	id, err := e.d.SubmitJob(context.Background(), resttest.Wordcount(""))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.d.SetTaskMetrics(id, "count", map[string]float64{"currentInputWatermark": math.MinInt64,
		"numRecordsInPerSecond": 12.5, "Count.seen": 7}); err != nil {
		t.Fatal(err)
	}
	r := e.do(t, "GET", "/jobs/"+id+"/vertices/count/watermarks", "")
	if want := `[{"id":"0.currentInputWatermark","value":"-9223372036854775808"},{"id":"1.currentInputWatermark","value":"-9223372036854775808"},` +
		`{"id":"2.currentInputWatermark","value":"-9223372036854775808"},{"id":"3.currentInputWatermark","value":"-9223372036854775808"}]`; r.status != 200 || string(r.body) != want+"\n" && string(r.body) != want {
		t.Fatalf("watermarks %d %s", r.status, r.body)
	}
	if r := e.do(t, "GET", "/jobs/"+id+"/vertices/source/watermarks", ""); r.status != 200 || string(r.body) != "[]\n" && string(r.body) != "[]" {
		t.Fatalf("watermarks of a vertex without samples: %d %s", r.status, r.body)
	}
	r = e.do(t, "GET", "/jobs/"+id+"/vertices/count/metrics?get=3.numRecordsInPerSecond,2.Count.seen", "")
	if want := `[{"id":"3.numRecordsInPerSecond","value":"12.5"},{"id":"2.Count.seen","value":"7"}]`; string(r.body) != want+"\n" && string(r.body) != want {
		t.Fatalf("vertex metrics %s", r.body)
	}

	e.d.AddTaskManager(restapi.TaskManagerInfo{ID: "tm-1", Hardware: &restapi.HardwareDescription{CPUCores: 2, PhysicalMemory: 1 << 30},
		MemoryConfiguration: &restapi.MemoryConfiguration{}, StatusMetrics: map[string]float64{"Status.JVM.Memory.Heap.Used": 1024}})
	r = e.do(t, "GET", "/taskmanagers/tm-1/metrics?get=Status.JVM.Memory.Heap.Used", "")
	if want := `[{"id":"Status.JVM.Memory.Heap.Used","value":"1024"}]`; string(r.body) != want+"\n" && string(r.body) != want {
		t.Fatalf("TaskManager metrics %s", r.body)
	}
	r = e.do(t, "GET", "/taskmanagers/tm-1", "")
	wantKeys(t, "TaskManager", r.body, "id", "path", "dataPort", "timeSinceLastHeartbeat", "slotsNumber", "freeSlots", "hardware", "memoryConfiguration")
	if r := e.do(t, "GET", "/taskmanagers/nope/metrics", ""); r.status != 404 {
		t.Fatalf("metrics of an unknown TaskManager: %d", r.status)
	}
}
