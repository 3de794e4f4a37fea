package main

// The resource providers gofl deploys clusters and TaskManagers through,
// registered here rather than by the libraries (client, jobmanager) that
// look them up by name.
import (
	_ "github.com/gofl/gofl/providers/local" // deployment.provider: local
	_ "github.com/gofl/gofl/providers/nomad" // deployment.provider: nomad
)
