package jobmanager_test

// The JobManager library registers no provider: its users do (cmd/gofl in
// main), and so do its tests.
import (
	_ "github.com/gofl/gofl/providers/local"
	_ "github.com/gofl/gofl/providers/nomad"
)
