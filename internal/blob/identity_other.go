//go:build !linux

package blob

import "os"

// fileIdentity: no digest cache outside Linux; every staging hashes.
func fileIdentity(*os.File) (identity, bool) { return identity{}, false }
