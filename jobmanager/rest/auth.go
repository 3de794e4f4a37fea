package rest

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/gofl/gofl/rpc/restapi"
)

// AuthFailedMessage is the 401 answer's text: it names where the token
// goes on each side, never the token.
const AuthFailedMessage = "missing or wrong bearer token: this JobManager requires rest.authentication.token; " +
	"send it as Authorization: Bearer <token> (the gofl CLI and client read it from GOFL_REST_TOKEN)"

// Authenticate requires the bearer token on every request to next,
// answering 401 otherwise. An empty token turns it off. trusted, if not
// nil, admits requests that authenticate another way (an application
// driver's own token). The comparison takes constant time, and the token
// is never logged.
func Authenticate(token string, next http.Handler, trusted func(*http.Request) bool) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		// Hashing first keeps the compare constant-time in the length too.
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if (ok && subtle.ConstantTimeCompare(sum[:], want[:]) == 1) || (trusted != nil && trusted(r)) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="gofl"`)
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		b, _ := json.Marshal(restapi.ErrorResponse{Errors: []string{AuthFailedMessage}})
		_, _ = w.Write(append(b, '\n'))
	})
}
