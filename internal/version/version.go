package version

import (
	"fmt"
	"runtime"
)

// Version is the gofl release, set with -ldflags at build time.
var Version = "dev"

// ProtocolVersion is the version of the RPC and runner handshake contracts.
// Bump it on any incompatible change to them.
const ProtocolVersion = 1

// String describes the build, e.g. "dev (protocol 1, go1.26.8 linux/amd64)".
func String() string {
	return fmt.Sprintf("%s (protocol %d, %s %s/%s)", Version, ProtocolVersion, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
