package stream

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gofl/gofl/storage"
	"github.com/gofl/gofl/stream/codec"
	"github.com/gofl/gofl/stream/runtime"
)

// pollBatch is how many records a source emits per poll.
const pollBatch = 256

func addSource[T any](env *Environment, kind, name string, bounded bool, newSrc func() runtime.Source) DataStream[T] {
	n := env.newNode(kind, name)
	n.source = true
	n.bounded = bounded
	n.newSource = newSrc
	setCodec[T](n)
	return DataStream[T]{env: env, n: n}
}

// FromCollection emits items in order. Like Flink's fromCollection it runs
// at parallelism 1 unless set otherwise; at parallelism p subtask i emits
// the i-th contiguous part.
func FromCollection[T any](env *Environment, items []T) DataStream[T] {
	s := addSource[T](env, "source-collection", "Collection Source", true, func() runtime.Source {
		return &sliceSource[T]{items: items}
	})
	s.n.parallelism = 1
	s.n.params["count"] = len(items)
	return s
}

// FromElements is FromCollection of its arguments.
func FromElements[T any](env *Environment, items ...T) DataStream[T] {
	return FromCollection(env, items)
}

type sliceSource[T any] struct {
	items []T
	seqs  indexSplits
}

func (s *sliceSource[T]) Open(ctx *runtime.Context) error {
	n := int64(len(s.items))
	k, p := int64(ctx.SubtaskIndex), int64(ctx.Parallelism)
	return s.seqs.open(ctx, "collection-splits", indexSplit{Next: k * n / p, End: (k + 1) * n / p, Stride: 1})
}

func (s *sliceSource[T]) Poll(out runtime.Output) (runtime.PollStatus, time.Time, error) {
	if s.seqs.emit(pollBatch, func(i int64) { out.Collect(runtime.Record{Value: s.items[i]}) }) {
		return runtime.EndOfInput, time.Time{}, nil
	}
	return runtime.MoreAvailable, time.Time{}, nil
}

// SnapshotState stores the position of every split this subtask reads.
func (s *sliceSource[T]) SnapshotState(_ int64, snap *runtime.OperatorSnapshot) error {
	return s.seqs.snapshot(snap)
}

func (s *sliceSource[T]) Close() error { return nil }

// GenerateOption configures Generate.
type GenerateOption func(*genConfig)

type genConfig struct {
	rate float64
}

// RateLimit caps the generator at perSecond records per second in total
// (split evenly across its subtasks).
func RateLimit(perSecond float64) GenerateOption { return func(c *genConfig) { c.rate = perSecond } }

// Generate emits fn(i) for i in [0, n), or for ever when n < 0, like
// Flink's DataGeneratorSource. Bounded, subtask k of p produces the k-th
// contiguous range of indexes; unbounded, indexes k, k+p, k+2p, ...
func Generate[T any](env *Environment, n int64, fn func(i int64) T, opts ...GenerateOption) DataStream[T] {
	var c genConfig
	for _, o := range opts {
		o(&c)
	}
	s := addSource[T](env, "source-generator", "Generator Source", n >= 0, func() runtime.Source {
		return &genSource[T]{n: n, fn: fn, rate: c.rate}
	})
	s.n.params["count"] = n
	s.n.params["rate"] = c.rate
	return s
}

type genSource[T any] struct {
	n       int64
	fn      func(int64) T
	rate    float64
	seqs    indexSplits
	emitted int64
	start   time.Time
}

func (s *genSource[T]) Open(ctx *runtime.Context) error {
	p, k := int64(ctx.Parallelism), int64(ctx.SubtaskIndex)
	initial := indexSplit{Next: k, End: -1, Stride: p}
	if s.n >= 0 {
		initial = indexSplit{Next: k * s.n / p, End: (k + 1) * s.n / p, Stride: 1}
	}
	if s.rate > 0 {
		s.rate /= float64(p)
	}
	s.start = time.Now()
	return s.seqs.open(ctx, "generator-splits", initial)
}

