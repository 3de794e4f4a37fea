package runtime

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"os"
)

// HashJoinFuncs receive a hybrid hash join's results as encoded values.
// The slices are valid only during the call.
type HashJoinFuncs struct {
	// Match is called for every probe entry and build entry with equal
	// keys.
	Match func(probe, build []byte) error
	// ProbeUnmatched, optional (a probe-side outer join), is called for
	// every probe entry no build entry has the key of.
	ProbeUnmatched func(probe []byte) error
	// BuildUnmatched, optional (a build-side outer join), is called for
	// every build entry no probe entry has the key of.
	BuildUnmatched func(build []byte) error
}

// hashJoinPartitions is the fan-out of one level of a hybrid hash join.
const hashJoinPartitions = 32

// maxHashJoinLevel is the deepest recursion into spilled partitions; past
// it (or when re-partitioning does not split a partition: one hot key), a
// spilled partition is joined block-nested-loop style: chunks of its build
// side that fit in memory, each against a scan of its probe side (a
// variable for tests).
var maxHashJoinLevel = 3

// hashIndexBytes is what a build entry's index takes (next, bucket heads
// at load <= 1/2, matched flag), accounted with the entry.
const hashIndexBytes = 16

// spillWriterSize is the write buffer of a spilled partition's file.
const spillWriterSize = 8 << 10

// HybridHashJoin is Flink's hybrid hash join (MutableHashTable): the build
// side is hash-partitioned into pages of managed memory; when the budget
// has no page left, the largest partition is spilled to disk and its
// later build entries go to its file. Probe entries of partitions in
// memory are joined at once; those of spilled partitions are written to
// the partition's probe file, and Finish joins each spilled partition's
// files recursively with a new hash function. Keys compare as bytes.
//
// Use: AddBuild for the whole build side, EndBuild, Probe for the whole
// probe side, Finish, and Close always. Not safe for concurrent use: one
// task goroutine calls it.
type HybridHashJoin struct {
	mem   *MemoryManager
	io    *IOManager
	name  string
	fns   HashJoinFuncs
	seed  maphash.Seed
	level int
	parts []hjPartition
	built bool
	total int64 // build entries added
	child *HybridHashJoin
	buf   []byte
	// Spilled is the bytes this join (and its recursion) wrote to disk.
	Spilled int64
	closed  bool
}

type hjPartition struct {
	entryPages
	build, probe   *os.File
	buildW, probeW *bufio.Writer
	nBuild, nProbe int64   // entries written to the files
	heads          []int32 // bucket -> first entry + 1
	next           []int32 // entry -> next entry of its bucket + 1
	mask           uint32
	matched        []bool
}

func (p *hjPartition) spilled() bool { return p.build != nil }

// NewHybridHashJoin returns a join reserving from m's memory and spilling
// through m's I/O manager; name prefixes its spill files.
func NewHybridHashJoin(m BatchMemory, name string, fns HashJoinFuncs) *HybridHashJoin {
	return newHybridHashJoin(m.Memory, m.IO, name, fns, 0)
}

func newHybridHashJoin(mem *MemoryManager, iom *IOManager, name string, fns HashJoinFuncs, level int) *HybridHashJoin {
	j := &HybridHashJoin{mem: mem, io: iom, name: name, fns: fns, seed: maphash.MakeSeed(), level: level, parts: make([]hjPartition, hashJoinPartitions)}
	for i := range j.parts {
		j.parts[i].mem = mem
	}
	return j
}

func (j *HybridHashJoin) partition(k []byte) (*hjPartition, uint64) {
	h := maphash.Bytes(j.seed, k)
	return &j.parts[h%hashJoinPartitions], h
}

// AddBuild copies a build entry into the table, spilling partitions when
// the budget has no room.
func (j *HybridHashJoin) AddBuild(k, v []byte) error {
	if j.closed || j.built {
		return errors.New("runtime: hash join: build side ended")
	}
	j.total++
	p, _ := j.partition(k)
	if p.spilled() {
		return j.writeSpilled(p.buildW, &p.nBuild, k, v)
	}
	n := entrySize(k, v)
	for !p.tryReserve(n, hashIndexBytes) {
		victim := j.largest()
		if victim == nil {
			// Nothing in memory: overdraw, to progress.
			p.forceReserve(n, hashIndexBytes)
			break
		}
		if err := j.spillPartition(victim); err != nil {
			return err
		}
		if p.spilled() {
			return j.writeSpilled(p.buildW, &p.nBuild, k, v)
		}
	}
	p.add(k, v, n)
	return nil
}

// largest is the in-memory partition holding the most, nil when none
// holds anything.
func (j *HybridHashJoin) largest() *hjPartition {
	var best *hjPartition
	for i := range j.parts {
		p := &j.parts[i]
		if !p.spilled() && len(p.offs) > 0 && (best == nil || p.held > best.held) {
			best = p
		}
	}
	return best
}

func (j *HybridHashJoin) newSpillFile(side string) (*os.File, *bufio.Writer, error) {
	f, err := j.io.CreateSpillFile(fmt.Sprintf("%s-l%d-%s", j.name, j.level, side))
	if err != nil {
		return nil, nil, err
	}
	return f, bufio.NewWriterSize(f, spillWriterSize), nil
}

