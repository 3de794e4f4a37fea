//go:build !unix

package runtime

func mapAnonymous(n int) ([]byte, error) { return make([]byte, n), nil }

func unmap([]byte) error { return nil }
