package rest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/gofl/gofl/jobmanager/rest"
)

// unknownJob is a well-formed job ID no test submits.
const unknownJob = "00000000000000000000000000000000"

// Identifiers in REST paths are checked before they reach the Dispatcher:
// a malformed one answers 400 naming the field and the rule.
func TestMalformedPathIDsAreBadRequests(t *testing.T) {
	e := newEnv(t, rest.Options{})
	id := e.submit(t, wordcountJSON).JobID
	for _, c := range []struct{ method, path, want string }{
		{http.MethodGet, "/jobs/nope", "job id"},
		{http.MethodGet, "/jobs/..%2F..%2Fetc", "job id"},
		{http.MethodPatch, "/jobs/nope", "job id"},
		{http.MethodGet, "/jobs/ABCDEF0123456789ABCDEF0123456789", "job id"},
		{http.MethodGet, "/jobs/" + id + "/vertices/.hidden", "vertex id"},
		{http.MethodGet, "/jobs/" + id + "/vertices/a%2Fb", "vertex id"},
		{http.MethodGet, "/jobs/" + id + "/savepoints/a%2Fb", "trigger id"},
		{http.MethodHead, "/blobs/sha256:..%2F..%2Fx", ""},
		{http.MethodGet, "/taskmanagers/a%20b", "task manager id"},
	} {
		r := e.do(t, c.method, c.path, "")
		if r.status != http.StatusBadRequest {
			t.Errorf("%s %s = %d %s; want 400", c.method, c.path, r.status, r.body)
			continue
		}
		if c.method == http.MethodHead {
			continue // no body
		}
		if errs := errorsOf(t, r, http.StatusBadRequest); !strings.Contains(errs[0], c.want) || !strings.Contains(errs[0], "want ") {
			t.Errorf("%s %s: errors %q do not name %q and the rule", c.method, c.path, errs, c.want)
		}
	}
}
