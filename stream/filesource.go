package stream

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/stream/source"
)

// FileSplit is a byte range of a file; its reader reads the lines that
// start in it (as TextFile's ranges). Exact marks a Start that is a line
// start (a split resumed from a checkpoint).
type FileSplit struct {
	Path       string
	Start, End int64
	Exact      bool
	// Hosts hold a replica of the split's data (HDFS block hosts); a
	// reader on one of them is preferred. Empty: no preference.
	Hosts []string
}

// SplitID implements source.Split.
func (s FileSplit) SplitID() string { return fmt.Sprintf("%s:%d", s.Path, s.Start) }

// fileEnumState is the file enumerator's checkpoint: the splits not
// assigned yet, once the files were listed.
type fileEnumState struct {
	Listed bool
	Splits []FileSplit
}

// DefaultFileSplitSize is the split size of TextFileSource (and TextFile)
// on file systems without blocks: Flink's local block size (32 MiB), which
// its file source splits along. Each split costs its reader a round trip
// to the JobMaster and the JobMaster a few events; the readers still end
// together, as the last splits are cut into shrinking pieces (tailPiece).
const DefaultFileSplitSize = 32 << 20

// TextFileSource reads the lines of a file or directory (as TextFile)
// through the Source API: the JobMaster's enumerator cuts the files into
// splits (one per block on HDFS, SplitSize bytes elsewhere) and hands them
// out one at a time to the reader that asks, so fast readers take more, and
// a failed reader's unfinished splits go back to the pool. A reader asks
// for its next split as soon as it starts one, so the next is there when
// it finishes. Records carry their ingestion time as timestamp. Use it
// with FromSource; TextFile is this source without timestamps.
type TextFileSource struct {
	Path      string
	SplitSize int64
	// pace, for tests, runs before each record of subtask's reader.
	pace func(subtask int)
	// untimed emits the records without timestamps (TextFile).
	untimed bool
	// listing is what PreferredHosts listed in the JobMaster, which the
	// first enumerator takes instead of asking the NameNode again.
	listing []FileSplit
}

const textFileCoordinator = "gofl.text-file"

func init() {
	source.RegisterSource(textFileCoordinator, func(config []byte) (source.Source[string, FileSplit, fileEnumState], error) {
		var s TextFileSource
		if err := json.Unmarshal(config, &s); err != nil {
			return nil, err
		}
		return &s, nil
	})
}

// Coordinator implements source.CoordinatedSource.
func (s *TextFileSource) Coordinator() (string, []byte, error) {
	if err := checkFileURI(s.Path); err != nil {
		return "", nil, err
	}
	b, err := json.Marshal(s)
	return textFileCoordinator, b, err
}

// Boundedness implements source.Source.
func (s *TextFileSource) Boundedness() source.Boundedness { return source.Bounded }

// CreateEnumerator implements source.Source.
func (s *TextFileSource) CreateEnumerator(ctx source.SplitEnumeratorContext[FileSplit]) (source.SplitEnumerator[FileSplit, fileEnumState], error) {
	return &fileEnumerator{src: s, ctx: ctx, reading: map[string]FileSplit{}, finished: map[fileSplitKey]int64{}}, nil
}

// RestoreEnumerator implements source.Source.
func (s *TextFileSource) RestoreEnumerator(ctx source.SplitEnumeratorContext[FileSplit], st fileEnumState) (source.SplitEnumerator[FileSplit, fileEnumState], error) {
	e := &fileEnumerator{src: s, ctx: ctx, listed: st.Listed, pool: st.Splits, reading: map[string]FileSplit{}, finished: map[fileSplitKey]int64{}}
	e.counted()
	return e, nil
}

// CreateReader implements source.Source.
func (s *TextFileSource) CreateReader(ctx source.ReaderContext) (source.SourceReader[string, FileSplit], error) {
	return &fileReader{src: s, ctx: ctx}, nil
}

