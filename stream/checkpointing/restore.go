package checkpointing

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	goruntime "runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gofl/gofl/rpc/pb"
	"github.com/gofl/gofl/stream/runtime"
)

// Restore builds what subtask (of parallelism, out of maxParallelism key
// groups) starts from: per operator its own key groups, read by region
// from the old subtasks' state files, and its list states redistributed
// (SPLIT: the old subtasks' elements concatenated in subtask order, of N
// elements [i*N/p, (i+1)*N/p); UNION: all; BROADCAST: old subtask 0's).
// A nil tr is a fresh start (nil, nil). A missing, truncated or corrupt
// file, or handles that contradict each other, fail with an error naming
// the file; the task then fails and the JobMaster decides. It blocks on
// storage, bounded by ctx.
func Restore(ctx context.Context, fss *FileSystems, tr *pb.TaskRestore, subtask, parallelism, maxParallelism int) (*runtime.TaskRestore, error) {
	return restore(ctx, fss, nil, &RestoreStats{}, tr, subtask, parallelism, maxParallelism)
}

// restore is Restore trying local copies in local first (local.go).
func restore(ctx context.Context, fss *FileSystems, local *TaskLocalStateStore, st *RestoreStats, tr *pb.TaskRestore, subtask, parallelism, maxParallelism int) (*runtime.TaskRestore, error) {
	if tr == nil {
		return nil, nil
	}
	if parallelism <= 0 || subtask < 0 || subtask >= parallelism {
		return nil, fmt.Errorf("checkpointing: restoring subtask %d of parallelism %d", subtask, parallelism)
	}
	if maxParallelism <= 0 {
		maxParallelism = parallelism
	}
	start, end := runtime.KeyGroupRange(subtask, parallelism, maxParallelism)
	byOp := map[string][]*pb.OperatorSubtaskStateHandle{}
	var order []string
	for _, h := range tr.Operators {
		if h == nil {
			continue
		}
		if _, ok := byOp[h.OperatorId]; !ok {
			order = append(order, h.OperatorId)
		}
		byOp[h.OperatorId] = append(byOp[h.OperatorId], h)
	}
	rd := &reader{ctx: ctx, fss: fss, location: tr.Location, files: map[string]*fileReads{},
		local: local, stats: st, checkpointID: tr.CheckpointId, subtask: subtask, parallelism: parallelism}
	out := &runtime.TaskRestore{CheckpointID: tr.CheckpointId, Operators: map[string]*runtime.OperatorRestore{}}
	for _, id := range order {
		hs := byOp[id]
		sort.SliceStable(hs, func(i, j int) bool { return hs[i].SubtaskIndex < hs[j].SubtaskIndex })
		or := &runtime.OperatorRestore{Keyed: map[int]map[string][]byte{}, Lists: map[string][][]byte{}, StateTypes: map[string]string{}, Finished: true}
		out.Operators[id] = or
		owner := map[int]int32{} // key group -> old subtask, to catch overlaps
		for _, h := range hs {
			or.Finished = or.Finished && h.Finished
			for k, v := range h.StateTypes {
				or.StateTypes[k] = v
			}
			if len(h.KeyGroups) > 0 && h.MaxParallelism != 0 && int(h.MaxParallelism) != maxParallelism {
				return nil, fmt.Errorf("checkpointing: operator %s was checkpointed with max parallelism %d, it now has %d; keyed state cannot be redistributed",
					id, h.MaxParallelism, maxParallelism)
			}
			for _, kg := range h.KeyGroups {
				g := int(kg.KeyGroup)
				if g < start || g > end {
					continue
				}
				if prev, dup := owner[g]; dup {
					return nil, fmt.Errorf("%w: operator %s: key group %d is in the state of subtasks %d and %d", ErrCorrupt, id, g, prev, h.SubtaskIndex)
				}
				owner[g] = h.SubtaskIndex
				if err := rd.addMapped(id, h, kg.Region, or, func(body []byte) error {
					sections, err := decodeSections(body)
					if err != nil {
						return err
					}
					// Only the state backend keeps "state:" sections, and
					// it keeps or with them (see addMapped); the others
					// are decoded by whoever reads them, which may keep
					// them: copies.
					for n, d := range sections {
						if !strings.HasPrefix(n, "state:") {
							sections[n] = slices.Clone(d)
						}
					}
					or.Keyed[g] = sections
					return nil
				}); err != nil {
					return nil, err
				}
			}
		}
		if err := restoreLists(rd, id, hs, subtask, parallelism, or); err != nil {
			return nil, err
		}
		for _, h := range hs {
			if err := restoreInFlight(rd, id, h, subtask, parallelism, out); err != nil {
				return nil, err
			}
		}
	}
	if err := rd.run(); err != nil {
		return nil, err
	}
	return out, nil
}

