package restapi

import "errors"

// ErrLogNotFound is a log file a process does not have (404).
var ErrLogNotFound = errors.New("restapi: log not found")

// LogInfo is one log file (Flink's LogInfo).
type LogInfo struct {
	Name  string `json:"name"`
	Size  int64  `json:"size"`
	MTime int64  `json:"mtime"` // epoch millis
}

// LogListInfo is GET /jobmanager/logs and /taskmanagers/{id}/logs.
type LogListInfo struct {
	Logs []LogInfo `json:"logs"`
}

// JobLog is one runner log of a job on a TaskManager.
type JobLog struct {
	TaskManager string `json:"taskmanager"`
	LogInfo
}

// JobLogs is GET /jobs/{jobid}/logs (gofl's): the job's runner logs on
// every registered TaskManager; Errors names TaskManagers that did not answer.
type JobLogs struct {
	Logs   []JobLog `json:"logs"`
	Errors []string `json:"errors,omitempty"`
}

// LogSizeHeader carries a served log's size in bytes when it was opened.
const LogSizeHeader = "X-Gofl-Log-Size"
