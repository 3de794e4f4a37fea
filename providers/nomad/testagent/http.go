package testagent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Blocking query limits, as in Nomad: the default wait is 5 minutes and
// the maximum 10 minutes.
const (
	defaultBlockingWait = 5 * time.Minute
	maxBlockingWait     = 10 * time.Minute
)

// codedError is an error with an HTTP status, written as Nomad writes
// errors: the status code and the message as a text/plain body.
type codedError struct {
	code int
	msg  string
}

func (e *codedError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) *codedError {
	return &codedError{code: code, msg: fmt.Sprintf(format, args...)}
}

// Nomad's plain-text error bodies.
const (
	errPermissionDenied = "Permission denied"
	errTokenNotFound    = "ACL token not found"
	errInvalidMethod    = "Invalid method"
	errJobNotFound      = "job not found"
	errAllocNotFound    = "alloc not found"
	errEvalNotFound     = "eval not found"
	errNodeNotFound     = "node not found"
	errNoRegionPath     = "No path to region"
)

type reqCtx struct {
	w  http.ResponseWriter
	r  *http.Request
	ns string // requested namespace ("default" when absent)
}

func (a *Agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	rc := &reqCtx{w: w, r: r, ns: r.URL.Query().Get("namespace")}
	if rc.ns == "" {
		rc.ns = "default"
	}
	a.log.Debug().Str("method", r.Method).Str("path", path).Str("query", r.URL.RawQuery).Msg("request")
	if err := a.route(rc, path); err != nil {
		writeError(w, err)
	}
}

func writeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	if ce, ok := err.(*codedError); ok {
		code = ce.code
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(err.Error()))
}

func (a *Agent) route(rc *reqCtx, path string) error {
	// Status endpoints need no token, as in Nomad.
	switch path {
	case "/v1/status/leader":
		return a.statusLeader(rc)
	case "/v1/status/peers":
		return a.statusPeers(rc)
	}
	if err := a.checkACL(rc.r); err != nil {
		return err
	}
	if reg := rc.r.URL.Query().Get("region"); reg != "" && reg != a.cfg.Region {
		return errorf(500, "%s", errNoRegionPath)
	}
	switch {
	case path == "/v1/jobs":
		switch rc.r.Method {
		case http.MethodGet:
			return a.jobsList(rc)
		case http.MethodPut, http.MethodPost:
			return a.jobRegister(rc, "")
		}
		return errorf(405, "%s", errInvalidMethod)
	case strings.HasPrefix(path, "/v1/job/"):
		return a.routeJob(rc, strings.TrimPrefix(path, "/v1/job/"))
	case path == "/v1/allocations":
		return a.allocsList(rc)
	case strings.HasPrefix(path, "/v1/allocation/"):
		rest := strings.TrimPrefix(path, "/v1/allocation/")
		if id, ok := strings.CutSuffix(rest, "/stop"); ok {
			return a.allocStop(rc, unescape(id))
		}
		return a.allocGet(rc, unescape(rest))
	case path == "/v1/evaluations":
		return a.evalsList(rc)
	case strings.HasPrefix(path, "/v1/evaluation/"):
		rest := strings.TrimPrefix(path, "/v1/evaluation/")
		if id, ok := strings.CutSuffix(rest, "/allocations"); ok {
			return a.evalAllocs(rc, unescape(id))
		}
		return a.evalGet(rc, unescape(rest))
	case path == "/v1/nodes":
		return a.nodesList(rc)
	case strings.HasPrefix(path, "/v1/node/"):
		return a.nodeGet(rc, unescape(strings.TrimPrefix(path, "/v1/node/")))
	case path == "/v1/agent/self":
		return a.agentSelf(rc)
	case path == "/v1/agent/health":
		return a.agentHealth(rc)
	case path == "/v1/agent/members":
		return a.agentMembers(rc)
	case path == "/v1/regions":
		return writeJSONPlain(rc, []string{a.cfg.Region})
	case path == "/v1/namespace":
		return a.namespaceOne(rc, "")
	case path == "/v1/namespaces":
		return a.namespacesList(rc)
	case strings.HasPrefix(path, "/v1/namespace/"):
		return a.namespaceOne(rc, unescape(strings.TrimPrefix(path, "/v1/namespace/")))
	case path == "/v1/system/gc":
		return a.systemGC(rc)
	case path == "/v1/event/stream":
		return a.eventStream(rc)
	case strings.HasPrefix(path, "/v1/client/fs/cat/"):
		return a.fsRead(rc, unescape(strings.TrimPrefix(path, "/v1/client/fs/cat/")), false)
	case strings.HasPrefix(path, "/v1/client/fs/readat/"):
		return a.fsRead(rc, unescape(strings.TrimPrefix(path, "/v1/client/fs/readat/")), true)
	}
	return errorf(404, "Invalid URL path")
}

