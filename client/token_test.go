package client_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/gofl/gofl/client"
	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/jobmanager/rest"
	"github.com/gofl/gofl/jobmanager/rest/resttest"
)

const secretToken = "s3cr3t-token-value-0123456789"

// A JobManager with rest.authentication.token answers 401 to calls without
// the token, with a message naming the option and GOFL_REST_TOKEN; the
// client sends it from WithToken or $GOFL_REST_TOKEN. The token never
// appears in the server's log or in errors.
func TestBearerToken(t *testing.T) {
	var logBuf bytes.Buffer
	log := zerolog.New(&logBuf).Level(zerolog.DebugLevel)
	d := resttest.NewDispatcher()
	srv := httptest.NewServer(rest.Authenticate(secretToken, rest.NewHandler(d, log, rest.Options{}), nil))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()

	t.Setenv(client.EnvToken, "")
	for name, opts := range map[string][]client.Option{
		"no token":    nil,
		"wrong token": {client.WithToken("wrong")},
		"prefix":      {client.WithToken(secretToken[:10])},
	} {
		c, err := client.New(addr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.ListJobs(ctx)
		var ce *client.Error
		if !errors.As(err, &ce) || ce.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s: %v; want a 401", name, err)
		}
		for _, want := range []string{"rest.authentication.token", client.EnvToken} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q does not name %s", name, err, want)
			}
		}
		if strings.Contains(err.Error(), secretToken) {
			t.Errorf("%s: the error shows the token: %q", name, err)
		}
	}

	c, err := client.New(addr, client.WithToken(secretToken))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListJobs(ctx); err != nil {
		t.Errorf("with WithToken: %v", err)
	}
	t.Setenv(client.EnvToken, secretToken)
	c, err = client.New(addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListJobs(ctx); err != nil {
		t.Errorf("with $%s: %v", client.EnvToken, err)
	}
	if logBuf.Len() == 0 || strings.Contains(logBuf.String(), secretToken) {
		t.Errorf("the REST log is empty or shows the token: %s", logBuf.String())
	}
}

// The trusted hook admits requests authenticated another way.
func TestBearerTokenTrustedHook(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h := rest.Authenticate(secretToken, next, func(r *http.Request) bool { return r.Header.Get("X-Driver") == "yes" })
	for hdr, want := range map[string]int{"yes": http.StatusNoContent, "no": http.StatusUnauthorized} {
		r := httptest.NewRequest(http.MethodGet, "/jobs", nil)
		r.Header.Set("X-Driver", hdr)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("X-Driver %s: %d, want %d", hdr, w.Code, want)
		}
	}
}

// The token configured for the cluster (rest.authentication.token or its
// file) reaches the client through ConfigOptions, without
// $GOFL_REST_TOKEN; a missing token file is an error naming the key.
func TestConfigOptionsCarryTheConfiguredToken(t *testing.T) {
	d := resttest.NewDispatcher()
	srv := httptest.NewServer(rest.Authenticate(secretToken, rest.NewHandler(d, zerolog.Nop(), rest.Options{}), nil))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	t.Setenv(client.EnvToken, "")
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(secretToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for key, value := range map[string]string{"rest.authentication.token": secretToken, "rest.authentication.token-file": file} {
		cfg, err := conf.FromMap(map[string]string{key: value})
		if err != nil {
			t.Fatal(err)
		}
		opts, err := client.ConfigOptions(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.New(addr, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ListJobs(context.Background()); err != nil {
			t.Errorf("%s: %v", key, err)
		}
	}
	cfg, _ := conf.FromMap(map[string]string{"rest.authentication.token-file": filepath.Join(t.TempDir(), "missing")})
	if _, err := client.ConfigOptions(cfg); err == nil || !strings.Contains(err.Error(), "rest.authentication.token-file") {
		t.Fatalf("missing token file: %v", err)
	}
}
