package stream

import (
	"fmt"
	"time"

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
// without line terminators and without timestamps. path is a plain path, a
// file:// or an hdfs:// URI (see package storage; on a cluster the HDFS
// client has the TaskManager's fs.hdfs.* and security.kerberos.*
// settings). It is TextFileSource through FromSource: the JobMaster's split
// enumerator (the local executor's stand-in) cuts the files into splits,
// one per HDFS block or DefaultFileSplitSize bytes, and hands them out to
// the subtasks that ask, preferring one on a host of the split's block; a
// subtask reads the lines that start in its splits, as Flink's
// TextInputFormat reads its splits. Its progress shows in REST and `gofl
// run`.
func TextFile(env *Environment, path string) DataStream[string] {
	if err := checkFileURI(path); err != nil {
		env.fail(fmt.Errorf("TextFile: %w", err))
	}
	s := FromSource[string](env, &TextFileSource{Path: path, untimed: true}, SourceWatermarks{NoWatermarks: true}, "TextFile Source")
	s.n.params["path"] = path
	return s
}