func (s *genSource[T]) Poll(out runtime.Output) (runtime.PollStatus, time.Time, error) {
	budget := int64(pollBatch)
	if s.rate > 0 {
		allowed := int64(time.Since(s.start).Seconds()*s.rate) + 1
		if allowed-s.emitted < budget {
			budget = allowed - s.emitted
		}
		if budget <= 0 && len(s.seqs.splits) > 0 {
			wait := time.Duration(float64(s.emitted+1-allowed+1) / s.rate * float64(time.Second))
			return runtime.NothingAvailable, time.Now().Add(max(wait, time.Millisecond)), nil
		}
	}
	if s.seqs.emit(int(budget), func(i int64) {
		out.Collect(runtime.Record{Value: s.fn(i)})
		s.emitted++
	}) {
		return runtime.EndOfInput, time.Time{}, nil
	}
	return runtime.MoreAvailable, time.Time{}, nil
}

// SnapshotState stores the next index of every sequence this subtask
// generates, so a restore resumes each exactly.
func (s *genSource[T]) SnapshotState(_ int64, snap *runtime.OperatorSnapshot) error {
	return s.seqs.snapshot(snap)
}

func (s *genSource[T]) Close() error { return nil }

// TextFile reads the lines of a file, or of every file in a directory (in
// name order, skipping names that start with "." or "_", as Flink does),
// without line terminators. path is a plain path, a file:// or an hdfs://
// URI (see package storage; on a cluster the HDFS client has the
// TaskManager's fs.hdfs.* and security.kerberos.* settings). Each file is
// cut into as many byte ranges as the source has subtasks; a subtask reads
// the lines that start in its ranges, as Flink's TextInputFormat reads its
// splits.
func TextFile(env *Environment, path string) DataStream[string] {
	if err := checkFileURI(path); err != nil {
		env.fail(fmt.Errorf("TextFile: %w", err))
	}
	s := addSource[string](env, "source-textfile", "TextFile Source", true, func() runtime.Source {
		return &textSource{path: path}
	})
	s.n.params["path"] = path
	return s
}

// textSplit is a byte range of a file whose lines (those starting in it)
// a subtask reads; one element of the source's SPLIT list state. Exact
// marks a Start that is a line start (a resumed split), which is read from
// there instead of from the next line.
type textSplit struct {
	Path       string
	Start, End int64
	Exact      bool
}

var textSplitCodec = codec.MustFor[textSplit]()

const (
	textSplitState = "textfile-splits"
	textSplitType  = "TextSplit"
)

type textSource struct {
	path   string
	fs     storage.FileSystem
	splits []textSplit
	f      io.ReadCloser
	r      *bufio.Reader
	cur    textSplit // the split being read
	pos    int64
	end    int64
	box    boxer[string]
}

func (s *textSource) Open(ctx *runtime.Context) error {
	fs, root, err := openFileSystem(s.path)
	if err != nil {
		return err
	}
	s.fs = fs
	if ctx.Restore != nil {
		return s.restore(ctx)
	}
	fi, err := fs.Stat(context.Background(), root)
	if err != nil {
		return err
	}
	files := []storage.FileInfo{fi}
	if fi.IsDir {
		ents, err := fs.ReadDir(context.Background(), root)
		if err != nil {
			return err
		}
		files = files[:0]
		for _, e := range ents { // sorted by name
			if !e.IsDir && !strings.HasPrefix(e.Name, ".") && !strings.HasPrefix(e.Name, "_") {
				files = append(files, e)
			}
		}
	}
	par, k := int64(ctx.Parallelism), int64(ctx.SubtaskIndex)
	for _, f := range files {
		if start, end := k*f.Size/par, (k+1)*f.Size/par; end > start {
			s.splits = append(s.splits, textSplit{Path: f.Path, Start: start, End: end})
		}
	}
	return nil
}

