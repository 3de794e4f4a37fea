package runtime

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
)

// PageSize is the unit in which batch operators reserve managed memory
// (Flink's memory segment size).
const PageSize = 32 << 10

// DefaultManagedMemory is the managed memory of one slot when nothing
// configures it (taskmanager.memory.managed.size unset).
const DefaultManagedMemory = 128 << 20

// MemoryManager is the managed-memory budget of one slot (Flink's
// MemoryManager): the batch operators of the tasks in the slot (sorts,
// joins, blocking exchange buffers) reserve pages from it and spill to
// disk when it has none left. Safe for concurrent use.
type MemoryManager struct {
	size int64
	used atomic.Int64
	peak atomic.Int64

	// Pages live outside the Go heap (anonymous mappings of pageChunk
	// bytes, Flink's off-heap managed memory): the GC neither scans them
	// nor paces on them, so a full budget does not double the heap. Freed
	// pages are reused; Close unmaps them all.
	mu     sync.Mutex
	free   [][]byte
	chunks [][]byte
	closed bool
}

// pageChunk is how much one mapping holds (pageChunk/PageSize pages).
const pageChunk = 1 << 20

// NewMemoryManager returns a budget of size bytes (at least one page).
func NewMemoryManager(size int64) *MemoryManager {
	return &MemoryManager{size: max(size, PageSize)}
}

// Size is the budget in bytes.
func (m *MemoryManager) Size() int64 { return m.size }

// Used is what is reserved now.
func (m *MemoryManager) Used() int64 { return m.used.Load() }

// Peak is the most that was ever reserved at once.
func (m *MemoryManager) Peak() int64 { return m.peak.Load() }

// TryReserve reserves n bytes if the budget has them; it never blocks.
// The caller gives them back with Release.
func (m *MemoryManager) TryReserve(n int64) bool {
	for {
		u := m.used.Load()
		if u+n > m.size {
			return false
		}
		if m.used.CompareAndSwap(u, u+n) {
			for p := m.peak.Load(); u+n > p && !m.peak.CompareAndSwap(p, u+n); p = m.peak.Load() {
			}
			return true
		}
	}
}

// ForceReserve reserves n bytes even past the budget (an overdraft): for
// a consumer with nothing in memory, so it always progresses. It never
// blocks; the caller gives them back with Release.
func (m *MemoryManager) ForceReserve(n int64) {
	u := m.used.Add(n)
	for p := m.peak.Load(); u > p && !m.peak.CompareAndSwap(p, u); p = m.peak.Load() {
	}
}

// Release gives back n bytes reserved with TryReserve.
func (m *MemoryManager) Release(n int64) { m.used.Add(-n) }

// AllocatePage returns an empty page of PageSize capacity outside the Go
// heap; the caller reserved it first (TryReserve) and hands it back with
// FreePage. Nothing may reference a page after FreePage or Close.
func (m *MemoryManager) AllocatePage() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := len(m.free); n > 0 {
		p := m.free[n-1]
		m.free = m.free[:n-1]
		return p[:0]
	}
	if m.closed {
		return make([]byte, 0, PageSize)
	}
	c, err := mapAnonymous(pageChunk)
	if err != nil {
		return make([]byte, 0, PageSize) // no mapping: the heap will do
	}
	m.chunks = append(m.chunks, c)
	for off := PageSize; off < pageChunk; off += PageSize {
		m.free = append(m.free, c[off:off:off+PageSize])
	}
	return c[0:0:PageSize]
}

// FreePage returns a page from AllocatePage for reuse.
func (m *MemoryManager) FreePage(p []byte) {
	if cap(p) != PageSize {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed {
		m.free = append(m.free, p[:0])
	}
}

// Close unmaps every page; the executor calls it once no task runs.
// Idempotent.
func (m *MemoryManager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.free = nil
	var errs []error
	for _, c := range m.chunks {
		errs = append(errs, unmap(c))
	}
	m.chunks = nil
	return errors.Join(errs...)
}

// IOManager creates the spill files of batch operators under the
// configured temporary directories (Flink's IOManager and io.tmp.dirs),
// round-robin, each under a private directory of this IOManager that
// Close removes, so no spill file outlives the process's tasks. It counts
// what was spilled. Safe for concurrent use.
type IOManager struct {
	mu     sync.Mutex
	dirs   []string // private directories, created lazily
	bases  []string
	next   int
	closed bool

	files atomic.Int64
	bytes atomic.Int64
}

// ErrIOManagerClosed is returned by CreateSpillFile after Close.
var ErrIOManagerClosed = errors.New("runtime: I/O manager closed")

// NewIOManager returns an IOManager spilling under dirs (os.TempDir when
// empty).
func NewIOManager(dirs []string) *IOManager {
	var bases []string
	for _, d := range dirs {
		if d != "" {
			bases = append(bases, d)
		}
	}
	if len(bases) == 0 {
		bases = []string{os.TempDir()}
	}
	return &IOManager{bases: bases, dirs: make([]string, len(bases))}
}

// CreateSpillFile creates a new spill file; the caller closes and removes
// it (RemoveSpillFile) when done, and Close removes whatever is left.
func (io *IOManager) CreateSpillFile(prefix string) (*os.File, error) {
	io.mu.Lock()
	defer io.mu.Unlock()
	if io.closed {
		return nil, ErrIOManagerClosed
	}
	i := io.next % len(io.bases)
	io.next++
	if io.dirs[i] == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		d := filepath.Join(io.bases[i], "gofl-io-"+hex.EncodeToString(b[:]))
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("runtime: spill directory: %w", err)
		}
		io.dirs[i] = d
	}
	f, err := os.CreateTemp(io.dirs[i], prefix+"-*.spill")
	if err != nil {
		return nil, fmt.Errorf("runtime: spill file: %w", err)
	}
	io.files.Add(1)
	return f, nil
}

// RemoveSpillFile closes and deletes f.
func (io *IOManager) RemoveSpillFile(f *os.File) error {
	cerr := f.Close()
	if err := os.Remove(f.Name()); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("runtime: removing spill file: %w", err)
	}
	if errors.Is(cerr, os.ErrClosed) {
		cerr = nil
	}
	return cerr
}

// AddSpilled counts n bytes written to spill files.
func (io *IOManager) AddSpilled(n int64) { io.bytes.Add(n) }

// SpillFiles is how many spill files were created.
func (io *IOManager) SpillFiles() int64 { return io.files.Load() }

// SpilledBytes is how many bytes were written to spill files.
func (io *IOManager) SpilledBytes() int64 { return io.bytes.Load() }

// Dirs are the private directories created so far.
func (io *IOManager) Dirs() []string {
	io.mu.Lock()
	defer io.mu.Unlock()
	var ds []string
	for _, d := range io.dirs {
		if d != "" {
			ds = append(ds, d)
		}
	}
	return ds
}

// Close removes the private directories with every spill file left in
// them; later CreateSpillFile calls fail. Idempotent.
func (io *IOManager) Close() error {
	io.mu.Lock()
	defer io.mu.Unlock()
	io.closed = true
	var errs []error
	for i, d := range io.dirs {
		if d == "" {
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, fmt.Errorf("runtime: removing spill directory: %w", err))
		}
		io.dirs[i] = ""
	}
	return errors.Join(errs...)
}

// BatchMemory is what a task's batch operators spill with: the slot's
// managed memory and the I/O manager.
type BatchMemory struct {
	Memory *MemoryManager
	IO     *IOManager
}