// spillPartition writes p's build entries to its build file and frees its
// memory; its later build and probe entries go to files.
func (j *HybridHashJoin) spillPartition(p *hjPartition) error {
	f, w, err := j.newSpillFile("build")
	if err != nil {
		return err
	}
	p.build, p.buildW = f, w
	n, err := p.writeTo(w)
	if err != nil {
		return fmt.Errorf("runtime: hash join: spilling a partition: %w", err)
	}
	j.Spilled += n
	j.io.AddSpilled(n)
	p.nBuild += int64(len(p.offs))
	p.free()
	return nil
}

func (j *HybridHashJoin) writeSpilled(w *bufio.Writer, count *int64, k, v []byte) error {
	j.buf = appendEntry(j.buf[:0], k, v)
	if _, err := w.Write(j.buf); err != nil {
		return fmt.Errorf("runtime: hash join: writing a spilled partition: %w", err)
	}
	*count++
	j.Spilled += int64(len(j.buf))
	j.io.AddSpilled(int64(len(j.buf)))
	return nil
}

// EndBuild ends the build side and indexes the partitions in memory.
func (j *HybridHashJoin) EndBuild() {
	j.built = true
	for i := range j.parts {
		if p := &j.parts[i]; !p.spilled() {
			p.index(j.seed, j.fns.BuildUnmatched != nil)
		}
	}
}

// index builds p's bucket chains (memory accounted per entry in
// hashIndexBytes).
func (p *hjPartition) index(seed maphash.Seed, outer bool) {
	n := len(p.offs)
	size := 1
	for size < n*2 {
		size <<= 1
	}
	p.heads = make([]int32, size)
	p.next = make([]int32, n)
	p.mask = uint32(size - 1)
	if outer {
		p.matched = make([]bool, n)
	}
	for i, o := range p.offs {
		k, _, _ := splitEntry(p.entry(o))
		b := uint32(maphash.Bytes(seed, k)>>32) & p.mask
		p.next[i] = p.heads[b]
		p.heads[b] = int32(i + 1)
	}
}

// lookup calls fn with every build value of key k (hash h); it reports
// whether there was one.
func (p *hjPartition) lookup(h uint64, k, probe []byte, fns *HashJoinFuncs) (bool, error) {
	found := false
	for i := p.heads[uint32(h>>32)&p.mask]; i != 0; i = p.next[i-1] {
		bk, bv, _ := splitEntry(p.entry(p.offs[i-1]))
		if !bytes.Equal(bk, k) {
			continue
		}
		found = true
		if p.matched != nil {
			p.matched[i-1] = true
		}
		if err := fns.Match(probe, bv); err != nil {
			return found, err
		}
	}
	return found, nil
}

// Probe joins a probe entry with the build entries of its key, or defers
// it to Finish when its partition spilled.
func (j *HybridHashJoin) Probe(k, v []byte) error {
	if !j.built {
		return errors.New("runtime: hash join: probe before the build side ended")
	}
	p, h := j.partition(k)
	if p.spilled() {
		if p.probe == nil {
			f, w, err := j.newSpillFile("probe")
			if err != nil {
				return err
			}
			p.probe, p.probeW = f, w
		}
		return j.writeSpilled(p.probeW, &p.nProbe, k, v)
	}
	found, err := p.lookup(h, k, v, &j.fns)
	if err == nil && !found && j.fns.ProbeUnmatched != nil {
		err = j.fns.ProbeUnmatched(v)
	}
	return err
}

// Finish ends the probe side: the unmatched build entries of the
// partitions in memory (a build-side outer join), then the spilled
// partitions, each joined recursively.
func (j *HybridHashJoin) Finish() error {
	for i := range j.parts {
		p := &j.parts[i]
		if p.spilled() {
			continue
		}
		if err := p.emitUnmatched(&j.fns); err != nil {
			return err
		}
		p.release()
	}
	for i := range j.parts {
		p := &j.parts[i]
		if !p.spilled() {
			continue
		}
		if err := j.joinSpilled(p); err != nil {
			return err
		}
	}
	return nil
}

// emitUnmatched hands the build entries no probe matched to
// BuildUnmatched (a build-side outer join only).
func (p *hjPartition) emitUnmatched(fns *HashJoinFuncs) error {
	if p.matched == nil {
		return nil
	}
	for e, o := range p.offs {
		if !p.matched[e] {
			_, bv, _ := splitEntry(p.entry(o))
			if err := fns.BuildUnmatched(bv); err != nil {
				return err
			}
		}
	}
	return nil
}

// release frees p's memory and index.
func (p *hjPartition) release() {
	p.free()
	p.heads, p.next, p.matched = nil, nil, nil
}

// spillReader reads a spilled partition's file from its start.
type spillReader struct {
	f *os.File
	runReader
}

