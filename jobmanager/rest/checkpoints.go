package rest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/gofl/gofl/rpc/restapi"
)

func (h *handler) checkpointStatistics(ctx context.Context, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	s, err := h.d.CheckpointStatistics(ctx, r.PathValue("jobid"))
	if s.History == nil {
		s.History = []restapi.CheckpointStatistics{}
	}
	return http.StatusOK, s, err
}

func (h *handler) checkpointConfig(ctx context.Context, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	c, err := h.d.CheckpointConfig(ctx, r.PathValue("jobid"))
	return http.StatusOK, c, err
}

// triggerSavepoint is POST /jobs/:jobid/savepoints {"target-directory",
// "cancel-job"} -> 202 {"request-id"}.
func (h *handler) triggerSavepoint(ctx context.Context, w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req restapi.SavepointTriggerRequest
	if err := h.decodeOptional(w, r, &req); err != nil {
		return 0, nil, err
	}
	if err := checkSavepointOptions(req.SavepointRequestOptions); err != nil {
		return 0, nil, err
	}
	if msg, no := h.refused(gateCancel, r); no && req.CancelJob {
		return http.StatusForbidden, restapi.ErrorResponse{Errors: []string{msg}}, nil
	}
	id, err := h.d.TriggerSavepoint(ctx, r.PathValue("jobid"), req.TargetDirectory, req.CancelJob)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, restapi.TriggerResponse{RequestID: id}, nil
}

// stopWithSavepoint is POST /jobs/:jobid/stop {"targetDirectory","drain"}
// -> 202 {"request-id"}; its status is at /jobs/:jobid/savepoints/:id.
func (h *handler) stopWithSavepoint(ctx context.Context, w http.ResponseWriter, r *http.Request) (int, any, error) {
	var req restapi.StopWithSavepointRequest
	if err := h.decodeOptional(w, r, &req); err != nil {
		return 0, nil, err
	}
	if err := checkSavepointOptions(req.SavepointRequestOptions); err != nil {
		return 0, nil, err
	}
	id, err := h.d.StopWithSavepoint(ctx, r.PathValue("jobid"), req.TargetDirectory, req.Drain)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, restapi.TriggerResponse{RequestID: id}, nil
}

// checkSavepointOptions refuses what Flink's clients may ask for and gofl
// does not do: a NATIVE savepoint, a trigger ID chosen by the client.
func checkSavepointOptions(o restapi.SavepointRequestOptions) error {
	if o.FormatType != "" && o.FormatType != restapi.SavepointFormatCanonical {
		return badRequest(fmt.Sprintf("savepoint formatType %q is not supported: gofl writes %s savepoints only", o.FormatType, restapi.SavepointFormatCanonical))
	}
	if o.TriggerID != "" {
		return badRequest("a client-chosen triggerId is not supported: the JobManager picks the trigger ID and returns it as request-id")
	}
	return nil
}

func (h *handler) savepointStatus(ctx context.Context, _ http.ResponseWriter, r *http.Request) (int, any, error) {
	s, err := h.d.SavepointStatus(ctx, r.PathValue("jobid"), r.PathValue("triggerid"))
	return http.StatusOK, s, err
}

// decodeOptional reads a JSON body into v; an empty body keeps v's zero
// value, unknown fields are refused.
func (h *handler) decodeOptional(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return &tooLargeError{limit: mbe.Limit}
		}
		return badRequest("reading the request body: " + err.Error())
	}
	if strings.TrimSpace(string(body)) == "" {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("the request body is malformed: " + err.Error())
	}
	return nil
}
