package conf

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// Security: what the REST API lets anonymous callers do, upload bounds,
// and the REST bearer token.

var (
	// WebSubmitEnable gates job submission and uploads over REST (Flink's
	// key). Unset, it is true for session clusters only; see WebSubmitEnabled.
	WebSubmitEnable = BoolOption("web.submit.enable", true,
		"Allow job submission and uploads over REST (POST /jobs, POST /blobs). Unset: true for session clusters, false for per-job and application clusters (an application's own driver submits through an authenticated path); a refused call answers 403.")
	// WebCancelEnable gates cancel and stop-with-savepoint over REST.
	WebCancelEnable = BoolOption("web.cancel.enable", true,
		"Allow cancelling and stopping jobs over REST (PATCH /jobs/{id}, POST /jobs/{id}/stop); a refused call answers 403.")
	// BlobUploadMaxTotalSize bounds the blob store of a cluster.
	BlobUploadMaxTotalSize = MemorySizeOption("blob.upload.max-total-size", 4*Gibibyte,
		"Total size of the blobs the JobManager stores (uploads and staged binaries); an upload past it answers 413. 0 means no limit.")
	// BlobUploadCleanupGrace is how long an unreferenced upload is kept.
	BlobUploadCleanupGrace = DurationOption("blob.upload.cleanup-grace", time.Hour,
		"How long an uploaded blob that no running job references is kept after its upload (or its last job's end); then it is removed.")
	// RestAuthToken is the REST bearer token.
	RestAuthToken = StringOption("rest.authentication.token", "",
		"Bearer token every REST call must carry (Authorization: Bearer ...); empty: rest.authentication.token-file, else no authentication. Clients read it from GOFL_REST_TOKEN, else this option. Never logged; gofl config shows it masked.").AsSecret()
	// RestAuthTokenFile names a file holding the REST bearer token.
	RestAuthTokenFile = StringOption("rest.authentication.token-file", "",
		"File holding the REST bearer token (surrounding white space ignored), used when rest.authentication.token is empty.")
)

// WebSubmitEnabled is web.submit.enable if set, else whether c is a
// session cluster's configuration (Flink disables submission from the web
// for application clusters).
func WebSubmitEnabled(c *Configuration) bool {
	if c.IsSet(WebSubmitEnable.Key()) {
		return WebSubmitEnable.Get(c)
	}
	return DeploymentMode.Get(c) == ModeSession
}

// RestToken is the REST bearer token: rest.authentication.token, else the
// content of rest.authentication.token-file (trimmed), else "" (none).
func RestToken(c *Configuration) (string, error) {
	if t := RestAuthToken.Get(c); t != "" {
		return t, nil
	}
	f := RestAuthTokenFile.Get(c)
	if f == "" {
		return "", nil
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return "", fmt.Errorf("conf: rest.authentication.token-file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("conf: rest.authentication.token-file %s is empty", f)
	}
	return t, nil
}