// restoreLists plans the reads of the list-state elements subtask gets.
func restoreLists(rd *reader, id string, hs []*pb.OperatorSubtaskStateHandle, subtask, parallelism int, or *runtime.OperatorRestore) error {
	type elem struct {
		h *pb.OperatorSubtaskStateHandle
		r *pb.StateFileRegion
	}
	modes := map[string]pb.OperatorStateMode{}
	elems := map[string][]elem{}
	var names []string
	for _, h := range hs {
		for _, l := range h.ListStates {
			m, seen := modes[l.Name]
			if !seen {
				names = append(names, l.Name)
				modes[l.Name] = l.Mode
				elems[l.Name] = nil
			} else if m != l.Mode {
				return fmt.Errorf("%w: operator %s: list state %q is %v in one subtask and %v in another", ErrCorrupt, id, l.Name, m, l.Mode)
			}
			if l.Mode == pb.OperatorStateMode_OPERATOR_STATE_MODE_BROADCAST && seen {
				continue // every subtask holds the same copy: the first one's is read
			}
			for _, r := range l.Elements {
				elems[l.Name] = append(elems[l.Name], elem{h, r})
			}
		}
	}
	for _, name := range names {
		all := elems[name]
		pick := all
		if modes[name] == pb.OperatorStateMode_OPERATOR_STATE_MODE_SPLIT || modes[name] == pb.OperatorStateMode_OPERATOR_STATE_MODE_UNSPECIFIED {
			n := len(all)
			pick = all[subtask*n/parallelism : (subtask+1)*n/parallelism]
		}
		got := make([][]byte, len(pick))
		or.Lists[name] = got
		for i, e := range pick {
			if err := rd.add(id, e.h, e.r, func(body []byte) error { got[i] = body; return nil }); err != nil {
				return err
			}
		}
	}
	return nil
}

// reader collects the regions to read per file and reads each file once,
// in offset order, seeking past what it does not need.
type reader struct {
	ctx      context.Context
	fss      *FileSystems
	location string
	files    map[string]*fileReads
	order    []string

	// local, if set, is tried first for the files this subtask wrote
	// (local.go); stats counts the sources.
	local                *TaskLocalStateStore
	stats                *RestoreStats
	checkpointID         int64
	subtask, parallelism int
}

type fileReads struct {
	uri    string
	file   *pb.StateFile
	op     string
	size   int64
	inline []byte
	reads  []regionRead
	// subtask and parallelism of the handle that wrote the file.
	subtask, parallelism int32
}

type regionRead struct {
	r  *pb.StateFileRegion
	fn func(body []byte) error
	// owner, if set, lets fn's body alias a mapped file (see addMapped).
	owner *runtime.OperatorRestore
}

// uri is where a handle's file lives: relative paths resolve against the
// checkpoint's directory.
func (rd *reader) uri(p string) string {
	if strings.Contains(p, "://") || rd.location == "" {
		return p
	}
	return strings.TrimSuffix(rd.location, "/") + "/" + p
}

// add plans the read of region r of h's file; fn gets the checked body,
// its own to keep.
func (rd *reader) add(op string, h *pb.OperatorSubtaskStateHandle, r *pb.StateFileRegion, fn func([]byte) error) error {
	return rd.addMapped(op, h, r, nil, fn)
}

