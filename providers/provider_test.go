package providers

import (
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestClusterSpecValidate(t *testing.T) {
	if err := (ClusterSpec{ClusterID: "c", Mode: ModeApplication, TaskManagers: 2}).Validate(); err != nil {
		t.Fatal(err)
	}
	err := (ClusterSpec{Mode: "batch", TaskManagers: -1}).Validate()
	for _, want := range []string{"cluster ID is empty", `mode "batch"`, "-1 initial TaskManagers"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want it to say %q", err, want)
		}
	}
}

func TestRegistry(t *testing.T) {
	Register(Provider{Name: "test-provider"})
	if !strings.Contains(strings.Join(Names(), ","), "test-provider") {
		t.Fatalf("Names = %v", Names())
	}
	_, err := Lookup("nomad-typo")
	if !errors.Is(err, ErrUnknownProvider) || !strings.Contains(err.Error(), "known providers are standalone, test-provider") {
		t.Fatalf("Lookup = %v", err)
	}
	if _, err := NewDeployer("test-provider", nil, zerolog.Nop()); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("NewDeployer without a client half = %v", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("registering a name twice did not panic")
			}
		}()
		Register(Provider{Name: "test-provider"})
	}()
}