// fileEnumerator lists the files off the coordinator's goroutine and then
// answers requests from its pool; requests that came before the listing
// wait for it.
type fileEnumerator struct {
	src     *TextFileSource
	ctx     source.SplitEnumeratorContext[FileSplit]
	listed  bool
	pool    []FileSplit
	waiting []splitRequest
	// err is the listing's failure, sent to every reader that asks (the
	// reader fails with it; the job restarts and lists again).
	err error
	// Progress: reading are the splits handed out, by ID; a reader
	// reports each it finished (finishedEvent), which then counts in
	// finished. total is what the listing (or the restored pool: progress
	// after a restore counts from there) held.
	reading           map[string]FileSplit
	finished          map[fileSplitKey]int64 // bytes of each finished split
	total, bytesTotal int64
}

type fileSplitKey struct {
	path  string
	start int64
}

func splitBytes(sp FileSplit) int64 { return max(sp.End-sp.Start, 0) }

// counted sets the totals to the pool's.
func (e *fileEnumerator) counted() {
	e.total, e.bytesTotal = int64(len(e.pool)), 0
	for _, sp := range e.pool {
		e.bytesTotal += splitBytes(sp)
	}
}

// Progress implements source.ProgressReporter: splits finished of those
// listed.
func (e *fileEnumerator) Progress() (source.Progress, bool) {
	if !e.listed || e.err != nil {
		return source.Progress{}, false
	}
	p := source.Progress{Done: int64(len(e.finished)), Total: e.total, BytesTotal: e.bytesTotal}
	for _, b := range e.finished {
		p.BytesDone += b
	}
	return p, true
}

// splitRequest is a reader's request waiting for the listing.
type splitRequest struct {
	subtask int
	host    string
}

