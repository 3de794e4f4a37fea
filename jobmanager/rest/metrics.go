package rest

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gofl/gofl/metrics"
	"github.com/gofl/gofl/rpc/restapi"
)

// Flink's REST metric endpoints: without ?get the names available, with
// ?get=a,b their values ([{"id": "a", "value": "1"}], values as
// strings); the subtasks endpoint aggregates with ?agg=min,max,sum,avg.

func (h *handler) metricRoutes() {
	h.handle("GET /jobmanager/metrics", h.jobManagerMetrics)
	h.handle("GET /taskmanagers/{tmid}/metrics", h.taskManagerMetrics)
	h.handle("GET /jobs/{jobid}/metrics", h.jobMetrics)
	h.handle("GET /jobs/{jobid}/vertices/{vertexid}/metrics", h.vertexMetrics)
	h.handle("GET /jobs/{jobid}/vertices/{vertexid}/subtasks/metrics", h.subtasksMetrics)
}

// metricItem is one entry of a metrics answer.
type metricItem struct {
	ID    string   `json:"id"`
	Value string   `json:"value,omitempty"`
	Min   *float64 `json:"min,omitempty"`
	Max   *float64 `json:"max,omitempty"`
	Avg   *float64 `json:"avg,omitempty"`
	Sum   *float64 `json:"sum,omitempty"`
}

func metricsAnswer(r *http.Request, values map[string]float64) []metricItem {
	get := r.URL.Query().Get("get")
	out := []metricItem{}
	if get == "" {
		for _, n := range slices.Sorted(maps.Keys(values)) {
			out = append(out, metricItem{ID: n})
		}
		return out
	}
	for _, n := range strings.Split(get, ",") {
		if v, ok := values[strings.TrimSpace(n)]; ok {
			out = append(out, metricItem{ID: strings.TrimSpace(n), Value: formatMetric(v)})
		}
	}
	return out
}

func formatMetric(v float64) string {
	// Watermarks' bounds, as Flink's longs (float64 rounds them).
	switch {
	case v <= math.MinInt64:
		return strconv.FormatInt(math.MinInt64, 10)
	case v >= math.MaxInt64:
		return strconv.FormatInt(math.MaxInt64, 10)
	}
	if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// JobManagerMetrics is the JobManager scope's metrics by Flink's names,
// for REST and the Prometheus reporter.
func JobManagerMetrics(ctx context.Context, d Dispatcher) (map[string]float64, error) {
	ov, err := d.Overview(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{
		"numRegisteredTaskManagers": float64(ov.TaskManagers),
		"numRunningJobs":            float64(ov.JobsRunning),
		"taskSlotsTotal":            float64(ov.SlotsTotal),
		"taskSlotsAvailable":        float64(ov.SlotsAvailable),
	}
	maps.Copy(out, metrics.FlinkStatus(metrics.GoStatus()))
	return out, nil
}

func (h *handler) jobManagerMetrics(ctx context.Context, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	m, err := JobManagerMetrics(ctx, h.d)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, metricsAnswer(r, m), nil
}

// taskManagerMetrics are a TaskManager's Go runtime status from its latest
// heartbeat, by Flink's Status.JVM names and gofl's Status.Go ones.
func (h *handler) taskManagerMetrics(ctx context.Context, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	t, err := h.d.TaskManager(ctx, r.PathValue("tmid"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, metricsAnswer(r, t.StatusMetrics), nil
}

func (h *handler) jobMetrics(ctx context.Context, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	m, err := h.d.JobMetrics(ctx, r.PathValue("jobid"))
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, metricsAnswer(r, m), nil
}

// subtaskMetrics are the I/O metrics of each subtask of a vertex, by name.
func subtaskMetrics(v restapi.JobVertexInfo) []map[string]float64 {
	out := make([]map[string]float64, len(v.Subtasks))
	for i, s := range v.Subtasks {
		m := s.Metrics
		out[i] = map[string]float64{
			"numRecordsIn": float64(m.ReadRecords), "numRecordsOut": float64(m.WriteRecords),
			"numBytesIn": float64(m.ReadBytes), "numBytesOut": float64(m.WriteBytes),
			"accumulatedBackPressuredTimeMs": float64(m.AccumulatedBackpressuredTime),
			"accumulatedIdleTimeMs":          float64(m.AccumulatedIdleTime),
			"accumulatedBusyTimeMs":          m.AccumulatedBusyTime,
		}
	}
	for i, s := range v.Subtasks {
		for n, x := range s.TaskMetrics {
			out[i][n] = x
		}
	}
	// The last sampling interval's shares, as Flink's per-second times.
	for _, b := range v.BackPressure.Subtasks {
		if b.Subtask >= 0 && b.Subtask < len(out) {
			out[b.Subtask]["backPressuredTimeMsPerSecond"] = b.Ratio * 1000
			out[b.Subtask]["busyTimeMsPerSecond"] = b.BusyRatio * 1000
			out[b.Subtask]["idleTimeMsPerSecond"] = b.IdleRatio * 1000
		}
	}
	return out
}

func (h *handler) vertexMetrics(ctx context.Context, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	v, err := h.d.JobVertex(ctx, r.PathValue("jobid"), r.PathValue("vertexid"))
	if err != nil {
		return 0, nil, err
	}
	all := map[string]float64{}
	for i, m := range subtaskMetrics(v) {
		for n, x := range m {
			all[fmt.Sprintf("%d.%s", v.Subtasks[i].Subtask, n)] = x
		}
	}
	return http.StatusOK, metricsAnswer(r, all), nil
}

func (h *handler) subtasksMetrics(ctx context.Context, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	v, err := h.d.JobVertex(ctx, r.PathValue("jobid"), r.PathValue("vertexid"))
	if err != nil {
		return 0, nil, err
	}
	subs := subtaskMetrics(v)
	get := r.URL.Query().Get("get")
	if len(subs) == 0 {
		return http.StatusOK, []metricItem{}, nil
	}
	if get == "" {
		return http.StatusOK, metricsAnswer(r, subs[0]), nil
	}
	aggs := map[string]bool{"min": true, "max": true, "sum": true, "avg": true}
	if a := r.URL.Query().Get("agg"); a != "" {
		aggs = map[string]bool{}
		for _, x := range strings.Split(a, ",") {
			aggs[strings.TrimSpace(x)] = true
		}
	}
	out := []metricItem{}
	for _, n := range strings.Split(get, ",") {
		n = strings.TrimSpace(n)
		if _, ok := subs[0][n]; !ok {
			continue
		}
		mn, mx, sum := math.Inf(1), math.Inf(-1), 0.0
		for _, s := range subs {
			mn, mx, sum = min(mn, s[n]), max(mx, s[n]), sum+s[n]
		}
		avg := sum / float64(len(subs))
		it := metricItem{ID: n}
		for a, p := range map[string]**float64{"min": &it.Min, "max": &it.Max, "sum": &it.Sum, "avg": &it.Avg} {
			if aggs[a] {
				v := map[string]float64{"min": mn, "max": mx, "sum": sum, "avg": avg}[a]
				*p = &v
			}
		}
		out = append(out, it)
	}
	return http.StatusOK, out, nil
}
