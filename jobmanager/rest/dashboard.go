package rest

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gofl/gofl/rpc/restapi"
)

// DefaultRefreshInterval is how often a dashboard polls, as /config tells it
// (Flink's web.refresh-interval default).
const DefaultRefreshInterval = 3 * time.Second

// dashboardRoutes are the endpoints a dashboard reads besides the job and
// cluster views: its configuration, the cluster's configuration and a job's
// plan.
func (h *handler) dashboardRoutes() {
	h.handle("GET /config", h.dashboardConfig)
	h.handle("GET /jobmanager/config", h.jobManagerConfig)
	h.handle("GET /jobs/{jobid}/plan", h.jobPlan)
	h.handle("GET /jobs/{jobid}/vertices/{vertexid}/watermarks", h.vertexWatermarks)
}

// vertexWatermarks is Flink's watermarks view: each subtask's
// currentInputWatermark ([{"id": "0.currentInputWatermark", "value":
// "..."}]); a subtask without a metrics sample is left out, as Flink does.
func (h *handler) vertexWatermarks(ctx context.Context, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	v, err := h.d.JobVertex(ctx, r.PathValue("jobid"), r.PathValue("vertexid"))
	if err != nil {
		return 0, nil, err
	}
	out := []metricItem{}
	for _, s := range v.Subtasks {
		if wm, ok := s.TaskMetrics["currentInputWatermark"]; ok {
			out = append(out, metricItem{ID: fmt.Sprintf("%d.currentInputWatermark", s.Subtask), Value: formatMetric(wm)})
		}
	}
	return http.StatusOK, out, nil
}

func (h *handler) dashboardConfig(context.Context, http.ResponseWriter, *http.Request) (int, any, error) {
	_, offset := time.Now().Zone()
	return http.StatusOK, restapi.DashboardConfiguration{
		RefreshInterval: h.opts.RefreshInterval.Milliseconds(), TimezoneName: time.Local.String(),
		TimezoneOffset: int64(offset) * 1000, Version: h.opts.Version, Revision: h.opts.Version,
		Features: restapi.DashboardFeatures{WebSubmit: !h.opts.DisableSubmit, WebCancel: !h.opts.DisableCancel},
	}, nil
}

func (h *handler) jobManagerConfig(context.Context, http.ResponseWriter, *http.Request) (int, any, error) {
	cfg := h.opts.Config
	if cfg == nil {
		cfg = []restapi.ConfigEntry{}
	}
	return http.StatusOK, cfg, nil
}

func (h *handler) jobPlan(ctx context.Context, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	j, err := h.d.JobDetails(ctx, r.PathValue("jobid"))
	if err != nil {
		return 0, nil, err
	}
	if j.Plan.Nodes == nil {
		j.Plan.Nodes = []restapi.JobPlanNode{}
	}
	return http.StatusOK, restapi.JobPlanResponse{Plan: j.Plan}, nil
}
