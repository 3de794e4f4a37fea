//go:build unix

package runtime

import "syscall"

func mapAnonymous(n int) ([]byte, error) {
	return syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
}

func unmap(b []byte) error { return syscall.Munmap(b) }
