package jobmanager

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/jobmanager/rest"
	"github.com/gofl/gofl/jobmanager/rest/resttest"
)

// web.submit.enable is off by default on application and per-job clusters,
// on by default on session clusters, and an explicit setting wins.
func TestWebSubmitDefaultsByMode(t *testing.T) {
	for _, c := range []struct {
		mode, set string
		want      bool
	}{{conf.ModeSession, "", true}, {conf.ModePerJob, "", false}, {conf.ModeApplication, "", false},
		{conf.ModeApplication, "true", true}, {conf.ModeSession, "false", false}} {
		cfg := conf.NewConfiguration()
		if err := cfg.Set(conf.DeploymentMode.Key(), c.mode, conf.DynamicSource); err != nil {
			t.Fatal(err)
		}
		if c.set != "" {
			if err := cfg.Set(conf.WebSubmitEnable.Key(), c.set, conf.DynamicSource); err != nil {
				t.Fatal(err)
			}
		}
		if got := conf.WebSubmitEnabled(cfg); got != c.want {
			t.Errorf("mode %s, web.submit.enable=%q: enabled %v, want %v", c.mode, c.set, got, c.want)
		}
	}
}

// An application cluster's driver submits through its token although
// web.submit.enable is off there; anyone else gets 403 for submissions and
// uploads.
func TestApplicationDriverPassesTheSubmitGate(t *testing.T) {
	d := resttest.NewDispatcher()
	app := &deployment{mode: conf.ModeApplication, clusterID: "c1", token: "tok", fetched: make(chan struct{}),
		status: ApplicationStatus{Mode: conf.ModeApplication, State: "RUNNING", Jobs: []string{}}}
	h := app.handler(rest.NewHandler(d, zerolog.Nop(), rest.Options{DisableSubmit: true}))
	body := `{"jobId":"","name":"x","type":"JOB_TYPE_STREAMING","vertices":[{"id":"src","invokable":"noop","parallelism":1}]}`
	do := func(method, path, token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		if token != "" {
			r.Header.Set(DriverTokenHeader, token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := do(http.MethodPost, "/jobs", "tok"); w.Code != http.StatusAccepted {
		t.Errorf("the driver's POST /jobs: %d %s", w.Code, w.Body)
	}
	if w := do(http.MethodPost, "/blobs", ""); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "web.submit.enable") {
		t.Errorf("anonymous POST /blobs: %d %s", w.Code, w.Body)
	}
}
