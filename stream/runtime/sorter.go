package runtime

import (
	"bufio"
	"bytes"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// ExternalSorter sorts (key, value) byte pairs by key bytes in pages of
// managed memory and spills sorted runs to disk when the slot's budget has
// no page left, merging them when read back (Flink's
// UnilateralSortMerger, single-threaded). Keys compare as byte strings: a
// deterministic key encoding makes equal keys adjacent. It holds at least
// one page even when the budget is exhausted, so it always makes progress.
// Not safe for concurrent use: one task goroutine adds, then reads.
type ExternalSorter struct {
	mem        *MemoryManager
	io         *IOManager
	name       string
	entryPages // the current run's entries
	runs       []*os.File
	closed     bool
	// Spilled is the bytes this sorter wrote to its runs.
	Spilled int64
}

// entryPages holds (key, value) entries in pages of managed memory (the
// one paged buffer of the batch operators: sorter runs, hash join
// partitions). Entries larger than half a page get their own allocation,
// reserved all the same. Not safe for concurrent use.
type entryPages struct {
	mem   *MemoryManager
	pages [][]byte
	big   [][]byte // entries larger than a page, each its own allocation
	held  int64    // bytes reserved from mem
	offs  []uint64 // entry positions: page<<32 | offset (big: 1<<63 | index)
	// extraUsed/extraHeld account per-entry bytes kept elsewhere (a hash
	// index), reserved a page at a time.
	extraUsed, extraHeld int64
}

// maxMergeFanIn bounds the runs merged at once; more are merged in passes
// (a variable for tests).
var maxMergeFanIn = 64

// mergeBufferSize is the read buffer of each run while merging.
const mergeBufferSize = 16 << 10

// NewExternalSorter returns a sorter reserving from mem and spilling
// through io; name prefixes its spill files.
func NewExternalSorter(m BatchMemory, name string) *ExternalSorter {
	return &ExternalSorter{mem: m.Memory, io: m.IO, name: name, entryPages: entryPages{mem: m.Memory}}
}

func entrySize(k, v []byte) int {
	return uvarintLen(uint64(len(k))) + len(k) + uvarintLen(uint64(len(v))) + len(v)
}

func appendEntry(dst, k, v []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(k)))
	dst = append(dst, k...)
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

// minOffsets is the first capacity of the entry offsets.
const minOffsets = 1024

// need is what adding an entry of n bytes (and extra bytes kept
// elsewhere) reserves: a new page (or the entry, when large), the offsets'
// growth and the extra bytes' pages.
func (s *entryPages) need(n int, extra int64) int64 {
	var b int64
	if n > PageSize/2 {
		b = int64(n)
	} else if len(s.pages) == 0 || len(s.pages[len(s.pages)-1])+n > PageSize {
		b = PageSize
	}
	if len(s.offs) == cap(s.offs) {
		b += int64(max(minOffsets, cap(s.offs))) * 8
	}
	if s.extraUsed+extra > s.extraHeld {
		b += (s.extraUsed + extra - s.extraHeld + PageSize - 1) / PageSize * PageSize
	}
	return b
}

// tryReserve reserves what adding an entry of n bytes needs; false when
// the budget has no room (nothing reserved).
func (s *entryPages) tryReserve(n int, extra int64) bool {
	need := s.need(n, extra)
	if need > 0 && !s.mem.TryReserve(need) {
		return false
	}
	s.account(need, extra)
	return true
}

// forceReserve reserves like tryReserve, overdrawing the budget when it
// has no room: for a consumer with nothing in memory, so it progresses.
func (s *entryPages) forceReserve(n int, extra int64) {
	need := s.need(n, extra)
	if need > 0 && !s.mem.TryReserve(need) {
		s.mem.ForceReserve(need)
	}
	s.account(need, extra)
}

func (s *entryPages) account(need, extra int64) {
	s.held += need
	if s.extraUsed+extra > s.extraHeld {
		s.extraHeld += (s.extraUsed + extra - s.extraHeld + PageSize - 1) / PageSize * PageSize
	}
	s.extraUsed += extra
}

