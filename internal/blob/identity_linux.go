package blob

import (
	"os"
	"syscall"
)

// fileIdentity is f's stat identity.
func fileIdentity(f *os.File) (identity, bool) {
	st, err := f.Stat()
	if err != nil {
		return identity{}, false
	}
	s, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return identity{}, false
	}
	return identity{
		dev: uint64(s.Dev), ino: s.Ino, size: s.Size,
		mtime: s.Mtim.Nano(), ctime: s.Ctim.Nano(),
	}, true
}
