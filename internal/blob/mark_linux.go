package blob

import (
	"os"

	"golang.org/x/sys/unix"
)

// getAttr reads the extended attribute name of f.
func getAttr(f *os.File, name string) (string, bool) {
	var buf [256]byte
	n, err := unix.Fgetxattr(int(f.Fd()), name, buf[:])
	if err != nil {
		return "", false
	}
	return string(buf[:n]), true
}

// setAttr sets the extended attribute name of f, best effort.
func setAttr(f *os.File, name, value string) {
	_ = unix.Fsetxattr(int(f.Fd()), name, []byte(value), 0)
}

// lockFile takes an exclusive advisory lock on f's inode (flock, shared
// by every process and every link of it) and returns its release. If the
// lock cannot be had, the caller goes on unlocked: the lock only saves
// reads.
func lockFile(f *os.File) (unlock func()) {
	fd := int(f.Fd())
	for {
		err := unix.Flock(fd, unix.LOCK_EX)
		if err == nil {
			return func() { _ = unix.Flock(fd, unix.LOCK_UN) }
		}
		if err != unix.EINTR {
			return func() {}
		}
	}
}