// add appends the entry (n = entrySize(k, v)) after a reservation.
func (s *entryPages) add(k, v []byte, n int) {
	if len(s.offs) == cap(s.offs) {
		s.offs = slices.Grow(s.offs, max(minOffsets, cap(s.offs)))
	}
	if n > PageSize/2 {
		s.offs = append(s.offs, 1<<63|uint64(len(s.big)))
		s.big = append(s.big, appendEntry(make([]byte, 0, n), k, v))
		return
	}
	if len(s.pages) == 0 || len(s.pages[len(s.pages)-1])+n > PageSize {
		s.pages = append(s.pages, s.mem.AllocatePage())
	}
	p := len(s.pages) - 1
	s.offs = append(s.offs, uint64(p)<<32|uint64(len(s.pages[p])))
	s.pages[p] = appendEntry(s.pages[p], k, v)
}

// Add copies the pair into the sorter, spilling the current run first when
// the budget has no room for it. A sorter with nothing in memory takes the
// room regardless (an overdraft of one page), so it always makes progress.
func (s *ExternalSorter) Add(k, v []byte) error {
	if s.closed {
		return errors.New("runtime: sorter closed")
	}
	n := entrySize(k, v)
	if !s.tryReserve(n, 0) {
		if len(s.offs) > 0 {
			if err := s.spill(); err != nil {
				return err
			}
		}
		s.forceReserve(n, 0)
	}
	s.add(k, v, n)
	return nil
}

func (s *entryPages) entry(o uint64) []byte {
	if o&(1<<63) != 0 {
		return s.big[o&^(1<<63)]
	}
	return s.pages[o>>32][uint32(o):]
}

// splitEntry returns the key and value of the entry at the start of b and
// its length.
func splitEntry(b []byte) (k, v []byte, n int) {
	kl, a := binary.Uvarint(b)
	k = b[a : a+int(kl)]
	b2 := b[a+int(kl):]
	vl, c := binary.Uvarint(b2)
	v = b2[c : c+int(vl)]
	return k, v, a + int(kl) + c + int(vl)
}

func (s *ExternalSorter) sortRun() {
	slices.SortStableFunc(s.offs, func(x, y uint64) int {
		kx, _, _ := splitEntry(s.entry(x))
		ky, _, _ := splitEntry(s.entry(y))
		return bytes.Compare(kx, ky)
	})
}

