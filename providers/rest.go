package providers

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
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
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusBadRequest {
		// security.ssl.rest.enabled: Go's HTTPS server answers plain HTTP
		// so; the REST API is up, which is all a deployer waits for.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return strings.Contains(string(b), "HTTP request to an HTTPS server")
	}
	// 401: rest.authentication.token is set; the API answers, so it is up.
	return resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized
}

// LeaderRESTAddress follows a JobManager's answer to the leader's REST
// address: a standby JobManager (high availability) answers GET /overview
// with 307 and the leader's URL. It returns addr itself when that serves,
// when no leader is known yet, or when it cannot tell; blocks for at most
// one request (hc's timeout and ctx bound it). Clients call it once per
// command, so that uploads, which cannot follow a redirect, go to the
// leader.
func LeaderRESTAddress(ctx context.Context, hc *http.Client, addr string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/overview", nil)
	if err != nil {
		return addr
	}
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		return addr
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect {
		return addr
	}
	u, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || u.Host == "" {
		return addr
	}
	return u.Host
}
