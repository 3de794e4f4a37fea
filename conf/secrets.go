package conf

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// SplitSecrets returns the secret options of m (Spec.IsSecret) and m
// without them; m is not modified.
func SplitSecrets(m map[string]string) (public, secrets map[string]string) {
	public, secrets = make(map[string]string, len(m)), map[string]string{}
	for k, v := range m {
		if s, ok := Lookup(k); ok && s.IsSecret() {
			secrets[k] = v
		} else {
			public[k] = v
		}
	}
	return public, secrets
}

// MarshalSecrets renders secrets as the YAML of a secrets file
// (DeploymentSecretsFile).
func MarshalSecrets(secrets map[string]string) ([]byte, error) {
	return yaml.Marshal(secrets)
}

// ApplySecrets sets the secret options of a secrets file (YAML, see
// DeploymentSecretsFile) in c, except keys with one of the skip prefixes.
// A non-secret or unknown key is an error (the file carries secrets only);
// errors name the key, never a value.
func ApplySecrets(c *Configuration, file string, data []byte, skip ...string) error {
	var m map[string]string
	if err := yaml.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("conf: secrets file %s is not a YAML map of strings", file)
	}
	src := FileSource(file, 0)
	for k, v := range m {
		if hasAnyPrefix(k, skip) {
			continue
		}
		if s, ok := Lookup(k); !ok || !s.IsSecret() {
			return fmt.Errorf("conf: secrets file %s: %q is not a secret option", file, k)
		}
		if err := c.Set(k, v, src); err != nil {
			return fmt.Errorf("conf: secrets file %s: %s: invalid value", file, k)
		}
	}
	return nil
}

func hasAnyPrefix(k string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}