func (e *fileEnumerator) Start() error {
	if e.listed {
		return nil
	}
	e.ctx.CallAsync(func() (any, error) {
		if splits := e.src.listing; splits != nil {
			e.src.listing = nil // a later enumerator (after a failover) lists afresh
			return splits, nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return listFileSplits(ctx, e.src.Path, e.src.SplitSize)
	}, func(v any, err error) {
		if err != nil {
			e.err = err
		} else {
			e.pool = v.([]FileSplit)
			e.counted()
		}
		e.listed = true
		waiting := e.waiting
		e.waiting = nil
		for _, r := range waiting {
			e.HandleSplitRequest(r.subtask, r.host)
		}
	}, 0, 0)
	return nil
}

func (e *fileEnumerator) HandleSplitRequest(sub int, host string) {
	if !e.listed {
		e.waiting = append(e.waiting, splitRequest{sub, host})
		return
	}
	if e.err != nil {
		e.ctx.SendEventToSourceReader(sub, []byte(e.err.Error()))
		return
	}
	if len(e.pool) == 0 {
		e.ctx.SignalNoMoreSplits(sub)
		return
	}
	i := localSplit(e.pool, host)
	sp := e.pool[i]
	e.pool = append(e.pool[:i], e.pool[i+1:]...)
	if n := e.tailPiece(sp); n < splitBytes(sp) {
		// The rest stays where it was in the pool, for the next request
		// (on the same hosts), and starts inside a line.
		rest := FileSplit{Path: sp.Path, Start: sp.Start + n, End: sp.End, Hosts: sp.Hosts}
		sp.End = rest.Start
		e.pool = slices.Insert(e.pool, i, rest)
		e.total++
	}
	e.reading[sp.SplitID()] = sp
	fileLocality.count(e.src.Path, sp, host)
	e.ctx.AssignSplits(map[int][]FileSplit{sub: {sp}})
}

// minTailPiece bounds the pieces tailPiece cuts from below (with a 32nd
// of the split): a request per piece is a round trip to the JobMaster,
// hidden behind the reading of a piece this large (readers ask for the
// next split as they start one).
const minTailPiece = 512 << 10

// tailPiece returns how many bytes of sp, just taken from the pool, to
// hand out: all of it, until the pool holds less than 2p splits of its
// size for the p readers; from there a 2p-th of what is left, at least a
// 32nd of sp (and minTailPiece), so the pieces shrink towards the end
// and the readers finish within a small piece of each other, whenever
// they started (guided self-scheduling), instead of one reading a whole
// last split while the others idle.
func (e *fileEnumerator) tailPiece(sp FileSplit) int64 {
	size := splitBytes(sp)
	n := int64(2 * max(e.ctx.CurrentParallelism(), 1))
	left := size
	for _, o := range e.pool {
		if left += splitBytes(o); left >= n*size {
			return size // far from the end (and at most 2p splits summed)
		}
	}
	piece := max(left/n, size/32, minTailPiece)
	if size-piece < minTailPiece {
		return size
	}
	return piece
}

// localSplit picks the split for a reader on host, as Flink's
// LocatableInputSplitAssigner: the first one with a replica on host, else
// the first one no reader could read locally, else the first.
func localSplit(pool []FileSplit, host string) int {
	anyHosts := -1
	for i, sp := range pool {
		if host != "" && slices.Contains(sp.Hosts, host) {
			return i
		}
		if len(sp.Hosts) == 0 && anyHosts < 0 {
			anyHosts = i
		}
	}
	return max(anyHosts, 0)
}

func (e *fileEnumerator) AddSplitsBack(splits []FileSplit, sub int) {
	for _, sp := range splits { // read again: not finished after all
		delete(e.reading, sp.SplitID())
		delete(e.finished, fileSplitKey{sp.Path, sp.Start})
	}
	e.pool = append(append([]FileSplit(nil), splits...), e.pool...)
}

// finishedEvent prefixes the split ID a reader sends when it finished the
// split (for the progress).
const finishedEvent = "finished:"

func (e *fileEnumerator) AddReader(int) {}

// HandleSourceEvent counts a split its reader finished. IDs the
// enumerator did not hand out (a split resumed from a checkpoint) are not
// in the progress's total either, and are ignored.
func (e *fileEnumerator) HandleSourceEvent(_ int, ev []byte) {
	id, ok := strings.CutPrefix(string(ev), finishedEvent)
	if !ok {
		return
	}
	if sp, ok := e.reading[id]; ok {
		delete(e.reading, id)
		e.finished[fileSplitKey{sp.Path, sp.Start}] = splitBytes(sp)
	}
}
func (e *fileEnumerator) SnapshotState(int64) (fileEnumState, error) {
	return fileEnumState{Listed: e.listed && e.err == nil, Splits: append([]FileSplit(nil), e.pool...)}, nil
}
func (e *fileEnumerator) NotifyCheckpointComplete(int64) error { return nil }
func (e *fileEnumerator) Close() error                         { return nil }

// listFileSplits cuts the files of path into ranges of size bytes, or
// along their blocks, with the blocks' hosts, where the file system stores
// files in blocks on hosts (storage.BlockLocator: HDFS).
func listFileSplits(ctx context.Context, path string, size int64) ([]FileSplit, error) {
	if size <= 0 {
		size = DefaultFileSplitSize
	}
	fs, root, err := openFileSystem(path)
	if err != nil {
		return nil, err
	}
	defer fs.Close()
	fi, err := fs.Stat(ctx, root)
	if err != nil {
		return nil, err
	}
	files := []storage.FileInfo{fi}
	if fi.IsDir {
		ents, err := fs.ReadDir(ctx, root)
		if err != nil {
			return nil, err
		}
		files = files[:0]
		for _, e := range ents {
			if !e.IsDir && !strings.HasPrefix(e.Name, ".") && !strings.HasPrefix(e.Name, "_") {
				files = append(files, e)
			}
		}
	}
	var out []FileSplit
	locator, _ := fs.(storage.BlockLocator)
	for _, f := range files {
		if locator != nil && f.Size > 0 {
			if splits := blockSplits(ctx, locator, f); splits != nil {
				out = append(out, splits...)
				continue
			}
		}
		size := size
		if f.BlockSize > 0 {
			size = f.BlockSize // one split per HDFS block
		}
		for start := int64(0); start < f.Size; start += size {
			out = append(out, FileSplit{Path: f.Path, Start: start, End: min(start+size, f.Size)})
		}
	}
	return out, nil
}

// PreferredHosts implements source.HostPreferrer: the bytes of the files'
// blocks on each host, as the NameNode reports them; nil off HDFS (no
// hosts to prefer, and no need to list the files twice).
func (s *TextFileSource) PreferredHosts(ctx context.Context) (map[string]int64, error) {
	if !strings.HasPrefix(s.Path, "hdfs://") {
		return nil, nil
	}
	splits, err := listFileSplits(ctx, s.Path, s.SplitSize)
	if err != nil {
		return nil, err
	}
	s.listing = splits
	var hosts map[string]int64
	for _, sp := range splits {
		for _, h := range sp.Hosts {
			if hosts == nil {
				hosts = map[string]int64{}
			}
			hosts[h] += splitBytes(sp)
		}
	}
	return hosts, nil
}

// blockSplits cuts f along its blocks, each split with its block's hosts;
// nil when the NameNode does not say (the WebHDFS call failed, or the
// blocks do not cover the file): locality is an optimization, so the
// caller then cuts f by its block size without hosts.
func blockSplits(ctx context.Context, locator storage.BlockLocator, f storage.FileInfo) []FileSplit {
	bls, err := locator.BlockLocations(ctx, f.Path, 0, f.Size)
	if err != nil {
		return nil
	}
	var out []FileSplit
	next := int64(0)
	for _, b := range bls {
		if b.Offset != next || b.Length <= 0 {
			return nil
		}
		out = append(out, FileSplit{Path: f.Path, Start: b.Offset, End: min(b.Offset+b.Length, f.Size), Hosts: b.Hosts})
		next = b.Offset + b.Length
	}
	if next < f.Size {
		return nil
	}
	return out
}

// FileSplitLocality counts the splits the TextFileSource enumerators of
// this process assigned for a source path: Local ones went to a reader on
// one of the split's hosts, Remote ones to a reader elsewhere (or whose
// host is unknown), None ones had no hosts (not HDFS, or the NameNode did
// not say). For monitoring and tests: the enumerators run in the
// JobMaster, so these are the JobManager process's counts.
type FileSplitLocality struct {
	Local, Remote, None int64
}

// FileSourceLocality returns the locality counts of path's TextFileSource
// enumerators in this process (zero when none ran).
func FileSourceLocality(path string) FileSplitLocality {
	fileLocality.mu.Lock()
	defer fileLocality.mu.Unlock()
	return fileLocality.byPath[path]
}

var fileLocality = &localityStats{byPath: map[string]FileSplitLocality{}}

type localityStats struct {
	mu     sync.Mutex
	byPath map[string]FileSplitLocality
}

func (l *localityStats) count(path string, sp FileSplit, host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.byPath[path]
	switch {
	case len(sp.Hosts) == 0:
		c.None++
	case host != "" && slices.Contains(sp.Hosts, host):
		c.Local++
	default:
		c.Remote++
	}
	l.byPath[path] = c
}

// fileReader reads one split at a time (Flink's FileSourceReader), and asks
// for the next as soon as it starts one, so that the JobMaster's answer
// arrives while it reads: its queue holds at most that one.
type fileReader struct {
	src       *TextFileSource
	ctx       source.ReaderContext
	fs        storage.FileSystem
	queue     []FileSplit
	noMore    bool
	requested bool
	failure   error

	f     io.ReadCloser
	lines lineReader // over f
	cur   FileSplit
	pos   int64
}

func (r *fileReader) Start() error {
	fs, _, err := openFileSystem(r.src.Path)
	if err != nil {
		return err
	}
	r.fs = fs
	return nil
}

func (r *fileReader) AddSplits(splits []FileSplit) {
	r.queue = append(r.queue, splits...)
	r.requested = false
}
func (r *fileReader) NotifyNoMoreSplits() { r.noMore = true }
func (r *fileReader) HandleSourceEvent(ev []byte) {
	r.failure = fmt.Errorf("listing the files of %s: %s", r.src.Path, ev)
}

func (r *fileReader) PollNext(out source.ReaderOutput[string]) (source.InputStatus, time.Time, error) {
	if r.failure != nil {
		return 0, time.Time{}, r.failure
	}
	for i := 0; i < pollBatch; i++ {
		if r.f == nil {
			if len(r.queue) == 0 {
				if r.noMore {
					return source.EndOfInput, time.Time{}, nil
				}
				r.prefetch()
				return source.NothingAvailable, time.Now().Add(time.Second), nil
			}
			sp := r.queue[0]
			r.queue = r.queue[1:]
			if err := r.open(sp); err != nil {
				return 0, time.Time{}, err
			}
			r.prefetch()
		}
		if r.pos >= r.cur.End {
			r.finish()
			continue
		}
		line, n, err := r.lines.next()
		r.pos += int64(n)
		if n > 0 {
			if r.src.pace != nil {
				r.src.pace(r.ctx.SubtaskIndex())
			}
			ts := source.NoTimestamp
			if !r.src.untimed {
				ts = time.Now().UnixMilli()
			}
			out.Collect(line, ts)
		}
		if err == io.EOF {
			r.finish()
		} else if err != nil {
			return 0, time.Time{}, err
		}
	}
	return source.MoreAvailable, time.Time{}, nil
}

// open positions the reader at the first line starting in sp.
func (r *fileReader) open(sp FileSplit) error {
	f, err := r.fs.Open(context.Background(), sp.Path)
	if err != nil {
		return err
	}
	r.f, r.cur, r.pos = f, sp, sp.Start
	skipTo := sp.Start
	if !sp.Exact && sp.Start > 0 {
		skipTo = sp.Start - 1 // the line that contains Start-1 belongs to the split before
	}
	if seeker, ok := f.(io.Seeker); ok {
		_, err = seeker.Seek(skipTo, io.SeekStart)
	} else {
		_, err = io.CopyN(io.Discard, f, skipTo)
	}
	if err != nil {
		return err
	}
	r.lines.r = bufio.NewReaderSize(f, 64<<10)
	if !sp.Exact && sp.Start > 0 {
		skipped, err := r.lines.skip()
		r.pos = skipTo + int64(skipped)
		if err == io.EOF {
			r.pos = sp.End
		} else if err != nil {
			return err
		}
	}
	return nil
}

// prefetch asks for the split after the current one.
func (r *fileReader) prefetch() {
	if len(r.queue) == 0 && !r.noMore && !r.requested {
		r.requested = true
		r.ctx.SendSplitRequest()
	}
}

// finish closes the current split and tells the enumerator (progress).
func (r *fileReader) finish() {
	r.close()
	r.ctx.SendSourceEvent([]byte(finishedEvent + r.cur.SplitID()))
}

func (r *fileReader) close() {
	if r.f != nil {
		r.f.Close()
		r.f, r.lines.r = nil, nil
	}
}

// SnapshotState returns the rest of the current split (from the next
// line) and the splits not started.
func (r *fileReader) SnapshotState(int64) ([]FileSplit, error) {
	var out []FileSplit
	if r.f != nil && r.pos < r.cur.End {
		out = append(out, FileSplit{Path: r.cur.Path, Start: r.pos, End: r.cur.End, Exact: true})
	}
	return append(out, r.queue...), nil
}

func (r *fileReader) NotifyCheckpointComplete(int64) error { return nil }

func (r *fileReader) Close() error {
	r.close()
	if r.fs != nil {
		return r.fs.Close()
	}
	return nil
}
