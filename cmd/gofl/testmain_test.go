package main

import (
	"os"
	"testing"
)

// TestMain removes the e2e tests' binaries (e2eBinaries), 180 MB a run.
func TestMain(m *testing.M) {
	code := m.Run()
	if e2eBins.dir != "" {
		_ = os.RemoveAll(e2eBins.dir)
	}
	os.Exit(code)
}
