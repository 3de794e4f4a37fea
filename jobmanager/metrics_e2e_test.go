package jobmanager_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gofl/gofl/conf"
)

// TestPrometheusAndRESTMetrics configures Flink's Prometheus reporter keys
// on a port range and runs a job that passes a known number of records
// and keeps running: the JobManager and each TaskManager process take a
// port of the range, and their scrapes, parsed with Prometheus' own
// parser, show the cluster's counts, the job's restarts, the Go runtime
// and the tasks' record counts equal to the input; Flink's REST metric
// endpoints answer the same.
func TestPrometheusAndRESTMetrics(t *testing.T) {
	parallel(t)
	base := promPorts(20)
	ports := fmt.Sprintf("%d-%d", base, base+19)
	reporter := map[string]string{
		"metrics.reporter.prom.factory.class": conf.PrometheusReporterFactory,
		"metrics.reporter.prom.port":          ports,
	}
	c := newCluster(t, reporter)
	for _, id := range []string{"tm-a", "tm-b"} {
		c.startTaskManagerProcessWith(id, 2, reporter)
	}
	c.waitForTaskManagers(2)
	const n = 1500
	id := c.runSDKJob(testJobBinary, 2, "held-numbers", "--count", strconv.Itoa(n), "--output", filepath.Join(t.TempDir(), "out"))
	c.waitFor(id, waitLimit, "RUNNING")
	defer func() { _ = c.client.CancelJob(context.Background(), id) }()

	scrape := func() (map[string]*dto.MetricFamily, map[string]map[string]*dto.MetricFamily, error) {
		return scrapeRange(base, 20)
	}
	c.eventually(2*waitLimit, func() error {
		jm, tms, err := scrape()
		if err != nil {
			return err
		}
		if jm == nil || len(tms) != 2 || tms["tm-a"] == nil || tms["tm-b"] == nil {
			return fmt.Errorf("scraped a JobManager: %v and TaskManagers %v", jm != nil, keys(tms))
		}
		for name, want := range map[string]float64{"flink_jobmanager_numRegisteredTaskManagers": 2, "flink_jobmanager_numRunningJobs": 1,
			"flink_jobmanager_taskSlotsTotal": 4} {
			if got := gauge(jm[name], nil); got != want {
				return fmt.Errorf("%s = %v, want %v", name, got, want)
			}
		}
		if got := gauge(jm["flink_jobmanager_job_numRestarts"], map[string]string{"job_id": id}); got != 0 {
			return fmt.Errorf("numRestarts of %s = %v", id, got)
		}
		if gauge(jm["flink_jobmanager_Status_Go_Goroutines"], nil) <= 0 {
			return fmt.Errorf("no Go runtime status on the JobManager")
		}
		// The records the filter passed left the first task and reached
		// the sink's, summed over subtasks and TaskManagers.
		out, in := 0.0, 0.0
		for _, fams := range tms {
			out += sum(fams["flink_taskmanager_job_task_numRecordsOut"], map[string]string{"job_id": id, "task_name": "Numbers -> First numbers"})
			in += sum(fams["flink_taskmanager_job_task_numRecordsIn"], map[string]string{"job_id": id, "task_name": "Format -> Sink"})
		}
		if out != n || in != n {
			return fmt.Errorf("records out of the source task %v, into the sink task %v; want %d", out, in, n)
		}
		return nil
	})

	// Flink's REST metric endpoints.
	var jobMetrics []map[string]string
	restGet(t, c, "/jobs/"+id+"/metrics?get=numRestarts,uptime", &jobMetrics)
	if len(jobMetrics) != 2 || jobMetrics[0]["id"] != "numRestarts" || jobMetrics[0]["value"] != "0" {
		t.Fatalf("job metrics %v", jobMetrics)
	}
	var jmMetrics []map[string]string
	restGet(t, c, "/jobmanager/metrics?get=numRegisteredTaskManagers", &jmMetrics)
	if len(jmMetrics) != 1 || jmMetrics[0]["value"] != "2" {
		t.Fatalf("jobmanager metrics %v", jmMetrics)
	}
	det, err := c.client.JobDetails(c.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range det.Vertices {
		if !strings.HasPrefix(v.Name, "Format") {
			continue
		}
		c.eventually(waitLimit, func() error {
			var agg []struct {
				ID  string   `json:"id"`
				Sum *float64 `json:"sum"`
				Min *float64 `json:"min"`
			}
			restGet(t, c, "/jobs/"+id+"/vertices/"+v.ID+"/subtasks/metrics?get=numRecordsIn&agg=sum", &agg)
			if len(agg) != 1 || agg[0].ID != "numRecordsIn" || agg[0].Sum == nil || *agg[0].Sum != n || agg[0].Min != nil {
				return fmt.Errorf("aggregated numRecordsIn %+v", agg)
			}
			return nil
		})
		var names []map[string]string
		restGet(t, c, "/jobs/"+id+"/vertices/"+v.ID+"/metrics", &names)
		if len(names) == 0 || !strings.Contains(fmt.Sprint(names), "0.numRecordsIn") {
			t.Fatalf("vertex metric names %v", names)
		}
		return
	}
	t.Fatalf("no Format vertex in %v", det.Vertices)
}

// scrapeRange scrapes every process listening on the n ports from base
// with Prometheus' parser: the JobManager's families, and each
// TaskManager's by its tm_id.
// promPorts hands out disjoint ranges of n reporter ports to this test
// binary's clusters, which run side by side, below Nomad's dynamic ports
// (20000-32000, handed out by Nomad tests beside these) and the
// ephemeral ones; the start is random so two test binaries seldom meet.
func promPorts(n int) int {
	promPortsMu.Lock()
	defer promPortsMu.Unlock()
	if promPortsNext == 0 || promPortsNext+n > 20000 {
		promPortsNext = 10000 + rand.IntN(5000)
	}
	base := promPortsNext
	promPortsNext += n
	return base
}

var (
	promPortsMu   sync.Mutex
	promPortsNext int
)

func scrapeRange(base, n int) (jm map[string]*dto.MetricFamily, tms map[string]map[string]*dto.MetricFamily, err error) {
	tms = map[string]map[string]*dto.MetricFamily{}
	for p := base; p < base+n; p++ {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", p))
		if err != nil {
			continue
		}
		// Another test's HTTP server may hold a port of the range (the
		// scripts' Kafka, HDFS and ZooKeeper pick theirs at random too).
		// A reporter answers 200 in Prometheus' text format, whose
		// content type names its version; its parse errors are ours.
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=") {
			resp.Body.Close()
			continue
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, perr := parser.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		if perr != nil {
			return nil, nil, fmt.Errorf("port %d: %w", p, perr)
		}
		if _, ok := fams["flink_jobmanager_numRegisteredTaskManagers"]; ok {
			jm = fams
			continue
		}
		if f := fams["flink_taskmanager_Status_Go_Goroutines"]; f != nil {
			tms[label(f.Metric[0], "tm_id")] = fams
		}
	}
	return jm, tms, nil
}

func restGet(t *testing.T, c *cluster, path string, v any) {
	t.Helper()
	resp, err := http.Get("http://" + c.jm.RESTAddress + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func matches(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		if label(m, k) != v {
			return false
		}
	}
	return true
}

func value(m *dto.Metric) float64 {
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// gauge is the value of the one metric of f matching want (-1: none).
func gauge(f *dto.MetricFamily, want map[string]string) float64 {
	if f == nil {
		return -1
	}
	for _, m := range f.Metric {
		if matches(m, want) {
			return value(m)
		}
	}
	return -1
}

func sum(f *dto.MetricFamily, want map[string]string) float64 {
	total := 0.0
	if f != nil {
		for _, m := range f.Metric {
			if matches(m, want) {
				total += value(m)
			}
		}
	}
	return total
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
