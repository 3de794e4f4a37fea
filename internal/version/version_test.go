package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	old := Version
	t.Cleanup(func() { Version = old })
	Version = "v1.2.3"
	s := String()
	for _, want := range []string{"v1.2.3", "protocol 1", runtime.Version()} {
		if !strings.Contains(s, want) {
			t.Errorf("String() = %q; want it to contain %q", s, want)
		}
	}
}
