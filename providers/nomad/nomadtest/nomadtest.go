// Package nomadtest finds the real Nomad agent that tests run against.
package nomadtest

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// RealAgent returns the address of the real Nomad agent in $NOMAD_ADDR
// (set by scripts/nomad/with-nomad.sh, which `make test` and .ci/run use,
// or by hand after `make nomad`), without a trailing slash. If it is unset
// or does not answer, the test fails under CI=true (where the agent must
// run) and skips elsewhere, so real-agent tests never pass by not running
// in CI.
func RealAgent(t testing.TB) string {
	t.Helper()
	addr := strings.TrimSuffix(os.Getenv("NOMAD_ADDR"), "/")
	msg := ""
	if addr == "" {
		msg = "NOMAD_ADDR is not set"
	} else if err := ping(addr); err != nil {
		msg = "the Nomad agent at NOMAD_ADDR=" + addr + " does not answer (" + err.Error() + ")"
	}
	if msg != "" {
		msg += "; start one with `make nomad` and export NOMAD_ADDR=http://127.0.0.1:4646, " +
			"or run the tests through scripts/nomad/with-nomad.sh"
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true, so the real-Nomad tests must run: " + msg)
		}
		t.Skip("skipping the real Nomad agent: " + msg)
	}
	return addr
}

func ping(addr string) error {
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(addr + "/v1/agent/self")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return &statusError{resp.Status}
	}
	return nil
}

type statusError struct{ status string }

func (e *statusError) Error() string { return "GET /v1/agent/self: " + e.status }
