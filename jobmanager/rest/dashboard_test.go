package rest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/gofl/gofl/jobmanager/rest"
	"github.com/gofl/gofl/jobmanager/rest/resttest"
	"github.com/gofl/gofl/rpc/restapi"
)

func TestDashboardConfig(t *testing.T) {
	for _, c := range []struct {
		opts           rest.Options
		submit, cancel bool
		refresh        int64
	}{
		{rest.Options{Version: "1.2.3"}, true, true, 3000},
		{rest.Options{Version: "1.2.3", DisableSubmit: true, DisableCancel: true, RefreshInterval: 1500 * 1e6}, false, false, 1500},
	} {
		e := newEnv(t, c.opts)
		r := e.do(t, http.MethodGet, "/config", "")
		if r.status != http.StatusOK {
			t.Fatalf("GET /config: %d %s", r.status, r.body)
		}
		wantKeys(t, "/config", r.body, "refresh-interval", "timezone-name", "timezone-offset", "flink-version", "flink-revision", "features")
		var dc restapi.DashboardConfiguration
		if err := json.Unmarshal(r.body, &dc); err != nil {
			t.Fatal(err)
		}
		if dc.Version != "1.2.3" || dc.RefreshInterval != c.refresh || dc.Features.WebSubmit != c.submit || dc.Features.WebCancel != c.cancel {
			t.Errorf("options %+v: /config = %+v", c.opts, dc)
		}
	}
}

func TestJobManagerConfig(t *testing.T) {
	e := newEnv(t, rest.Options{})
	if r := e.do(t, http.MethodGet, "/jobmanager/config", ""); r.status != http.StatusOK || string(r.body) != "[]\n" {
		t.Errorf("no config: %d %s", r.status, r.body)
	}
	entries := []restapi.ConfigEntry{{Key: "parallelism.default", Value: "4"}, {Key: "rest.authentication.token", Value: "******"}}
	e = newEnv(t, rest.Options{Config: entries})
	r := e.do(t, http.MethodGet, "/v1/jobmanager/config", "")
	var got []restapi.ConfigEntry
	if err := json.Unmarshal(r.body, &got); err != nil || r.status != http.StatusOK || len(got) != 2 || got[1] != entries[1] {
		t.Errorf("GET /jobmanager/config: %d %s (%v)", r.status, r.body, err)
	}
}

func TestJobPlan(t *testing.T) {
	e := newEnv(t, rest.Options{})
	id, err := e.d.SubmitJob(context.Background(), resttest.Wordcount(""))
	if err != nil {
		t.Fatal(err)
	}
	var plans []restapi.JobPlan
	r := e.do(t, http.MethodGet, "/jobs/"+id+"/plan", "")
	wantKeys(t, "/plan", r.body, "plan")
	var pr restapi.JobPlanResponse
	if err := json.Unmarshal(r.body, &pr); err != nil {
		t.Fatal(err)
	}
	var jd restapi.JobDetails
	if err := json.Unmarshal(e.do(t, http.MethodGet, "/jobs/"+id, "").body, &jd); err != nil {
		t.Fatal(err)
	}
	plans = append(plans, pr.Plan, jd.Plan)
	for _, p := range plans {
		if p.ID != id || len(p.Nodes) != 3 {
			t.Fatalf("plan %+v", p)
		}
		byID := map[string]restapi.JobPlanNode{}
		for _, n := range p.Nodes {
			byID[n.ID] = n
		}
		if len(byID["source"].Inputs) != 0 || len(byID["count"].Inputs) != 1 || byID["count"].Inputs[0].ID != "source" ||
			byID["count"].Inputs[0].ShipStrategy != "HASH" || byID["count"].Inputs[0].Exchange != "pipelined_bounded" ||
			byID["sink"].Inputs[0].ID != "count" || byID["sink"].Description != "Sink: print" || byID["count"].Parallelism != 4 {
			t.Errorf("plan nodes %+v", p.Nodes)
		}
	}
	if r := e.do(t, http.MethodGet, "/jobs/00000000000000000000000000000009/plan", ""); r.status != http.StatusNotFound {
		t.Errorf("plan of an unknown job: %d", r.status)
	}
}
