package stream

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gofl/gofl/storage"
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
	items     []T
	next, end int
	ctx       *runtime.Context
}

func (s *sliceSource[T]) Open(ctx *runtime.Context) error {
	s.ctx = ctx
	n := len(s.items)
	s.next = ctx.SubtaskIndex * n / ctx.Parallelism
	s.end = (ctx.SubtaskIndex + 1) * n / ctx.Parallelism
	return nil
}

func (s *sliceSource[T]) Poll(out runtime.Output) (runtime.PollStatus, time.Time, error) {
	for i := 0; i < pollBatch && s.next < s.end; i++ {
		out.Collect(runtime.Record{Value: s.items[s.next]})
		s.next++
	}
	if s.next >= s.end {
		return runtime.EndOfInput, time.Time{}, nil
	}
	return runtime.MoreAvailable, time.Time{}, nil
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
	next    int64
	end     int64
	stride  int64
	emitted int64
	start   time.Time
	ctx     *runtime.Context
}

func (s *genSource[T]) Open(ctx *runtime.Context) error {
	s.ctx = ctx
	p, k := int64(ctx.Parallelism), int64(ctx.SubtaskIndex)
	if s.n >= 0 {
		s.next, s.end, s.stride = k*s.n/p, (k+1)*s.n/p, 1
	} else {
		s.next, s.end, s.stride = k, -1, p
	}
	if s.rate > 0 {
		s.rate /= float64(p)
	}
	s.start = time.Now()
	return nil
}

func (s *genSource[T]) Poll(out runtime.Output) (runtime.PollStatus, time.Time, error) {
	budget := int64(pollBatch)
	if s.rate > 0 {
		allowed := int64(time.Since(s.start).Seconds()*s.rate) + 1
		if allowed-s.emitted < budget {
			budget = allowed - s.emitted
		}
		if budget <= 0 {
			wait := time.Duration(float64(s.emitted+1-allowed+1) / s.rate * float64(time.Second))
			return runtime.NothingAvailable, time.Now().Add(max(wait, time.Millisecond)), nil
		}
	}
	for i := int64(0); i < budget; i++ {
		if s.end >= 0 && s.next >= s.end {
			return runtime.EndOfInput, time.Time{}, nil
		}
		out.Collect(runtime.Record{Value: s.fn(s.next)})
		s.next += s.stride
		s.emitted++
	}
	if s.end >= 0 && s.next >= s.end {
		return runtime.EndOfInput, time.Time{}, nil
	}
	return runtime.MoreAvailable, time.Time{}, nil
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

type textSplit struct {
	path       string
	start, end int64
}

type textSource struct {
	path   string
	fs     storage.FileSystem
	splits []textSplit
	f      io.ReadCloser
	r      *bufio.Reader
	pos    int64
	end    int64
}

func (s *textSource) Open(ctx *runtime.Context) error {
	fs, root, err := openFileSystem(s.path)
	if err != nil {
		return err
	}
	s.fs = fs
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
			s.splits = append(s.splits, textSplit{path: f.Path, start: start, end: end})
		}
	}
	return nil
}

// openSplit positions the reader at the first line starting in the split.
func (s *textSource) openSplit(sp textSplit) error {
	f, err := s.fs.Open(context.Background(), sp.path)
	if err != nil {
		return err
	}
	s.f, s.end, s.pos = f, sp.end, sp.start
	if sp.start > 0 {
		if seeker, ok := f.(io.Seeker); ok {
			_, err = seeker.Seek(sp.start-1, io.SeekStart)
		} else {
			_, err = io.CopyN(io.Discard, f, sp.start-1)
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
			out.Collect(runtime.Record{Value: line})
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
