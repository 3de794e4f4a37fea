//go:build unix

package checkpointing

import (
	"os"
	goruntime "runtime"
	"sync/atomic"
	"syscall"

	"github.com/gofl/gofl/stream/runtime"
)

// mapping is a local state file mapped into memory, so that a restore
// reads it without copying and without allocating fresh memory for it:
// a restore from a local file then costs about what reading it with dd
// does. It is private and copy-on-write, so nothing can change the file
// through it. It is unmapped once the reader and every owner of bytes in
// it (see retain) are done.
type mapping struct {
	data []byte
	refs atomic.Int64
}

// mapFile maps f whole, or returns nil (the caller then reads it); the
// mapping starts with one reference, the caller's.
func mapFile(f *os.File) *mapping {
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() <= 0 || st.Size() != int64(int(st.Size())) {
		return nil
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE)
	if err != nil {
		return nil
	}
	_ = syscall.Madvise(data, syscall.MADV_WILLNEED)
	m := &mapping{data: data}
	m.refs.Store(1)
	liveMappings.Add(1)
	return m
}

// liveMappings counts the mappings not unmapped yet, for tests.
var liveMappings atomic.Int64

// retain keeps m mapped while owner is reachable: whoever holds slices of
// m must hold owner too.
func (m *mapping) retain(owner *runtime.OperatorRestore) {
	m.refs.Add(1)
	goruntime.AddCleanup(owner, func(m *mapping) { m.release() }, m)
}

// release drops one reference; the last one unmaps.
func (m *mapping) release() {
	if m.refs.Add(-1) == 0 {
		_ = syscall.Munmap(m.data)
		m.data = nil
		liveMappings.Add(-1)
	}
}