// spill sorts the current run, writes it to a new spill file and frees its
// pages.
func (s *ExternalSorter) spill() error {
	s.sortRun()
	f, err := s.io.CreateSpillFile(s.name)
	if err != nil {
		return err
	}
	s.runs = append(s.runs, f)
	w := bufio.NewWriterSize(f, 64<<10)
	n, err := s.writeTo(w)
	if err != nil {
		return fmt.Errorf("runtime: writing a sort run: %w", err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("runtime: writing a sort run: %w", err)
	}
	s.Spilled += n
	s.io.AddSpilled(n)
	s.free()
	return nil
}

// free gives back the pages and every reservation.
func (s *entryPages) free() {
	for _, p := range s.pages {
		s.mem.FreePage(p)
	}
	s.pages, s.big, s.offs = nil, nil, nil
	s.mem.Release(s.held) // extraHeld is part of held
	s.held, s.extraHeld, s.extraUsed = 0, 0, 0
}

// writeTo writes the entries in offs order to w; it returns the bytes
// written.
func (s *entryPages) writeTo(w *bufio.Writer) (int64, error) {
	var n int64
	for _, o := range s.offs {
		e := s.entry(o)
		_, _, l := splitEntry(e)
		m, err := w.Write(e[:l])
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// SortedIterator yields pairs in key order. The slices stay valid only
// until the next call.
type SortedIterator interface {
	// Next returns the next pair; ok is false at the end.
	Next() (k, v []byte, ok bool, err error)
}

// Sorted ends the input and returns the pairs in key order: from memory
// when nothing was spilled, else by merging the runs (the rest spilled
// first). Call it once.
func (s *ExternalSorter) Sorted() (SortedIterator, error) {
	if len(s.runs) == 0 {
		s.sortRun()
		return &memIter{s: s}, nil
	}
	if len(s.offs) > 0 {
		if err := s.spill(); err != nil {
			return nil, err
		}
	}
	for len(s.runs) > maxMergeFanIn {
		if err := s.mergePass(); err != nil {
			return nil, err
		}
	}
	return s.merger(s.runs)
}

// mergePass merges the first maxMergeFanIn runs into one.
func (s *ExternalSorter) mergePass() error {
	group := s.runs[:maxMergeFanIn]
	m, err := s.merger(group)
	if err != nil {
		return err
	}
	f, err := s.io.CreateSpillFile(s.name)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 64<<10)
	var buf []byte
	var n int64
	for {
		k, v, ok, err := m.Next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		buf = appendEntry(buf[:0], k, v)
		if _, err := w.Write(buf); err != nil {
			return fmt.Errorf("runtime: writing a merged run: %w", err)
		}
		n += int64(len(buf))
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("runtime: writing a merged run: %w", err)
	}
	s.Spilled += n
	s.io.AddSpilled(n)
	for _, r := range group {
		if err := s.io.RemoveSpillFile(r); err != nil {
			return err
		}
	}
	s.runs = append([]*os.File{f}, s.runs[maxMergeFanIn:]...)
	return nil
}

// Close frees the memory and deletes the runs. Idempotent.
func (s *ExternalSorter) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.free()
	var errs []error
	for _, f := range s.runs {
		errs = append(errs, s.io.RemoveSpillFile(f))
	}
	s.runs = nil
	return errors.Join(errs...)
}

type memIter struct {
	s *ExternalSorter
	i int
}

func (it *memIter) Next() ([]byte, []byte, bool, error) {
	if it.i >= len(it.s.offs) {
		return nil, nil, false, nil
	}
	k, v, _ := splitEntry(it.s.entry(it.s.offs[it.i]))
	it.i++
	return k, v, true, nil
}

// runReader reads one sorted run.
type runReader struct {
	r    *bufio.Reader
	k, v []byte
	seq  int // run index: ties keep run order (stable)
}

func (r *runReader) advance() (bool, error) {
	kl, err := binary.ReadUvarint(r.r)
	if err == io.EOF {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("runtime: reading a sort run: %w", err)
	}
	r.k = grow(r.k, int(kl))
	if _, err := io.ReadFull(r.r, r.k); err != nil {
		return false, fmt.Errorf("runtime: reading a sort run: %w", err)
	}
	vl, err := binary.ReadUvarint(r.r)
	if err != nil {
		return false, fmt.Errorf("runtime: reading a sort run: %w", err)
	}
	r.v = grow(r.v, int(vl))
	if _, err := io.ReadFull(r.r, r.v); err != nil {
		return false, fmt.Errorf("runtime: reading a sort run: %w", err)
	}
	return true, nil
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n, max(n, 2*cap(b)))
	}
	return b[:n]
}

type runHeap []*runReader

func (h runHeap) Len() int { return len(h) }
func (h runHeap) Less(i, j int) bool {
	if c := bytes.Compare(h[i].k, h[j].k); c != 0 {
		return c < 0
	}
	return h[i].seq < h[j].seq
}
func (h runHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)   { *h = append(*h, x.(*runReader)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type mergeIter struct {
	h    runHeap
	last *runReader // returned last: advanced on the next call
	k, v []byte
}

func (s *ExternalSorter) merger(runs []*os.File) (*mergeIter, error) {
	m := &mergeIter{}
	for i, f := range runs {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("runtime: reading a sort run: %w", err)
		}
		r := &runReader{r: bufio.NewReaderSize(f, mergeBufferSize), seq: i}
		ok, err := r.advance()
		if err != nil {
			return nil, err
		}
		if ok {
			m.h = append(m.h, r)
		}
	}
	heap.Init(&m.h)
	return m, nil
}

func (m *mergeIter) Next() ([]byte, []byte, bool, error) {
	if m.last != nil {
		ok, err := m.last.advance()
		if err != nil {
			return nil, nil, false, err
		}
		if ok {
			heap.Fix(&m.h, 0)
		} else {
			heap.Pop(&m.h)
		}
		m.last = nil
	}
	if len(m.h) == 0 {
		return nil, nil, false, nil
	}
	top := m.h[0]
	m.last = top
	return top.k, top.v, true, nil
}

// Spill writes the current run to disk and frees its memory, if it holds
// any: for a caller that needs the budget back (a hash aggregation that
// handed its table to the sorter).
func (s *ExternalSorter) Spill() error {
	if s.closed || len(s.offs) == 0 {
		return nil
	}
	return s.spill()
}
