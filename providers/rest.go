package providers

import (
	"context"
	"net/http"
)

// OverviewReady reports whether a cluster's REST API at addr (host:port)
// answers GET /overview, as a deployer's Deploy waits for. It blocks for at
// most one request; hc's timeout and ctx bound it.
func OverviewReady(ctx context.Context, hc *http.Client, addr string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/overview", nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
