// Package version identifies a gofl build.
//
// Version is the release, stamped at link time by the Makefile
// (-X github.com/gofl/gofl/internal/version.Version=...); it is "dev" for
// plain `go build`. ProtocolVersion is separate: it changes only when the
// wire contracts between client, JobManager, TaskManager and job runner
// change, and handshakes compare it so mismatched binaries fail fast with a
// clear error instead of misbehaving.
package version