// openSpilled flushes w and returns a reader of f from its start; nil
// when f is.
func openSpilled(f *os.File, w *bufio.Writer) (*spillReader, error) {
	if f == nil {
		return nil, nil
	}
	if err := w.Flush(); err != nil {
		return nil, fmt.Errorf("runtime: hash join: writing a spilled partition: %w", err)
	}
	r := &spillReader{f: f, runReader: runReader{r: bufio.NewReaderSize(f, mergeBufferSize)}}
	return r, r.rewind()
}

func (r *spillReader) rewind() error {
	if _, err := r.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("runtime: hash join: reading a spilled partition: %w", err)
	}
	r.r.Reset(r.f)
	return nil
}

// scan calls fn for every entry from the start, with its position.
func (r *spillReader) scan(fn func(i int64, k, v []byte) error) error {
	if r == nil {
		return nil
	}
	if err := r.rewind(); err != nil {
		return err
	}
	for i := int64(0); ; i++ {
		ok, err := r.advance()
		if err != nil || !ok {
			return err
		}
		if err := fn(i, r.k, r.v); err != nil {
			return err
		}
	}
}

// joinSpilled joins a spilled partition's files: with a child join of the
// next level, or block-nested-loop when the levels are exhausted or the
// last level did not split the build side.
func (j *HybridHashJoin) joinSpilled(p *hjPartition) error {
	defer j.removeFiles(p)
	if (p.nProbe == 0 && j.fns.BuildUnmatched == nil) || (p.nBuild == 0 && j.fns.ProbeUnmatched == nil) {
		return nil
	}
	br, err := openSpilled(p.build, p.buildW)
	if err != nil {
		return err
	}
	pr, err := openSpilled(p.probe, p.probeW)
	if err != nil {
		return err
	}
	if j.level+1 >= maxHashJoinLevel || (j.level > 0 && p.nBuild == j.total) {
		return j.nestedLoop(br, pr, p.nProbe)
	}
	c := newHybridHashJoin(j.mem, j.io, j.name, j.fns, j.level+1)
	j.child = c
	defer func() {
		j.Spilled += c.Spilled
		_ = c.Close()
		j.child = nil
	}()
	if err := br.scan(func(_ int64, k, v []byte) error { return c.AddBuild(k, v) }); err != nil {
		return err
	}
	c.EndBuild()
	if err := pr.scan(func(_ int64, k, v []byte) error { return c.Probe(k, v) }); err != nil {
		return err
	}
	return c.Finish()
}

// nestedLoop joins a partition's build side in chunks that fit the
// budget (at least one entry), each indexed and joined with a scan of the
// whole probe side; probe entries matched by some chunk are marked in a
// bitset for a probe-side outer join.
func (j *HybridHashJoin) nestedLoop(br, pr *spillReader, nProbe int64) error {
	var probeMatched []uint64
	if j.fns.ProbeUnmatched != nil {
		probeMatched = make([]uint64, (nProbe+63)/64)
	}
	chunk := &hjPartition{}
	chunk.mem = j.mem
	defer chunk.release()
	seed := maphash.MakeSeed()
	more := br != nil
	pending := false
	for more {
		// Load a chunk.
		for {
			if !pending {
				ok, err := br.advance()
				if err != nil {
					return err
				}
				if !ok {
					more = false
					break
				}
			}
			n := entrySize(br.k, br.v)
			if !chunk.tryReserve(n, hashIndexBytes) {
				if len(chunk.offs) > 0 {
					pending = true
					break
				}
				chunk.forceReserve(n, hashIndexBytes)
			}
			chunk.add(br.k, br.v, n)
			pending = false
		}
		if len(chunk.offs) == 0 {
			break
		}
		chunk.index(seed, j.fns.BuildUnmatched != nil)
		if err := pr.scan(func(i int64, k, v []byte) error {
			found, err := chunk.lookup(maphash.Bytes(seed, k), k, v, &j.fns)
			if found && probeMatched != nil {
				probeMatched[i/64] |= 1 << (i % 64)
			}
			return err
		}); err != nil {
			return err
		}
		if err := chunk.emitUnmatched(&j.fns); err != nil {
			return err
		}
		chunk.release()
	}
	if probeMatched == nil {
		return nil
	}
	return pr.scan(func(i int64, _, v []byte) error {
		if probeMatched[i/64]&(1<<(i%64)) != 0 {
			return nil
		}
		return j.fns.ProbeUnmatched(v)
	})
}

// removeFiles deletes p's spill files.
func (j *HybridHashJoin) removeFiles(p *hjPartition) error {
	var errs []error
	for _, f := range []*os.File{p.build, p.probe} {
		if f != nil {
			errs = append(errs, j.io.RemoveSpillFile(f))
		}
	}
	p.build, p.probe, p.buildW, p.probeW = nil, nil, nil, nil
	return errors.Join(errs...)
}

// Close frees the memory and deletes the spill files, the recursion's
// too. Idempotent.
func (j *HybridHashJoin) Close() error {
	if j.closed {
		return nil
	}
	j.closed = true
	var errs []error
	if j.child != nil {
		errs = append(errs, j.child.Close())
		j.child = nil
	}
	for i := range j.parts {
		p := &j.parts[i]
		p.release()
		errs = append(errs, j.removeFiles(p))
	}
	return errors.Join(errs...)
}