// restore reads the restored splits instead of listing the files.
func (s *textSource) restore(ctx *runtime.Context) error {
	if err := ctx.Restore.CheckType(textSplitState, textSplitType); err != nil {
		return err
	}
	for _, b := range ctx.Restore.Lists[textSplitState] {
		sp, n, err := textSplitCodec.Decode(b)
		if err == nil && n != len(b) {
			err = fmt.Errorf("%w: trailing bytes", codec.ErrCorrupt)
		}
		if err != nil {
			return fmt.Errorf("source %q: restoring its splits: %w", ctx.OperatorName, err)
		}
		s.splits = append(s.splits, sp)
	}
	return nil
}

// SnapshotState stores the unread part of the current split (from the
// next line) and the splits not started.
func (s *textSource) SnapshotState(_ int64, snap *runtime.OperatorSnapshot) error {
	var els [][]byte
	if s.f != nil && s.pos < s.end {
		els = append(els, textSplitCodec.Append(nil, textSplit{Path: s.cur.Path, Start: s.pos, End: s.end, Exact: true}))
	}
	for _, sp := range s.splits {
		els = append(els, textSplitCodec.Append(nil, sp))
	}
	snap.PutList(textSplitState, runtime.SplitList, textSplitType, els)
	return nil
}

// openSplit positions the reader at the first line starting in the split.
func (s *textSource) openSplit(sp textSplit) error {
	f, err := s.fs.Open(context.Background(), sp.Path)
	if err != nil {
		return err
	}
	s.f, s.end, s.pos, s.cur = f, sp.End, sp.Start, sp
	if sp.Exact {
		if seeker, ok := f.(io.Seeker); ok {
			_, err = seeker.Seek(sp.Start, io.SeekStart)
		} else {
			_, err = io.CopyN(io.Discard, f, sp.Start)
		}
		if err != nil {
			return err
		}
		s.r = bufio.NewReaderSize(f, 64<<10)
		return nil
	}
	if sp.Start > 0 {
		if seeker, ok := f.(io.Seeker); ok {
			_, err = seeker.Seek(sp.Start-1, io.SeekStart)
		} else {
			_, err = io.CopyN(io.Discard, f, sp.Start-1)
		}
		if err != nil {
			return err
		}
		s.r = bufio.NewReaderSize(f, 64<<10)
		skip, err := s.r.ReadSlice('\n')
		for err == bufio.ErrBufferFull {
			n := len(skip)
			skip, err = s.r.ReadSlice('\n')
			s.pos += int64(n)
		}
		s.pos += int64(len(skip)) - 1
		if err == io.EOF {
			s.pos = s.end
		} else if err != nil {
			return err
		}
		return nil
	}
	s.r = bufio.NewReaderSize(f, 64<<10)
	return nil
}

func (s *textSource) Poll(out runtime.Output) (runtime.PollStatus, time.Time, error) {
	for i := 0; i < pollBatch; i++ {
		if s.f == nil {
			if len(s.splits) == 0 {
				return runtime.EndOfInput, time.Time{}, nil
			}
			sp := s.splits[0]
			s.splits = s.splits[1:]
			if err := s.openSplit(sp); err != nil {
				return 0, time.Time{}, err
			}
		}
		if s.pos >= s.end {
			s.closeFile()
			continue
		}
		line, err := s.r.ReadString('\n')
		s.pos += int64(len(line))
		if len(line) > 0 {
			line = strings.TrimSuffix(line, "\n")
			line = strings.TrimSuffix(line, "\r")
			out.Collect(runtime.Record{Value: s.box.of(line)})
		}
		if err == io.EOF {
			s.closeFile()
		} else if err != nil {
			return 0, time.Time{}, err
		}
	}
	return runtime.MoreAvailable, time.Time{}, nil
}

func (s *textSource) closeFile() {
	if s.f != nil {
		s.f.Close()
		s.f, s.r = nil, nil
	}
}

func (s *textSource) Close() error {
	s.closeFile()
	if s.fs != nil {
		return s.fs.Close()
	}
	return nil
}
