package rest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/gofl/gofl/jobmanager/rest"
	"github.com/gofl/gofl/jobmanager/rest/resttest"
	"github.com/gofl/gofl/rpc/restapi"
)

func TestSavepointEndpoints(t *testing.T) {
	e := newEnv(t, rest.Options{})
	id, err := e.d.SubmitJob(context.Background(), resttest.Wordcount("a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"))
	if err != nil {
		t.Fatal(err)
	}
	r := e.do(t, http.MethodPost, "/jobs/"+id+"/savepoints", `{"target-directory":"file:///sp","cancel-job":false}`)
	var trig restapi.TriggerResponse
	if r.status != http.StatusAccepted || json.Unmarshal(r.body, &trig) != nil || trig.RequestID == "" {
		t.Fatalf("trigger: %d %s", r.status, r.body)
	}
	r = e.do(t, http.MethodGet, "/jobs/"+id+"/savepoints/"+trig.RequestID, "")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"status":{"id":"COMPLETED"}`) ||
		!strings.Contains(string(r.body), `"operation":{"location":"file:///sp/savepoint-a1a1a1-`) {
		t.Errorf("status: %d %s", r.status, r.body)
	}
	e.d.SetSavepointFailure(errors.New("disk full"))
	r = e.do(t, http.MethodPost, "/jobs/"+id+"/stop", `{"targetDirectory":"file:///sp","drain":true}`)
	if r.status != http.StatusAccepted || json.Unmarshal(r.body, &trig) != nil {
		t.Fatalf("stop: %d %s", r.status, r.body)
	}
	r = e.do(t, http.MethodGet, "/jobs/"+id+"/savepoints/"+trig.RequestID, "")
	if !strings.Contains(string(r.body), `"failure-cause":{"class":"java.lang.Exception","stack-trace":"disk full"}`) {
		t.Errorf("failed savepoint: %s", r.body)
	}
	if r := e.do(t, http.MethodGet, "/jobs/"+id+"/savepoints/nope", ""); r.status != http.StatusNotFound {
		t.Errorf("unknown trigger id: %d %s", r.status, r.body)
	}
	if r := e.do(t, http.MethodPost, "/jobs/"+id+"/savepoints", `{"target-dir":"x"}`); r.status != http.StatusBadRequest {
		t.Errorf("unknown field: %d %s", r.status, r.body)
	}
	if r := e.do(t, http.MethodPost, "/jobs/"+unknownJob+"/stop", ``); r.status != http.StatusNotFound {
		t.Errorf("unknown job: %d %s", r.status, r.body)
	}
}

// TestSavepointRequestsOfFlinkClients: the bodies Flink 1.20's CLI sends
// (formatType, a null triggerId) are taken; what gofl does not do is
// refused with 400, not ignored.
func TestSavepointRequestsOfFlinkClients(t *testing.T) {
	e := newEnv(t, rest.Options{})
	id, err := e.d.SubmitJob(context.Background(), resttest.Wordcount("a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, body string
		want       int
	}{
		{"/savepoints", `{"target-directory":"file:///sp","cancel-job":false,"formatType":"CANONICAL","triggerId":null}`, http.StatusAccepted},
		{"/savepoints", `{"target-directory":"file:///sp","formatType":"NATIVE"}`, http.StatusBadRequest},
		{"/savepoints", `{"triggerId":"0123456789abcdef0123456789abcdef"}`, http.StatusBadRequest},
		{"/stop", `{"targetDirectory":"file:///sp","drain":false,"formatType":"NATIVE"}`, http.StatusBadRequest},
		{"/stop", `{"targetDirectory":"file:///sp","drain":false,"formatType":"CANONICAL","triggerId":null}`, http.StatusAccepted},
	} {
		if r := e.do(t, http.MethodPost, "/jobs/"+id+c.path, c.body); r.status != c.want {
			t.Errorf("POST %s %s: %d %s, want %d", c.path, c.body, r.status, r.body, c.want)
		}
	}
}

func TestCheckpointEndpoints(t *testing.T) {
	e := newEnv(t, rest.Options{})
	id, err := e.d.SubmitJob(context.Background(), resttest.Wordcount("a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2"))
	if err != nil {
		t.Fatal(err)
	}
	r := e.do(t, http.MethodGet, "/jobs/"+id+"/checkpoints", "")
	for _, want := range []string{`"counts":{"restored":0,"total":0,"in_progress":0,"completed":0,"failed":0}`, `"history":[]`,
		`"latest":{"completed":null,"savepoint":null,"failed":null,"restored":null}`, `"end_to_end_duration":{"min":0,"max":0,"avg":0}`} {
		if r.status != http.StatusOK || !strings.Contains(string(r.body), want) {
			t.Errorf("checkpoints: %d %s lacks %s", r.status, r.body, want)
		}
	}
	r = e.do(t, http.MethodGet, "/jobs/"+id+"/checkpoints/config", "")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"mode":"exactly_once"`) || !strings.Contains(string(r.body), `"timeout":600000`) {
		t.Errorf("config: %d %s", r.status, r.body)
	}
	if r := e.do(t, http.MethodGet, "/jobs/"+unknownJob+"/checkpoints", ""); r.status != http.StatusNotFound {
		t.Errorf("unknown job: %d", r.status)
	}
}
