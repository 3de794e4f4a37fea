package faultsim

import (
	"testing"

	"go.uber.org/goleak"
)

// The simulation runs everything on the test's goroutine: no run may leave
// one behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