func (a *Agent) routeJob(rc *reqCtx, rest string) error {
	for _, sub := range []string{"/allocations", "/evaluations", "/summary", "/dispatch", "/evaluate"} {
		if id, ok := strings.CutSuffix(rest, sub); ok {
			id = unescape(id)
			switch sub {
			case "/allocations":
				return a.jobAllocs(rc, id)
			case "/evaluations":
				return a.jobEvals(rc, id)
			case "/summary":
				return a.jobSummaryGet(rc, id)
			case "/dispatch":
				return a.jobDispatch(rc, id)
			case "/evaluate":
				return a.jobEvaluate(rc, id)
			}
		}
	}
	id := unescape(rest)
	switch rc.r.Method {
	case http.MethodGet:
		return a.jobGet(rc, id)
	case http.MethodPut, http.MethodPost:
		return a.jobRegister(rc, id)
	case http.MethodDelete:
		return a.jobDeregister(rc, id)
	}
	return errorf(405, "%s", errInvalidMethod)
}

func unescape(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// checkACL enforces the configured token. The api client sends the token
// in the X-Nomad-Token header; Nomad also accepts "Authorization: Bearer".
func (a *Agent) checkACL(r *http.Request) error {
	if a.cfg.ACLToken == "" {
		return nil
	}
	tok := r.Header.Get("X-Nomad-Token")
	if tok == "" {
		if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
			tok = strings.TrimPrefix(h, "Bearer ")
		}
	}
	switch tok {
	case a.cfg.ACLToken:
		return nil
	case "":
		// The anonymous token has no policies.
		return errorf(403, "%s", errPermissionDenied)
	default:
		return errorf(403, "%s", errTokenNotFound)
	}
}

// queryMeta sets the headers Nomad sets on every read.
func setQueryMeta(w http.ResponseWriter, index uint64) {
	if index == 0 {
		index = 1
	}
	w.Header().Set("X-Nomad-Index", strconv.FormatUint(index, 10))
	w.Header().Set("X-Nomad-LastContact", "0")
	w.Header().Set("X-Nomad-KnownLeader", "true")
}

func setWriteMeta(w http.ResponseWriter, index uint64) {
	w.Header().Set("X-Nomad-Index", strconv.FormatUint(index, 10))
}

func writeJSONBody(w http.ResponseWriter, r *http.Request, body []byte) error {
	w.Header().Set("Content-Type", "application/json")
	if _, ok := r.URL.Query()["pretty"]; ok {
		var v any
		if json.Unmarshal(body, &v) == nil {
			if b, err := json.MarshalIndent(v, "", "    "); err == nil {
				body = b
			}
		}
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(200)
	_, err := w.Write(body)
	return err
}

// writeJSONPlain writes a non-blocking read with query meta.
func writeJSONPlain(rc *reqCtx, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	setQueryMeta(rc.w, 1)
	return writeJSONBody(rc.w, rc.r, b)
}

// parseBlocking reads ?index and ?wait as Nomad does.
func parseBlocking(r *http.Request) (uint64, time.Duration, error) {
	q := r.URL.Query()
	var idx uint64
	if s := q.Get("index"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0, errorf(400, "Invalid index")
		}
		idx = v
	}
	wait := defaultBlockingWait
	if s := q.Get("wait"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, 0, errorf(400, "Invalid wait time")
		}
		wait = d
	}
	if wait > maxBlockingWait {
		wait = maxBlockingWait
	}
	return idx, wait, nil
}

// blockingQuery serves a read. relevant returns the highest modify index of
// the data the query looks at; run produces the body and the X-Nomad-Index
// value. Both run with a.mu held. If ?index=N is given, the call waits
// until relevant() > N or ?wait elapses, then answers with the current data
// (as Nomad does on time-out).
func (a *Agent) blockingQuery(rc *reqCtx, relevant func() uint64, run func() (any, uint64, error)) error {
	minIdx, wait, err := parseBlocking(rc.r)
	if err != nil {
		return err
	}
	var timeout <-chan time.Time
	if minIdx > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	for {
		a.mu.Lock()
		if minIdx == 0 || relevant() > minIdx || timeout == nil || a.closed {
			v, idx, err := run()
			var body []byte
			if err == nil {
				body, err = json.Marshal(v)
			}
			a.mu.Unlock()
			if err != nil {
				return err
			}
			setQueryMeta(rc.w, idx)
			return writeJSONBody(rc.w, rc.r, body)
		}
		ch := a.notify
		a.mu.Unlock()
		select {
		case <-ch:
		case <-timeout:
			timeout = nil // answer with current data on the next pass
		case <-rc.r.Context().Done():
			return nil
		case <-a.ctx.Done():
			timeout = nil
		}
	}
}

func decodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		return errorf(400, "Failed to decode request: %v", err)
	}
	return nil
}

func (a *Agent) writeResult(rc *reqCtx, index uint64, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	setWriteMeta(rc.w, index)
	return writeJSONBody(rc.w, rc.r, b)
}
