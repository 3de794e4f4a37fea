package jobmanager

import (
	"net/http"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/rpc/restapi"
	"github.com/gofl/gofl/web"
)

// withDashboard serves the web dashboard beside api (the REST API behind
// its authentication): the dashboard's files are public, its API calls
// carry the token the user enters.
func withDashboard(api http.Handler) http.Handler { return web.Mount(api, web.Handler("")) }

// configEntries is GET /jobmanager/config: every option set away from its
// default, secrets masked (conf.Masked), sorted by key.
func configEntries(c *conf.Configuration) []restapi.ConfigEntry {
	out := []restapi.ConfigEntry{}
	for _, s := range c.Settings() {
		if !s.IsDefault() {
			out = append(out, restapi.ConfigEntry{Key: s.Spec.Key(), Value: s.Value})
		}
	}
	return out
}