// addMapped is add where fn's body may alias a local file mapped into
// memory, which stays mapped while owner is reachable: what fn keeps of
// the body, only owner (or holders of owner) may keep.
func (rd *reader) addMapped(op string, h *pb.OperatorSubtaskStateHandle, r *pb.StateFileRegion, owner *runtime.OperatorRestore, fn func([]byte) error) error {
	f := h.File
	if f == nil || (f.Path == "" && len(f.Inline) == 0) {
		return fmt.Errorf("%w: operator %s subtask %d refers to state but has no file", ErrCorrupt, op, h.SubtaskIndex)
	}
	if r == nil || r.Offset < int64(headerLen) || r.Length < crcLen {
		return fmt.Errorf("%w: operator %s subtask %d: bad region %v", ErrCorrupt, op, h.SubtaskIndex, r)
	}
	var key, uri string
	if len(f.Inline) > 0 {
		key, uri = fmt.Sprintf("inline:%p", f), fmt.Sprintf("the inline state of operator %s subtask %d", op, h.SubtaskIndex)
	} else {
		uri = rd.uri(f.Path)
		key = uri
	}
	fr := rd.files[key]
	if fr == nil {
		fr = &fileReads{uri: uri, file: f, op: op, size: f.Size, inline: f.Inline, subtask: h.SubtaskIndex, parallelism: h.Parallelism}
		rd.files[key] = fr
		rd.order = append(rd.order, key)
	}
	if fr.size > 0 && r.Offset+r.Length > fr.size {
		return fmt.Errorf("%w: %s: region [%d, %d) beyond its size %d", ErrCorrupt, uri, r.Offset, r.Offset+r.Length, fr.size)
	}
	fr.reads = append(fr.reads, regionRead{r: r, fn: fn, owner: owner})
	return nil
}

func (rd *reader) run() error {
	for _, key := range rd.order {
		fr := rd.files[key]
		if rd.local.readLocal(rd, fr) {
			rd.stats.LocalFiles++
			rd.stats.LocalBytes += fr.file.GetSize()
			continue
		}
		if err := rd.readFile(fr); err != nil {
			return fmt.Errorf("checkpointing: restoring operator %s from %s: %w", fr.op, fr.uri, err)
		}
		if fr.inline == nil {
			rd.stats.RemoteFiles++
			rd.stats.RemoteBytes += fr.file.GetSize()
		}
	}
	return nil
}

func (rd *reader) readFile(fr *fileReads) error {
	var src io.Reader
	if fr.inline != nil {
		src = bytes.NewReader(fr.inline)
	} else {
		fsys, p, err := rd.fss.Resolve(rd.ctx, fr.uri)
		if err != nil {
			return err
		}
		rc, err := fsys.Open(rd.ctx, path.Clean(p))
		if err != nil {
			return err
		}
		defer rc.Close()
		src = rc
	}
	return rd.readFrom(fr, src)
}

// readFrom reads fr's regions out of src, a reader positioned at the
// file's start (seekable or not), and hands each checked body on; a
// local file is read with positioned reads in parallel.
func (rd *reader) readFrom(fr *fileReads, src io.Reader) error {
	sort.SliceStable(fr.reads, func(i, j int) bool { return fr.reads[i].r.Offset < fr.reads[j].r.Offset })
	if ra, ok := src.(io.ReaderAt); ok && fr.inline == nil && len(fr.reads) > 1 {
		return rd.readAt(ra, fr)
	}
	var h [headerLen]byte
	if _, err := io.ReadFull(src, h[:]); err != nil {
		return fmt.Errorf("%w: reading the header: %v", ErrCorrupt, err)
	}
	if err := checkHeader(h[:]); err != nil {
		return err
	}
	pos := int64(headerLen)
	seeker, _ := src.(io.Seeker)
	var last *pb.StateFileRegion
	var lastBody []byte
	for _, rr := range fr.reads {
		if err := rd.ctx.Err(); err != nil {
			return err
		}
		off := rr.r.Offset
		if last != nil && off == last.Offset && rr.r.Length == last.Length { // a shared region
			if err := rr.fn(slices.Clone(lastBody)); err != nil {
				return fmt.Errorf("region [%d, %d): %w", off, off+rr.r.Length, err)
			}
			continue
		}
		switch {
		case off == pos:
		case seeker != nil:
			if _, err := seeker.Seek(off, io.SeekStart); err != nil {
				return err
			}
		case off > pos:
			if _, err := io.CopyN(io.Discard, src, off-pos); err != nil {
				return fmt.Errorf("%w: skipping to offset %d: %v", ErrCorrupt, off, err)
			}
		default:
			return fmt.Errorf("%w: overlapping regions at offset %d", ErrCorrupt, off)
		}
		buf := make([]byte, rr.r.Length)
		if _, err := io.ReadFull(src, buf); err != nil {
			return fmt.Errorf("%w: reading [%d, %d): %v", ErrCorrupt, off, off+rr.r.Length, err)
		}
		pos = off + rr.r.Length
		body, err := checkBlob(buf)
		if err != nil {
			return fmt.Errorf("region [%d, %d): %w", off, pos, err)
		}
		last, lastBody = rr.r, body
		if err := rr.fn(body); err != nil {
			return fmt.Errorf("region [%d, %d): %w", off, pos, err)
		}
	}
	return nil
}

