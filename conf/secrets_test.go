package conf

import (
	"strings"
	"testing"
)

// Secret options split off, round-trip through a secrets file and land
// in a configuration; skipped prefixes stay out; a non-secret key in the
// file is refused without showing a value.
func TestSecretsFileRoundTrip(t *testing.T) {
	m := map[string]string{
		SSLInternalKeystorePassword.Key(): "ks-pw", RestAuthToken.Key(): "tok", NumberOfTaskSlots.Key(): "2",
	}
	public, secrets := SplitSecrets(m)
	if len(public) != 1 || public[NumberOfTaskSlots.Key()] != "2" || len(secrets) != 2 || len(m) != 3 {
		t.Fatalf("public %v, secrets %d, input %d", public, len(secrets), len(m))
	}
	y, err := MarshalSecrets(secrets)
	if err != nil {
		t.Fatal(err)
	}
	c := NewConfiguration()
	if err := ApplySecrets(c, "s.yaml", y, "rest.authentication."); err != nil {
		t.Fatal(err)
	}
	if SSLInternalKeystorePassword.Get(c) != "ks-pw" || RestAuthToken.Get(c) != "" {
		t.Fatalf("applied: keystore password %v, REST token set %v", SSLInternalKeystorePassword.Get(c) == "ks-pw", RestAuthToken.Get(c) != "")
	}
	err = ApplySecrets(NewConfiguration(), "s.yaml", []byte("taskmanager.numberOfTaskSlots: \"very-secret\"\n"))
	if err == nil || !strings.Contains(err.Error(), "not a secret option") || strings.Contains(err.Error(), "very-secret") {
		t.Fatalf("a non-secret key: %v", err)
	}
	if err := ApplySecrets(NewConfiguration(), "s.yaml", []byte("[")); err == nil || strings.Contains(err.Error(), "[") && !strings.Contains(err.Error(), "YAML") {
		t.Fatalf("garbage: %v", err)
	}
}
