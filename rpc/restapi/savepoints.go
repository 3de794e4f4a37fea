package restapi

// SavepointTriggerRequest is the body of POST /jobs/{jobid}/savepoints
// (Flink's SavepointTriggerRequestBody).
type SavepointTriggerRequest struct {
	TargetDirectory string `json:"target-directory,omitempty"`
	CancelJob       bool   `json:"cancel-job"`
}

// StopWithSavepointRequest is the body of POST /jobs/{jobid}/stop (Flink's
// StopWithSavepointRequestBody).
type StopWithSavepointRequest struct {
	TargetDirectory string `json:"targetDirectory,omitempty"`
	Drain           bool   `json:"drain"`
}

// TriggerResponse names an asynchronous operation (Flink's
// TriggerResponse).
type TriggerResponse struct {
	RequestID string `json:"request-id"`
}

// SavepointStatus is GET /jobs/{jobid}/savepoints/{triggerid} (Flink's
// AsynchronousOperationResult of a SavepointInfo).
type SavepointStatus struct {
	Status    QueueStatus    `json:"status"`
	Operation *SavepointInfo `json:"operation,omitempty"`
}

// SavepointInfo is a finished savepoint: its location, or why it failed.
type SavepointInfo struct {
	Location     string        `json:"location,omitempty"`
	FailureCause *FailureCause `json:"failure-cause,omitempty"`
}