// readAt reads the regions of a file that supports positioned reads (a
// local file): mapped into memory when it can be, else each region in one
// large read into its own buffer; a few goroutines check the regions, and
// then they are handed on in offset order.
func (rd *reader) readAt(ra io.ReaderAt, fr *fileReads) error {
	var h [headerLen]byte
	if _, err := ra.ReadAt(h[:], 0); err != nil {
		return fmt.Errorf("%w: reading the header: %v", ErrCorrupt, err)
	}
	if err := checkHeader(h[:]); err != nil {
		return err
	}
	end := int64(headerLen)
	for _, rr := range fr.reads {
		if rr.r.Offset < end {
			return fmt.Errorf("%w: overlapping regions at offset %d", ErrCorrupt, rr.r.Offset)
		}
		end = rr.r.Offset + rr.r.Length
	}
	var m *mapping
	if f, ok := ra.(*os.File); ok {
		if m = mapFile(f); m != nil {
			defer m.release()
			if int64(len(m.data)) < end {
				return fmt.Errorf("%w: the file has %d bytes, its regions end at %d", ErrCorrupt, len(m.data), end)
			}
		}
	}
	bodies := make([][]byte, len(fr.reads))
	errs := make([]error, len(fr.reads))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(goruntime.GOMAXPROCS(0), len(fr.reads), maxReaders) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(fr.reads) {
					return
				}
				if errs[i] = rd.ctx.Err(); errs[i] != nil {
					return
				}
				r := fr.reads[i].r
				var buf []byte
				if m != nil {
					buf = m.data[r.Offset : r.Offset+r.Length : r.Offset+r.Length]
				} else {
					buf = make([]byte, r.Length)
					if n, err := ra.ReadAt(buf, r.Offset); n < len(buf) {
						errs[i] = fmt.Errorf("%w: reading [%d, %d): %v", ErrCorrupt, r.Offset, r.Offset+r.Length, err)
						continue
					}
				}
				if bodies[i], errs[i] = checkBlob(buf); errs[i] != nil {
					errs[i] = fmt.Errorf("region [%d, %d): %w", r.Offset, r.Offset+r.Length, errs[i])
				}
			}
		})
	}
	wg.Wait()
	retained := map[*runtime.OperatorRestore]bool{}
	for i, rr := range fr.reads {
		if errs[i] != nil {
			return errs[i]
		}
		if err := rd.ctx.Err(); err != nil {
			return err
		}
		body := bodies[i]
		if m != nil {
			if rr.owner == nil {
				body = slices.Clone(body)
			} else if !retained[rr.owner] {
				retained[rr.owner] = true
				m.retain(rr.owner)
			}
		}
		if err := rr.fn(body); err != nil {
			return fmt.Errorf("region [%d, %d): %w", rr.r.Offset, rr.r.Offset+rr.r.Length, err)
		}
	}
	return nil
}

// maxReaders bounds the goroutines reading one state file.
const maxReaders = 4
