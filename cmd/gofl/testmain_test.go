package main

import (
	"os"
	"testing"

	"github.com/gofl/gofl/internal/clustertest"
)

// e2eParallel is how many tests run at once unless -parallel says
// otherwise: the e2e tests mostly wait for their processes.
const e2eParallel = 4

// TestMain removes the e2e tests' binaries (e2eBinaries), 180 MB a run.
func TestMain(m *testing.M) {
	clustertest.DefaultParallel(e2eParallel)
	code := m.Run()
	if e2eBins.dir != "" {
		_ = os.RemoveAll(e2eBins.dir)
	}
	os.Exit(code)
}
