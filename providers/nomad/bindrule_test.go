package nomad

import (
	"errors"
	"strings"
	"testing"

	"github.com/gofl/gofl/conf"
	"github.com/gofl/gofl/providers"
)

// TestBindRule: internal ports on the node's address need internal TLS,
// or the explicit override; the refusal names both options.
func TestBindRule(t *testing.T) {
	for _, tc := range []struct {
		cfg  map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"security.ssl.internal.enabled": "false"}, false},
		{map[string]string{"security.ssl.internal.enabled": "true"}, true},
		{map[string]string{"security.insecure": "true"}, true},
	} {
		err := checkBindRule(func(k string) string { return tc.cfg[k] })
		if (err == nil) != tc.want {
			t.Errorf("%v: %v", tc.cfg, err)
		}
		if err != nil && (!errors.Is(err, ErrInsecureBind) || !strings.Contains(err.Error(), "security.ssl.internal.enabled") ||
			!strings.Contains(err.Error(), "security.insecure")) {
			t.Errorf("the refusal does not name the options: %v", err)
		}
	}
	if err := checkBindRule(func(k string) string { return "maybe" }); err == nil || !strings.Contains(err.Error(), "security.ssl.internal.enabled") {
		t.Errorf("a bad value: %v", err)
	}
	c, _ := conf.FromMap(map[string]string{"security.ssl.internal.enabled": "true"})
	if err := checkBindRuleConf(c); err != nil {
		t.Error(err)
	}
	if _, err := NewWorkerDriver(providers.DriverContext{Config: conf.NewConfiguration(), JobManagerRPCAddress: "127.0.0.1:1"}); !errors.Is(err, ErrInsecureBind) {
		t.Errorf("a JobManager without internal TLS started a Nomad worker driver: %v", err)
	}
}
