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
