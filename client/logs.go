package client

import (
	"context"
	"net/url"

	"github.com/gofl/gofl/logs"
	"github.com/gofl/gofl/rpc/restapi"
)

// JobManagerLogs is GET /jobmanager/logs.
func (c *Client) JobManagerLogs(ctx context.Context) (restapi.LogListInfo, error) {
	var out restapi.LogListInfo
	err := c.do(ctx, "GET", "/jobmanager/logs", "", nil, &out)
	return out, err
}

// TaskManagerLogs is GET /taskmanagers/{id}/logs.
func (c *Client) TaskManagerLogs(ctx context.Context, tmID string) (restapi.LogListInfo, error) {
	var out restapi.LogListInfo
	err := c.do(ctx, "GET", "/taskmanagers/"+url.PathEscape(tmID)+"/logs", "", nil, &out)
	return out, err
}

// JobLogs is GET /jobs/{id}/logs: the job's runner logs on every TaskManager.
func (c *Client) JobLogs(ctx context.Context, jobID string) (restapi.JobLogs, error) {
	var out restapi.JobLogs
	err := c.do(ctx, "GET", jobPath(jobID)+"/logs", "", nil, &out)
	return out, err
}

// LogPath is the REST path of a log: the JobManager's (tmID "") or a
// TaskManager's.
func LogPath(tmID, name string) string {
	if tmID == "" {
		return "/jobmanager/logs/" + url.PathEscape(name)
	}
	return "/taskmanagers/" + url.PathEscape(tmID) + "/logs/" + url.PathEscape(name)
}

// ReadLog reads part of a log at path (LogPath). An open-ended byte
// range is bounded by the log's size when the server opened it, so a
// follower continues at Offset plus the bytes returned.
func (c *Client) ReadLog(ctx context.Context, path string, r logs.Range) ([]byte, error) {
	var b []byte
	err := c.do(ctx, "GET", path, r.Query().Encode(), nil, &b)
	return b, err
}
