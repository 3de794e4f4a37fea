package nomad

import (
	"errors"
	"fmt"

	"github.com/gofl/gofl/conf"
)

// ErrInsecureBind is the refusal of the bind rule (checkBindRule).
var ErrInsecureBind = errors.New("nomad: the JobManager and TaskManagers would listen on the node's routable address (NOMAD_IP_*) with no authentication: set security.ssl.internal.enabled: true (mutual TLS; with no certificates given, the client generates a per-cluster CA), or security.insecure: true to accept unauthenticated internal ports on a trusted network")

// checkBindRule is the Nomad provider's rule, like Nomad's own
// tls { verify_https_client }: internal ports bind to the allocation's
// address only with internal TLS on, unless security.insecure overrides
// it. get reads an option's raw value ("" when unset).
func checkBindRule(get func(key string) string) error {
	on, err := parseBoolOpt(conf.SSLInternalEnabled, get)
	if err != nil {
		return err
	}
	insecure, err := parseBoolOpt(conf.SecurityInsecure, get)
	if err != nil {
		return err
	}
	if on || insecure {
		return nil
	}
	return ErrInsecureBind
}

func parseBoolOpt(o *conf.Option[bool], get func(string) string) (bool, error) {
	v := get(o.Key())
	if v == "" {
		return o.Default(), nil
	}
	b, err := o.Parse(v)
	if err != nil {
		return false, fmt.Errorf("nomad: %s: %w", o.Key(), err)
	}
	return b, nil
}

// checkBindRuleConf is checkBindRule of a configuration.
func checkBindRuleConf(c *conf.Configuration) error {
	return checkBindRule(func(k string) string {
		if e, ok := c.Lookup(k); ok && e.Source.Kind != conf.SourceDefault {
			return e.Raw
		}
		return ""
	})
}
