package jobmanager_test

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gofl/gofl/conf"
)

// eventTimeBase is testjob's EventTimeBase.
const eventTimeBase = 1_700_000_000_000

// metricValues is a REST metrics answer by id.
func metricValues(t *testing.T, c *cluster, path string) map[string]float64 {
	t.Helper()
	var items []map[string]string
	restGet(t, c, path, &items)
	out := map[string]float64{}
	for _, it := range items {
		v, err := strconv.ParseFloat(it["value"], 64)
		if err != nil {
			t.Fatalf("GET %s: %v in %v", path, err, items)
		}
		out[it["id"]] = v
	}
	return out
}

// TestUserMetricsRatesAndWatermarks runs a job that passes a known
// number of records, at a known rate and with known event times, through
// an operator that counts them into a user counter, records them in a user
// histogram and shows the last in a user gauge, on two TaskManager
// processes with Flink's Prometheus reporter: the scrapes show the user
// metrics in Flink's operator scope with their labels, the per-second
// rates and the watermarks; REST serves the same per subtask, and
// Flink's watermarks view.
func TestUserMetricsRatesAndWatermarks(t *testing.T) {
	parallel(t)
	base := promPorts(20)
	reporter := map[string]string{
		"metrics.reporter.prom.factory.class": conf.PrometheusReporterFactory,
		"metrics.reporter.prom.port":          fmt.Sprintf("%d-%d", base, base+19),
		"taskmanager.memory.managed.size":     "64m",
	}
	c := newCluster(t, reporter)
	for _, id := range []string{"tm-a", "tm-b"} {
		c.startTaskManagerProcessWith(id, 1, reporter)
	}
	c.waitForTaskManagers(2)
	const n, rate = 3000, 1000
	submitted := time.Now()
	id := c.runSDKJob(testJobBinary, 2, "metered-numbers", "--count", strconv.Itoa(n), "--rate", strconv.Itoa(rate),
		"--output", filepath.Join(t.TempDir(), "out"))
	c.waitFor(id, waitLimit, "RUNNING")
	defer func() { _ = c.client.CancelJob(c.ctx, id) }()
	const wantWatermark = eventTimeBase + n - 2 // the last number's time, minus 1 ms (monotonous)

	meter := map[string]string{"job_id": id, "operator_name": "Meter"}
	c.eventually(2*waitLimit, func() error {
		_, tms, err := scrapeRange(base, 20)
		if err != nil {
			return err
		}
		if len(tms) != 2 {
			return fmt.Errorf("scraped TaskManagers %v", keys(tms))
		}
		var seen, values, maxLast, sourceRate float64
		subtasks := map[string]bool{}
		for tm, fams := range tms {
			seen += sum(fams["flink_taskmanager_job_task_operator_seen"], meter)
			if f := fams["flink_taskmanager_job_task_operator_values"]; f != nil {
				for _, m := range f.Metric {
					if matches(m, meter) {
						if m.Summary == nil || label(m, "tm_id") != tm || label(m, "task_name") != "Meter -> Format -> Sink" {
							return fmt.Errorf("histogram %v on %s", m, tm)
						}
						values += float64(m.Summary.GetSampleCount())
						subtasks[label(m, "subtask_index")] = true
					}
				}
			}
			if f := fams["flink_taskmanager_job_task_operator_lastValue"]; f != nil {
				for _, m := range f.Metric {
					if matches(m, meter) {
						maxLast = max(maxLast, value(m))
					}
				}
			}
			sourceRate += sum(fams["flink_taskmanager_job_task_numRecordsOutPerSecond"], map[string]string{"job_id": id}) // only the source's task emits
			if f := fams["flink_taskmanager_job_task_currentInputWatermark"]; f != nil {
				for _, m := range f.Metric {
					if matches(m, map[string]string{"job_id": id, "task_name": "Meter -> Format -> Sink"}) && value(m) != wantWatermark {
						return fmt.Errorf("currentInputWatermark %v of subtask %s, want %d", value(m), label(m, "subtask_index"), int64(wantWatermark))
					}
				}
			}
		}
		if seen != n || values != n || maxLast != n-1 || len(subtasks) != 2 {
			return fmt.Errorf("user metrics: seen %v, histogram count %v over subtasks %v, last value %v; want %d, %d, 2, %d",
				seen, values, keys(subtasks), maxLast, n, n, n-1)
		}
		if sourceRate <= 0 || sourceRate > 1.5*rate {
			return fmt.Errorf("source numRecordsOutPerSecond %v, want in (0, %v]", sourceRate, 1.5*rate)
		}
		return nil
	})

	det, err := c.client.JobDetails(c.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	vid := map[string]string{}
	for _, v := range det.Vertices {
		vid[strings.Fields(v.Name)[0]] = v.ID
	}
	if vid["Meter"] == "" || vid["Numbers"] == "" {
		t.Fatalf("vertices %v", det.Vertices)
	}
	meterPath := "/jobs/" + id + "/vertices/" + vid["Meter"]
	// REST: Flink's <subtask>.<operator>.<name>, histograms by field.
	c.eventually(waitLimit, func() error {
		m := metricValues(t, c, meterPath+"/metrics?get=0.Meter.seen,1.Meter.seen,0.Meter.values_count,1.Meter.values_count,0.Meter.values_max,1.Meter.values_max")
		if m["0.Meter.seen"]+m["1.Meter.seen"] != n || m["0.Meter.values_count"]+m["1.Meter.values_count"] != n ||
			max(m["0.Meter.values_max"], m["1.Meter.values_max"]) != n-1 {
			return fmt.Errorf("REST user metrics %v", m)
		}
		var wms []map[string]string
		restGet(t, c, meterPath+"/watermarks", &wms)
		want := strconv.FormatInt(wantWatermark, 10)
		if len(wms) != 2 || wms[0]["id"] != "0.currentInputWatermark" || wms[0]["value"] != want || wms[1]["value"] != want {
			return fmt.Errorf("watermarks %v, want both %s", wms, want)
		}
		return nil
	})
	// Each TaskManager's machine and Go runtime, by Flink's names.
	for _, tm := range []string{"tm-a", "tm-b"} {
		var info struct {
			Hardware struct {
				CPUCores       int   `json:"cpuCores"`
				PhysicalMemory int64 `json:"physicalMemory"`
				ManagedMemory  int64 `json:"managedMemory"`
			} `json:"hardware"`
			MemoryConfiguration map[string]int64 `json:"memoryConfiguration"`
		}
		restGet(t, c, "/taskmanagers/"+tm, &info)
		if info.Hardware.CPUCores <= 0 || info.Hardware.PhysicalMemory <= 0 || info.MemoryConfiguration == nil ||
			info.Hardware.ManagedMemory != 64<<20 || info.MemoryConfiguration["managedMemory"] != 64<<20 {
			t.Fatalf("TaskManager %s: %+v (want 64 MiB of managed memory)", tm, info)
		}
		c.eventually(waitLimit, func() error {
			m := metricValues(t, c, "/taskmanagers/"+tm+"/metrics?get=Status.JVM.Memory.Heap.Used,Status.Go.Goroutines")
			if m["Status.JVM.Memory.Heap.Used"] <= 0 || m["Status.Go.Goroutines"] <= 0 {
				return fmt.Errorf("TaskManager %s metrics %v", tm, m)
			}
			return nil
		})
	}
	// The source's rate over its count since it started: the rate times
	// the time since submission is at least the count (the span is
	// shorter), and the rate is at most the rate limit's (records come at
	// most that fast).
	m := metricValues(t, c, "/jobs/"+id+"/vertices/"+vid["Numbers"]+"/metrics?get=0.numRecordsOut,0.numRecordsOutPerSecond")
	span := time.Since(submitted).Seconds()
	r, count := m["0.numRecordsOutPerSecond"], m["0.numRecordsOut"]
	if count <= 0 || r*span < 0.8*count || r > 1.5*rate {
		t.Fatalf("rate %v/s over %v records, %.1fs after the submission", r, count, span)
	}
}
